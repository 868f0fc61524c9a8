"""What the exported otter-grader tests call: one case of one problem, graded by mha's own checks.

otter runs a student's notebook and hands each test the student's function. `check_case` builds
the case's inputs and expected answer as `mha grade` does, calls the function in this process
(otter's model: no sandbox, no time limit), reads the answer the way the sandbox's wire format
does (plain numbers, lists, tuples, dicts, arrays; anything else is an opaque object), and judges
it with `grader.grading.grade.judge`. So the verdict, and the score, are the ones `mha grade` gives.
A failed case raises AssertionError with the feedback of `mha check` (hidden cases: the kind of
failure only).

Where the case comes from: in the student wheel of the otter export (`wheel.build_student`),
from its public seed cases (`grader/_seed_cases/default.json`: inputs and expected answers computed
ahead by the reference, which that wheel does not hold); everywhere else, from the assignment
(`course_dir`, else the folder `mha` would use), prepared by the reference as `mha grade` does.
"""
from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["STUDENT_SEED_CASES", "call_student", "check_answer", "check_case", "drawn_item", "plain", "prepared_case"]

MAX_TEXT = 200
STUDENT_SEED_CASES = "_seed_cases/default.json"  # inside the package, in the student wheel only


def plain(value: Any, depth: int = 0) -> Any:
    """`value` as the grader receives it from the sandbox: plain data or an Opaque stand-in."""
    from ..sandbox.codec import MAX_DEPTH, Opaque
    from ..sandbox.student_text import one_line, student_text
    if depth > MAX_DEPTH:
        return Opaque(one_line("too deeply nested"))
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return student_text(value, MAX_TEXT, lines=True)
    if isinstance(value, (list, tuple)):
        items = [plain(item, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = plain(key, depth + 1)
            out[key if isinstance(key, (str, int, float, bool, type(None), tuple)) else repr(key)] = plain(item, depth + 1)
        return out
    if isinstance(value, np.ndarray) or hasattr(type(value), "__array__"):
        array = np.asarray(value)
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
            return Opaque(one_line(f"{type(value).__name__} of dtype {getattr(array, 'dtype', '?')}", 80))
        return np.array(array.view(np.ndarray), copy=True)
    return Opaque(one_line(type(value).__name__, 80))


@functools.lru_cache(maxsize=4)
def _course(root: str):
    from ..course.loader import load_course
    return load_course(Path(root))


def _root(course_dir: str | os.PathLike | None) -> Path:
    """The course folder: given, else the one `mha` would use (grader/paths.py)."""
    from ..paths import locate_course
    return locate_course(Path(course_dir) if course_dir else None)[0]


@functools.lru_cache(maxsize=1)
def _seed_cases():
    """The student wheel's public seed cases, or None in a full grader."""
    from ..paths import PACKAGE
    path = PACKAGE / STUDENT_SEED_CASES
    if not path.is_file():
        return None
    from ..grading.seed_cases import SeedCases
    return SeedCases.load(path)


def prepared_case(problem_id: str, case_name: str, course_dir):
    """(problem, prepared case): from the student seed cases when this is the student wheel, else
    prepared from the assignment."""
    seed_cases = _seed_cases() if course_dir is None else None
    if seed_cases is not None:
        match = next(((p, cases) for p, cases in seed_cases.problems if p.id == problem_id), None)
        if match is None:
            raise LookupError(f"no problem {problem_id!r} in {seed_cases.path}")
        problem, prepared = match
        found = next((c for c in prepared if c.case.name == case_name), None)
        if found is None:
            raise LookupError(f"problem {problem_id!r} has no public case {case_name!r} in {seed_cases.path}")
        return problem, found
    from ..grading.prepared import prepare
    course = _course(str(_root(course_dir).resolve()))
    problem = course.problem(problem_id)
    if problem is None:
        raise LookupError(f"no problem {problem_id!r} in {course.root}")
    case = next((c for c in problem.cases if c.name == case_name), None)
    if case is None:
        raise LookupError(f"problem {problem_id!r} has no case {case_name!r}")
    return problem, prepare(problem, case)


def call_student(fn: Callable[..., Any] | None, args: tuple[Any, ...]):
    from ..sandbox.session import CaseRun, RunStatus, StudentError
    from ..sandbox.student_text import one_line
    if not callable(fn):
        return CaseRun(RunStatus.NO_FUNCTION)
    try:
        value = fn(*copy.deepcopy(args))
    except (Exception, SystemExit) as exc:  # student code may raise anything
        error = StudentError(type=one_line(type(exc).__name__, 80),
                             bases=tuple(one_line(c.__name__, 80) for c in type(exc).__mro__),
                             message=one_line(exc, 500))  # str(exc), which may raise: student_text says so
        return CaseRun(RunStatus.RAISED, error=error)
    try:
        return CaseRun(RunStatus.RETURNED, value=plain(value))
    except Exception as exc:  # an __array__ that raises, and the like
        return CaseRun(RunStatus.BAD_RESULT, detail=f"the returned value could not be read: {type(exc).__name__}: {exc}")


def check_case(problem_id: str, case_name: str, fn: Callable[..., Any] | None,
               course_dir: str | os.PathLike | None = None) -> None:
    """Grade `fn` on one case; AssertionError with the feedback when it fails."""
    from ..grading.grade import judge
    from ..grading.results import CaseStatus
    from ..reports.text import case_lines
    problem, prepared = prepared_case(problem_id, case_name, course_dir)
    result = judge(problem, prepared, call_student(fn, prepared.args))
    if result.status is CaseStatus.ON_SUBMISSION:  # a withheld case: the form is right, the value is graded later
        print(f"{problem_id}, {case_name}: {result.detail}")
        return
    if not result.passed:
        raise AssertionError("\n".join(line.strip() for line in case_lines(result)))


def drawn_item(item_id: str, course_dir):
    """The quiz item drawn for the default seed: from the student seed cases (public items only), else drawn
    from the assignment as `mha grade` draws it."""
    seed_cases = _seed_cases() if course_dir is None else None
    if seed_cases is not None:
        found = next((v for v in seed_cases.quiz if v.item.id == item_id), None)
        if found is None:
            raise LookupError(f"no quiz item {item_id!r} in {seed_cases.path}")
        return found
    from ..course.quiz import DEFAULT_SEED, draw
    course = _course(str(_root(course_dir).resolve()))
    item = course.quiz.item(item_id) if course.quiz else None
    if item is None:
        raise LookupError(f"no quiz item {item_id!r} in {course.root}")
    return draw(item, DEFAULT_SEED)


def check_answer(item_id: str, value: Any, part: int = 1, parts: int = 1,
                 course_dir: str | os.PathLike | None = None) -> None:
    """Grade a quiz answer with `mha grade`'s rule (grading/answers.py). An item is `parts` tests
    of equal points (a multiple-answers item: one per true statement); test `part` passes when the
    answer earns at least part/parts of the item, so otter's points equal `mha grade`'s, partial
    credit included. A hidden item's failure says only that it is not right."""
    from ..grading.answers import grade_item
    v = drawn_item(item_id, course_dir)
    result = grade_item(v, plain(value), None, include_hidden=True)
    if result.fraction * parts >= part - 1e-9:
        return
    case = result.cases[0]
    if v.item.hidden:
        raise AssertionError(f"{item_id}: not right ({case.status.value})")
    detail = f"likely mistake ({case.mistake}): {case.mistake_message}" if case.mistake else case.mistake_message
    summary = (case.summary or case.status.value).removeprefix("answers.yaml:None: ")  # no file: a variable
    raise AssertionError("\n".join(filter(None, (f"{item_id}: {summary}", detail,
                                                  result.hints[0] if result.hints else ""))))
