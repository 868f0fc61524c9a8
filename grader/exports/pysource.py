"""Python modules split into their parts, for exports that put one function per cell."""
from __future__ import annotations

import ast
from dataclasses import field

from ..records import record
from ..starter import starter_files, stub, student_module  # noqa: F401 - the exports' names for them

__all__ = ["Module", "split_module", "stub", "student_module", "starter_files"]


@record
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
