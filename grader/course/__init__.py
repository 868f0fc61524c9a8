"""The assignment as data: the model (`model`), YAML loading with line numbers (`yamlio`,
`fields`, `loader`, `quiz`), generated inputs (`generators`), per-student seeds (`seeds`),
prompts as Markdown (`render`), and the JSON Schemas of the files."""
