"""Exports: the course and its quiz in the formats other platforms read.

One module per target, each a pure function of the loaded course (or quiz) that returns
text or bytes, or writes one output: the same input always gives byte-identical files.

- `otter`: otter-grader exception-format tests and an `otter assign` master notebook
  (what those tests call at grading time is `grader.grading.otter_checks`)
- `notebook`: the student notebook (prompts, stubs, check cells)
- `github_classroom`: `.github/workflows/classroom.yml` for GitHub Classroom
- `qti`: the concept quiz as a Canvas QTI 1.2 zip
- `moodle`: the concept quiz as Moodle XML
- `archive`: deterministic zip files; `markup`: the small Markdown-to-HTML the quiz exports use;
  `pysource`: a Python module split into imports and functions (stubs and model answers)
"""
__all__: list[str] = []
