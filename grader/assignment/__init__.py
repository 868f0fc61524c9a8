"""The assignment as data: the model (`model`), YAML loading with line numbers (`yamlio`,
`fields`, `loader`, `quiz`), generated inputs (`generators`), per-student variants (`variants`),
prompts as Markdown (`render`), and the JSON Schemas of the files."""
