"""Python modules split into their parts, for exports that put one function per cell, and the
student's starter module, made from the course (never copied from the instructor's files)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..attention.api import FunctionSpec

__all__ = ["Module", "split_module", "stub", "student_module", "starter_files"]

DEFAULT_MODULE_DOC = """Your implementations for: {title}.

Replace each `raise NotImplementedError(...)` with your code, then run `mha check`
(or `mha check PROBLEM`) for instant feedback. `mha show PROBLEM` prints the full task.
Do not rename the functions or change their parameters."""


@dataclass(frozen=True)
class Module:
    imports: str                                          # the top-level import lines, in order
    functions: dict[str, str] = field(default_factory=dict)  # name -> its source (decorators included)


def split_module(source: str) -> Module:
    """The imports and the top-level functions of `source` (everything else is left out)."""
    lines = source.split("\n")
    tree = ast.parse(source)
    imports, functions = [], {}
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "\n".join(lines[first - 1:node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = text
    return Module("\n".join(imports), functions)


def _docstring(text: str, indent: str) -> str:
    text = text.strip().replace('"""', '\\"\\"\\"')
    body = text.replace("\n", "\n" + indent).replace(indent + "\n", "\n")
    return f'{indent}"""{body}' + (f"\n{indent}" if "\n\n" in text and not indent else "") + '"""'


def stub(fn: FunctionSpec, doc: str | None = None, problem_id: str | None = None) -> str:
    """A stub for `fn`: its signature, a docstring (`doc`, else its declared signature) and
    `raise NotImplementedError`."""
    params = ", ".join(p.name if p.required else f"{p.name}={p.default!r}" for p in fn.params)
    see = f" (see `mha show {problem_id}`)" if problem_id else ""
    return (f"def {fn.name}({params}):\n{_docstring(doc or fn.signature, '    ')}\n"
            f"    raise NotImplementedError(\"{fn.name}: not implemented yet{see}\")")


def _instructor_parts(source: str | None) -> tuple[str | None, list[str], dict[str, str]]:
    """Of the instructor's attention.py, only what cannot hold an answer: the module's docstring,
    its absolute top-level imports and each function's docstring (never a function's body)."""
    if source is None:
        return None, [], {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None, [], {}
    imports = [ast.unparse(n) for n in tree.body
               if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and not n.level)]
    docs = {n.name: ast.get_docstring(n) for n in tree.body if isinstance(n, ast.FunctionDef) and ast.get_docstring(n)}
    return ast.get_docstring(tree), imports, docs


def student_module(assignment) -> str:
    """attention.py as students get it: one stub per graded function of the course, generated from
    its declarations; from the instructor's own attention.py beside the assignment (which may be
    fully implemented) only the docstrings and imports are taken."""
    from ..paths import SUBMISSION_NAME
    path = assignment.root / SUBMISSION_NAME
    try:
        source = path.read_text(encoding="utf-8") if path.is_file() else None
    except (OSError, UnicodeDecodeError):
        source = None
    module_doc, imports, docs = _instructor_parts(source)
    parts = [_docstring(module_doc or DEFAULT_MODULE_DOC.format(title=assignment.title), "")]
    if imports:
        parts.append("\n".join(imports))
    seen = set()
    for problem in assignment.problems:
        fn = problem.function
        if fn.name in seen:
            continue
        seen.add(fn.name)
        parts.append(stub(fn, docs.get(fn.name) or f"{problem.title}.\n\n{fn.signature}", problem.id))
    head = parts[0] + ("\n" + parts[1] if imports else "")
    return head + "\n\n\n" + "\n\n\n".join(parts[2 if imports else 1:]) + "\n"


def starter_files(assignment) -> dict[str, str]:
    """What a student starts from: attention.py stubs and, with a quiz, a blank answers.yaml."""
    from ..assignment.quiz import answers_template
    from ..paths import SUBMISSION_NAME
    files = {SUBMISSION_NAME: student_module(assignment)}
    if assignment.quiz is not None:
        files["answers.yaml"] = answers_template(assignment.quiz)
    return files
