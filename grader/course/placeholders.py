"""The placeholders `mha new problem` writes, and the errors that refuse a course still holding one.

The scaffold (cli/new.py) writes its title, prompt, reference and stub from the texts here, so
the loader recognises exactly what it wrote: a line of the title or prompt that starts with TODO,
a reference whose source still carries MARK or whose docstring is still REFERENCE_DOC, a stub
whose docstring is still STUB_DOC. Only the scaffold's own docstrings count: a TODO an instructor
or a student writes in a docstring of their own is theirs.
"""
from __future__ import annotations

import ast
import inspect
import linecache
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import SpecError

__all__ = ["TITLE", "PROMPT", "MARK", "REFERENCE_DOC", "STUB_DOC", "text_placeholder", "reference_placeholder",
           "stub_placeholders"]

TODO = "TODO"
TITLE = f"{TODO} a short title"
PROMPT = f"{TODO} what the student computes, with a worked example."
MARK = "placeholder from `mha new problem`"  # in the scaffold reference's body: still there means untouched
REFERENCE_DOC = TODO + " what {id} computes: float64, pure (graded problems compare against it)."
STUB_DOC = f"{TODO} what the student writes."

_ASK = {"title": "write the problem's title",
        "prompt": "write what the student computes, with a worked example"}


def text_placeholder(key: str, value: object) -> str | None:
    """The error for a problem's `key` (title or prompt) when a line of it still starts with TODO."""
    if not isinstance(value, str) or not any(line.strip().startswith(TODO) for line in value.splitlines()):
        return None
    return f"{key!r} is still the placeholder from `mha new problem`: {_ASK.get(key, 'replace the TODO')}"


def reference_placeholder(name: str, fn: Callable, code: Path | None) -> SpecError | None:
    """The error for a reference left as the scaffold wrote it (its body, or else its docstring),
    at the line of its `def` in the file that defines it; None when it was edited."""
    try:
        source = inspect.getsourcefile(fn)
        doc_left = inspect.getdoc(fn) == REFERENCE_DOC.format(id=name)
        if source is not None:
            linecache.checkcache(source)  # the course code may have changed since this process read it
        # the whole file first: finding no MARK there spares finding the function's own lines
        if source is None or not (doc_left or any(MARK in line for line in linecache.getlines(source))):
            return None
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    file = Path(source)
    if code is not None and file.resolve() == Path(code).resolve():
        file = Path(code)  # as the course names it, so its errors sort beside the course's other files
    elif code is not None and file.resolve().parent == Path(code).resolve().parent:
        file = Path(code).parent / file.name
    if any(MARK in line for line in lines):
        return SpecError(str(file), start, f"the reference {name}() is still the {MARK}: "
                         "write the real computation")
    if doc_left:
        return SpecError(str(file), start, f"the docstring of the reference {name}() is still the {MARK}: "
                         "say what it computes")
    return None


def stub_placeholders(stubs: Path, names: Iterable[str]) -> list[SpecError]:
    """An error for each stub among `names` in the course's `stubs` file (attention.py, the starter
    students see) whose docstring is still the scaffold's; read, never run."""
    try:
        tree = ast.parse(stubs.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []  # a stub file that cannot be read has nothing of the scaffold's left to find
    wanted = set(names)
    return [SpecError(str(stubs), node.lineno, f"the docstring of the stub {node.name}() is still the {MARK}: "
                      "say what the student writes")
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in wanted
            and ast.get_docstring(node) == STUB_DOC]
