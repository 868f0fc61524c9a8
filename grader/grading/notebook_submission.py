"""Jupyter notebooks as submissions: the code cells that define the API, as an attention.py.

A notebook is student data: it is read like any student file (student_files: no link, a
regular file, at most MAX_BYTES) and parsed as JSON within bounds on its nesting and size (no
nbformat, no kernel); no cell is run here. Its code cells are bounded like attention.py
(SOURCE_BYTES in all) and each one by what the grader parses (PARSE_BYTES), before any is parsed.
From each code cell this keeps the top-level imports, function
and class definitions and assignments, in order, and drops everything else: calls and prints
(a student's scratch tests), shell and magic lines (`!mha check`, `%timeit`), imports of the
checking tools (`grader`, `otter`) and assignments that use them (`grader = otter.Notebook()`),
assignments that call a graded function, and the check cells the exported notebook tags
`mha-check`. Later definitions win, as they do in the kernel.

A cell that is not valid Python is left out, as the kernel leaves it out when it is run: it
costs only the functions it defines at top level (found by their `def` lines, the cell being
unparsable), each problem of which says the cell's number and the line within it ("cell 7,
line 3: invalid syntax"); the other cells are graded.

Quiz answers: raw cells tagged `mha-answers` (the exported notebook has one per quiz item) are
joined, in order, into the submission's answers.yaml; a notebook without them is graded with
the answers.yaml beside it, if any.

`check(problem)` is the helper the exported notebook's check cells call: it does the same with
the cells the kernel has run and runs `mha check` on the result.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..errors import SubmissionError
from ..records import record
from ..sandbox.codec import Bounds, DecodeError, loads_bounded
from ..sandbox.student_text import one_line
from .student_files import PARSE_BYTES, SOURCE_BYTES, open_folder, read_student_file

__all__ = ["ANSWERS_TAG", "CHECK_TAG", "MAX_BYTES", "BrokenCell", "definitions", "code_cells", "answer_cells", "extract_source",
           "extract_answers", "notebook_parts", "check"]

CHECK_TAG = "mha-check"     # cells with this tag are never part of the submission
ANSWERS_TAG = "mha-answers"  # raw cells with this tag are the quiz answers (answers.yaml lines)
MAX_BYTES = 32 << 20        # notebooks with outputs can be large; this bounds what is read
# a notebook is a few levels deep (cells, outputs, their data); images are single strings
BOUNDS = Bounds(bytes=MAX_BYTES, nodes=1 << 19, depth=32)
_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
         ast.Assign, ast.AnnAssign, ast.AugAssign)
_MAGIC = ("!", "%")
TOOLS = frozenset({"grader", "otter"})   # checking tools: never part of a submission
_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


@record
class BrokenCell:
    """A code cell that is not valid Python: left out of the submission, it costs its functions."""

    label: str                    # "cell 7"
    line: int | None              # within the cell, 1-based
    message: str                  # the parser's, e.g. "invalid syntax"
    functions: tuple[str, ...]    # the functions it defines at top level (by their `def` lines) and no other cell does

    def describe(self) -> str:
        """e.g. "cell 7, line 3: invalid syntax"."""
        where = f", line {self.line}" if self.line else ""
        return f"{self.label}{where}: {self.message}"

    def note(self) -> str:
        """What the report says about the cell as a whole."""
        costs = (f"it was left out, so {', '.join(self.functions)} could not be graded" if self.functions
                 else "it was left out; it defines no function graded here, so it costs nothing")
        return f"{self.describe()} (not valid Python: {costs})"


def _broken(label: str, python: str) -> BrokenCell | None:
    """The cell as a BrokenCell if its code (magic lines blanked) does not parse, else None."""
    try:
        ast.parse(python)
    except SyntaxError as exc:
        message, line = exc.msg, exc.lineno
    except (ValueError, RecursionError, MemoryError) as exc:  # a null byte; `1+1+...` 100,000 long
        message, line = {RecursionError: "too deeply nested", MemoryError: "too large to parse"}.get(
            type(exc), str(exc)), None
    else:
        return None
    return BrokenCell(label, line, one_line(message, 200), tuple(dict.fromkeys(_DEF.findall(python))))


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


def defined_functions(sources: Iterable[str]) -> frozenset[str]:
    """The names of the functions the cells define at top level (the functions a course grades
    are among them): an assignment calling one of them is a use, not a definition."""
    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse("\n".join("" if line.lstrip().startswith(_MAGIC) else line for line in source.split("\n")))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        names.update(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(names)


def definitions(source: str, api: Iterable[str] | None = None) -> str:
    """The statements of one cell that belong in attention.py (see the module docstring); `api`:
    the functions whose calls are left out (by default those the cell defines)."""
    if source.lstrip().startswith("%%"):  # a cell magic: the whole cell is not Python
        return ""
    lines = source.split("\n")
    python = "\n".join("" if line.lstrip().startswith(_MAGIC) else line for line in lines)
    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # `1+1+...` 100,000 long recurses
        return python  # kept as it is: the sandbox reports the error (with its line) when it imports it
    api = frozenset(api) if api is not None else defined_functions([source])
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


def _bounded(cells: Iterable[tuple[str, str]], origin: str) -> list[tuple[str, str]]:
    """The cells, or SubmissionError when their code is larger than attention.py may be, or one
    of them larger than the grader parses (checked before any cell is parsed)."""
    cells = list(cells)
    for label, source in cells:
        if len(source) > PARSE_BYTES:
            raise SubmissionError(f"{origin}: {label} holds {len(source) >> 10} KiB of code; a code cell may hold "
                                  f"at most {PARSE_BYTES >> 10} KiB (keep data in files, not in cells)")
    total = sum(len(source) for _, source in cells)
    if total > SOURCE_BYTES:
        raise SubmissionError(f"{origin}: the code cells hold {total >> 10} KiB of code; a submission may hold "
                              f"at most {SOURCE_BYTES >> 10} KiB, as attention.py")
    return cells


def _python(source: str) -> str:
    """A cell's code with its magic and shell lines blanked (line numbers kept); "" for a cell magic."""
    if source.lstrip().startswith("%%"):
        return ""
    return "\n".join("" if line.lstrip().startswith(_MAGIC) else line for line in source.split("\n"))


def _assemble(cells: Iterable[tuple[str, str]], origin: str) -> tuple[str, tuple[BrokenCell, ...]]:
    """attention.py made of the cells' definitions, and the cells left out for not being Python."""
    cells = _bounded(cells, origin)
    parts = [f"# The definitions in {origin}, extracted by mha (calls, prints and magics are left out).\n"]
    broken = [b for b in (_broken(label, _python(source)) for label, source in cells) if b is not None]
    left_out = {b.label for b in broken}
    kept = [(label, source) for label, source in cells if label not in left_out]
    api = defined_functions(source for _, source in kept)
    # a function another cell defines is graded on that definition, as the kernel would run it
    broken = [replace(b, functions=tuple(f for f in b.functions if f not in api)) for b in broken]
    for label, source in kept:
        code = definitions(source, api)
        if code.strip():
            parts.append(f"# {label}\n{code.rstrip()}\n")
    return "\n".join(parts), tuple(broken)


def _read(ipynb_path: Path) -> bytes:
    """The notebook file's bytes, read as any student file; SubmissionError if it cannot be (a link, too large...)."""
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
    return file.data


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _cells(raw: bytes, where: str) -> list[tuple[int, dict, str]]:
    """(number, cell, source text) of every cell of the notebook `raw`, parsed within BOUNDS;
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
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SubmissionError(f"{where}: cell {number} has a source that is neither text nor a list of lines")
        # JSON may spell a lone surrogate (\ud800), which no UTF-8 encoder takes: the cell's text
        # keeps a replacement character in its place, so reading it never fails
        found.append((number, cell, _LONE_SURROGATE.sub("\ufffd", source)))
    return found


def _tags(cell: dict) -> list:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tags if isinstance(tags, list) else []


def _code(cells: list[tuple[int, dict, str]]) -> list[tuple[str, str]]:
    return [(f"cell {number}", source) for number, cell, source in cells
            if cell.get("cell_type") == "code" and CHECK_TAG not in _tags(cell)]


def _answers(cells: list[tuple[int, dict, str]]) -> str | None:
    found = [(f"cell {number}", source) for number, cell, source in cells
             if cell.get("cell_type") == "raw" and ANSWERS_TAG in _tags(cell)]
    return "".join(f"# {label}\n{source.rstrip()}\n" for label, source in found) if found else None


def code_cells(ipynb_path: Path) -> list[tuple[str, str]]:
    """(label, source) of every code cell not tagged mha-check; SubmissionError if not a notebook."""
    return _code(_cells(_read(ipynb_path), str(ipynb_path)))


def answer_cells(ipynb_path: Path) -> list[tuple[str, str]]:
    """(label, source) of every raw cell tagged mha-answers, in order."""
    return [(f"cell {number}", source) for number, cell, source in _cells(_read(ipynb_path), str(ipynb_path))
            if cell.get("cell_type") == "raw" and ANSWERS_TAG in _tags(cell)]


def extract_answers(ipynb_path: Path) -> str | None:
    """The notebook's answer cells as answers.yaml text (None when it has none)."""
    return _answers(_cells(_read(ipynb_path), str(ipynb_path)))


def extract_source(ipynb_path: Path) -> str:
    """attention.py made of the notebook's definitions (see the module docstring)."""
    return _assemble(code_cells(ipynb_path), Path(ipynb_path).name)[0]


def notebook_parts(raw: bytes, name: str) -> tuple[str, str | None, tuple[BrokenCell, ...]]:
    """The notebook `raw` (read from the file `name`) as attention.py text, answers.yaml text
    (None when it has no answer cells) and the code cells left out for not being Python;
    SubmissionError if it is not a notebook."""
    cells = _cells(raw, name)
    source, broken = _assemble(_code(cells), name)
    return source, _answers(cells), broken




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
    source, _ = _assemble(((f"In[{i}]", text) for i, text in enumerate(history) if text), "this notebook")
    with tempfile.TemporaryDirectory(prefix="mha-check-") as folder:
        path = Path(folder) / "attention.py"
        path.write_text(source, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "grader", "check", problem, "--path", str(path), "--format", "html"],
                              capture_output=True, text=True, cwd=os.getcwd())
    import html
    import re
    plain = html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"<svg.*?</svg>", "", done.stdout, flags=re.S)))
    try:  # the report with pictures of the weights, and as plain text where HTML cannot be shown
        from IPython.display import display
        display({"text/html": done.stdout, "text/plain": plain.strip("\n") + "\n"}, raw=True)
    except ImportError:
        print(plain, end="")
    if done.stderr:
        print(done.stderr, end="", file=sys.stderr)
