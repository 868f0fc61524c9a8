"""Deeper checks of loaded problems that need the reference: explicit answers must agree with it.

`load_valid` is what every command that grades, releases or exports loads: the assignment as
`mha validate` accepts it, or SpecErrors; a key that disagrees with the reference is never used.
`course_errors` is what both report: the errors of every file and of every check that can run
(a problem that fails to load cannot run its cases, but every other problem's cases still run),
in one list sorted by file and line.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from ..course.model import Course, Problem
from ..errors import SpecError, SpecErrors, sorted_errors
from .checks import check
from .prepared import build_args, literal_expected, reference_answer

T = TypeVar("T")


def check_against_reference(problems: Iterable[Problem], keys_only: bool = False) -> None:
    """Every `expect` must match the reference, and every `raises` case must raise in it; without
    `keys_only`, the reference must also answer every other case (grading checks that as it
    prepares them). SpecErrors lists every case that does not."""
    errors = reference_errors(problems, keys_only)
    if errors:
        raise SpecErrors(errors)


def reference_errors(problems: Iterable[Problem], keys_only: bool = False) -> list[SpecError]:
    """What check_against_reference refuses, as a list (empty when every case agrees)."""
    errors: list[SpecError] = []
    for problem in problems:
        fn = problem.function
        parts = fn.outputs if fn.returns.value == "array_pair" else ()
        for case in problem.cases:
            if keys_only and not (case.has_expect or case.raises):
                continue
            args = build_args(problem, case)
            try:
                answer = reference_answer(fn, args, problem.code)
            except Exception as exc:
                if case.raises and type(exc).__name__ == case.raises:
                    continue
                errors.append(SpecError(str(problem.path), case.line,
                                        f"case {case.name!r}: the reference raised {type(exc).__name__}: {exc}"))
                continue
            if case.raises:
                errors.append(SpecError(str(problem.path), case.line,
                                        f"case {case.name!r} expects {case.raises}, but the reference returned normally"))
            elif case.has_expect:
                verdict = check(problem.compare, answer, literal_expected(fn, case.expect), parts)
                if not verdict.passed:
                    errors.append(SpecError(str(problem.path), case.line,
                                            f"case {case.name!r}: 'expect' disagrees with the reference ({verdict.detail})"))
    return errors


def course_errors(root: Path, keys_only: bool = False) -> tuple[Course | None, list[SpecError]]:
    """The course at `root` (None when nothing of it loads) and everything wrong with it, sorted by
    file and line: the errors of every file, then the reference's answers to the cases of every
    problem that loaded (only those with `expect` or `raises` when `keys_only`) and the numbers of
    the quiz when it loaded."""
    from ..course.loader import read_course
    from ..course.quiz import quiz_errors
    course, errors = read_course(root)
    if course is not None:
        errors = errors + reference_errors(course.problems, keys_only)
        if course.quiz is not None:
            errors += quiz_errors(course.quiz)
    return course, sorted_errors(errors)


def load_valid(root: Path):
    """The assignment at `root`, refused (SpecErrors) unless `mha validate` accepts it."""
    return valid_then(root, lambda course: course)


def valid_then(root: Path, use: Callable[[Course], T], course_stamp: str | None = None) -> T:
    """`use(assignment)` for the assignment at `root`, returned only if `mha validate` accepts the
    assignment (else SpecErrors, as load_valid raises them). `course_stamp`: its stamp, when the
    caller has it (seed_cache.stamp with no seed).

    A course not validated since it last changed has its keys checked against the reference, and
    its quiz checked, before `use` runs: every error of its files and keys is raised at once, as
    `mha validate` reports them. (The check runs the reference on the cases with an `expect` or
    `raises` only, a few milliseconds; the imports it needs are the ones `use` needs anyway.)"""
    from ..course.loader import load_course
    from .seed_cache import mark_validated, validated
    if validated(root, course_stamp):  # unchanged since it last passed (the seed cache keeps that note)
        return use(load_course(root))
    course, errors = course_errors(root, keys_only=True)
    if errors or course is None:
        raise SpecErrors(errors)
    result = use(course)
    mark_validated(root, course_stamp)
    return result
