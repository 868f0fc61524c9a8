"""A student's own mistake found behind a broken helper: a failing function that calls the
student's own failing functions is graded again, in the sandbox like any student run, with the
course's reference of those functions in their place.

The student's module is run with the helpers' names rebound to the reference: the reference
functions' source, and the course definitions they use, are appended to a copy of the
submission inside one factory function, so the student's own globals (`np`, helpers of the
same name) are untouched and the submission's line numbers stay as they were. The reference is
trusted course code and holds no case data: beyond the case inputs every run is sent (public
cases first, in a fresh process), what enters the student process is the text of those
functions, never an expected answer. The re-run's answers serve the diagnosis only: its score
is never used and what it prints is never shown.

Cost: only a problem that failed AND calls a failing graded function the student has started
(not every one a stub) is run again, once per set of helpers replaced, within what is left of
the submission's time budget.
"""
from __future__ import annotations

import ast
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ..course.model import Problem
from ..sandbox.session import Limits
from .diagnosis import failing_callees
from .results import ProblemResult

__all__ = ["reference_text", "with_reference", "grade_behind_helpers"]

_FACTORY = "_mha_course_reference"
_MIN_SECONDS = 2.0  # a re-run with less of the submission's budget left is not started


class _Inert(ast.NodeTransformer):
    """Annotations become strings (never evaluated) and docstrings go: what is left is the code."""

    def _annotation(self, node: ast.expr | None) -> ast.expr | None:
        return None if node is None else ast.Constant(ast.unparse(node))

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = self._annotation(node.annotation)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        node.annotation = self._annotation(node.annotation) or ast.Constant("")
        return self.generic_visit(node)

    def _body(self, node):
        node = self.generic_visit(node)
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = self._annotation(node.returns)
        return self._body(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        return self._body(node)


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
        else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def reference_text(code: Path | None, names: Sequence[str]) -> str | None:
    """Python text that, appended to a submission, rebinds each of `names` to the course's
    reference of it; None when the course has no reference module this can be built from."""
    if code is None:  # no course code (the student bundle, which has no course module either)
        return None
    from ..course.code import course_function
    found = [course_function(code, name) for name in names]
    functions = [f for f in found if f is not None and hasattr(f, "__code__")]
    if not functions or len(functions) != len(found):
        return None
    files = {f.__code__.co_filename for f in functions}
    if len(files) != 1:
        return None
    path = files.pop()
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _module_text(path, info.st_mtime_ns, info.st_size, tuple(f.__name__ for f in functions), tuple(names))


@functools.lru_cache(maxsize=32)  # once per grader process for each file and set of helpers (a class repeats them)
def _module_text(path: str, mtime_ns: int, size: int, wanted: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """reference_text's text, from the module at `path` (as it is at `mtime_ns` and `size`)."""
    try:
        tree = _Inert().visit(ast.parse(Path(path).read_text()))
    except (OSError, SyntaxError, ValueError):
        return None
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    if any(isinstance(n, ast.ImportFrom) and n.level for n in imports):
        return None  # a relative import cannot run outside the course package
    definitions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign))]
    defined = {name: node for node in definitions for name in _defines(node)}
    if any(name not in defined for name in wanted):
        return None
    needed: set[int] = set()
    todo = [defined[name] for name in wanted]
    while todo:  # every top-level definition the wanted functions reach by name
        node = todo.pop()
        if id(node) in needed:
            continue
        needed.add(id(node))
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(node)):
            return None
        todo += [defined[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defined]
    body: list[ast.stmt] = [*imports, *(n for n in definitions if id(n) in needed)]
    body.append(ast.Return(ast.Tuple([ast.Name(n, ast.Load()) for n in wanted], ast.Load())))
    factory = ast.FunctionDef(_FACTORY, ast.arguments([], [], None, [], [], None, []), body, [], None)
    text = "\n\n".join([
        ast.unparse(ast.fix_missing_locations(ast.Module([factory], []))),
        f"{', '.join(names)}, = {_FACTORY}()",
        f"del {_FACTORY}"])
    return text + "\n" if text.isascii() else None


def with_reference(submission: bytes, text: str) -> bytes:
    """The submission with the reference text appended (its own lines keep their numbers)."""
    return submission + b"\n\n\n" + text.encode("ascii")


def grade_behind_helpers(problems: Sequence[Problem], results: Sequence[ProblemResult], source: str | None,
                         submission: bytes, cases: Callable[[Problem], list], limits: Limits, start: float,
                         run: Callable[..., tuple[ProblemResult, ...] | None]) -> dict[str, ProblemResult]:
    """Each failing problem that calls the student's failing functions, graded again with the
    course's reference in their place: problem id -> that run's result. `run(submission,
    problems, cases, limits)` grades in a fresh sandbox session (None when it could not load)."""
    behind = failing_callees(problems, results, source)
    by_function = {p.function.name: p for p in problems}
    result_of = {p.function.name: r for p, r in zip(problems, results) if r.id == p.id}
    groups: dict[tuple[str, ...], list[Problem]] = {}
    for problem in problems:
        helpers = behind.get(problem.id)
        # helpers not started yet (every one a stub) leave nothing to tell: the pointer says to write them
        if helpers and not all(result_of[h].not_implemented for h in helpers if h in result_of):
            groups.setdefault(tuple(helpers), []).append(problem)
    found: dict[str, ProblemResult] = {}
    for names, group in groups.items():
        left = limits.submission_seconds - (time.monotonic() - start)
        code = {by_function[h].code for h in names}
        text = reference_text(code.pop(), names) if len(code) == 1 else None
        if text is None or left < _MIN_SECONDS:
            continue
        again = run(with_reference(submission, text), group, cases, replace(limits, submission_seconds=left))
        if again is not None:
            found.update((r.id, r) for r in again)
    return found
