"""Jupyter notebooks as submissions: the code cells that define the API, as an attention.py.

A notebook is student data: it is read like any student file (student_files: no link, a
regular file, at most MAX_BYTES) and parsed as JSON within bounds on its nesting and size (no
nbformat, no kernel); no cell is run here. From each code cell this keeps the top-level imports, function
and class definitions and assignments, in order, and drops everything else: calls and prints
(a student's scratch tests), shell and magic lines (`!mha check`, `%timeit`), imports of the
checking tools (`grader`, `otter`) and assignments that use them (`grader = otter.Notebook()`),
assignments that call a graded function, and the check cells the exported notebook tags
`mha-check`. A cell that is not valid Python is kept as it is, so the grader reports its
syntax error like any other. Later definitions win, as they do in the kernel.

`check(problem)` is the helper the exported notebook's check cells call: it does the same with
the cells the kernel has run and runs `mha check` on the result.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable

from ..attention.api import FUNCTIONS
from ..errors import SubmissionError
from ..sandbox.codec import Bounds, DecodeError, loads_bounded
from .student_files import open_folder, read_student_file

__all__ = ["CHECK_TAG", "MAX_BYTES", "definitions", "code_cells", "notebook_cells", "extract_source",
           "notebook_source", "check"]

CHECK_TAG = "mha-check"     # cells with this tag are never part of the submission
MAX_BYTES = 32 << 20        # notebooks with outputs can be large; this bounds what is read
# a notebook is a few levels deep (cells, outputs, their data); images are single strings
BOUNDS = Bounds(bytes=MAX_BYTES, nodes=1 << 19, depth=32)
_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
         ast.Assign, ast.AnnAssign, ast.AugAssign)
_MAGIC = ("!", "%")
TOOLS = frozenset({"grader", "otter"})   # checking tools: never part of a submission


def _tool_names(node: ast.AST) -> set[str] | None:
    """The names a tool import binds (None when `node` imports no tool)."""
    if isinstance(node, ast.Import) and any(a.name.split(".")[0] in TOOLS for a in node.names):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in TOOLS:
        return {a.asname or a.name for a in node.names}
    return None


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _calls_api(node: ast.AST, api: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in api
               for n in ast.walk(node))


def definitions(source: str, api: Iterable[str] = FUNCTIONS) -> str:
    """The statements of one cell that belong in attention.py (see the module docstring)."""
    if source.lstrip().startswith("%%"):  # a cell magic: the whole cell is not Python
        return ""
    lines = source.split("\n")
    python = "\n".join("" if line.lstrip().startswith(_MAGIC) else line for line in lines)
    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # `1+1+...` 100,000 long recurses
        return python  # kept as it is: the sandbox reports the error (with its line) when it imports it
    api = frozenset(api)
    tools = set(TOOLS)
    kept = []
    for node in tree.body:
        bound = _tool_names(node)
        if bound is not None:
            tools |= bound
            continue
        if not isinstance(node, _KEPT):
            continue
        value = getattr(node, "value", None)  # of an assignment (None for `x: int`)
        if value is not None and (_calls_api(value, api) or _uses(value, tools)):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        kept.append("\n".join(lines[first - 1:node.end_lineno]))
    return "\n".join(kept)


def _assemble(cells: Iterable[tuple[str, str]], origin: str) -> str:
    parts = [f"# The definitions in {origin}, extracted by mha (calls, prints and magics are left out).\n"]
    for label, source in cells:
        code = definitions(source)
        if code.strip():
            parts.append(f"# {label}\n{code.rstrip()}\n")
    return "\n".join(parts)


def code_cells(ipynb_path: Path) -> list[tuple[str, str]]:
    """(label, source) of every code cell not tagged mha-check; SubmissionError if the file
    cannot be read (a link, too large...) or is not a notebook."""
    path = Path(ipynb_path)
    try:
        folder = open_folder(path.parent, follow=True)
    except OSError as exc:
        raise SubmissionError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        file = read_student_file(folder, path.name, MAX_BYTES)
    finally:
        os.close(folder)
    if file.data is None:
        raise SubmissionError(f"{path}: {file.problem or 'no such file'}")
    return notebook_cells(file.data, str(path))


def notebook_cells(raw: bytes, where: str) -> list[tuple[str, str]]:
    """(label, source) of every code cell of the notebook `raw` not tagged mha-check;
    SubmissionError naming `where` if it is not a notebook."""
    try:
        node = loads_bounded(raw.decode("utf-8"), BOUNDS, "the notebook")
    except UnicodeDecodeError as exc:
        raise SubmissionError(f"{where}: not a Jupyter notebook (not UTF-8: {exc.reason})") from None
    except DecodeError as exc:
        raise SubmissionError(f"{where}: not a Jupyter notebook ({exc})") from None
    if not isinstance(node, dict) or not isinstance(node.get("cells"), list):
        raise SubmissionError(f"{where}: not a Jupyter notebook in format 4 (no 'cells' list)")
    found = []
    for number, cell in enumerate(node["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        tags = (cell.get("metadata") or {}).get("tags") if isinstance(cell.get("metadata"), dict) else None
        if isinstance(tags, list) and CHECK_TAG in tags:
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SubmissionError(f"{where}: cell {number} has a source that is neither text nor a list of lines")
        found.append((f"cell {number}", source))
    return found


def extract_source(ipynb_path: Path) -> str:
    """attention.py made of the notebook's definitions (see the module docstring)."""
    return _assemble(code_cells(ipynb_path), Path(ipynb_path).name)


def notebook_source(raw: bytes, name: str) -> str:
    """attention.py made of the definitions of the notebook `raw`, read from the file `name`."""
    return _assemble(notebook_cells(raw, name), name)


def check(problem: str) -> None:
    """In Jupyter: run `mha check PROBLEM` on the definitions of every cell run so far."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is None:
        raise RuntimeError("check() runs inside Jupyter; outside it, use `mha check PROBLEM --path attention.py`")
    history = shell.history_manager.input_hist_raw
    source = _assemble(((f"In[{i}]", text) for i, text in enumerate(history) if text), "this notebook")
    with tempfile.TemporaryDirectory(prefix="mha-check-") as folder:
        path = Path(folder) / "attention.py"
        path.write_text(source, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "grader", "check", problem, "--path", str(path)],
                              capture_output=True, text=True, cwd=os.getcwd())
    print(done.stdout, end="")
    if done.stderr:
        print(done.stderr, end="", file=sys.stderr)
