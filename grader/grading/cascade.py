"""A student's own mistake found behind a broken helper: a failing function that calls the
student's own failing functions is graded again, in the sandbox like any student run, with the
course's reference answering in their place.

The course's code never enters the student process. In the re-run each helper's name in the
student's module is bound to a stand-in (sandbox/worker.py) that sends the arguments it is
given, as plain data, to the grader; the grader runs the course's reference on them (within
bounds, sandbox/session.py) and sends back the answer alone. So student code that looks at
its helper (its `__code__`, its source, its globals) finds the worker's stand-in, never course code.

Student code can tell it is being re-run, and choose how it behaves there. So the re-run is
sent the public cases only: no hidden input enters it, and what it reports (diagnosis.py: "passes
every public case", "still fails 2 of 4 public cases", a named mistake) is about public cases
alone, never a verdict or a count over hidden ones. Its score is never used and what it
prints is never shown.

Cost: only a problem that failed AND calls a failing graded function the student has started
(not every one a stub) is run again, once per set of helpers replaced, within what is left of
the submission's time budget.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..course.model import Problem
from ..sandbox.session import Limits
from .diagnosis import failing_callees
from .results import ProblemResult

__all__ = ["helper_references", "grade_behind_helpers"]

_MIN_SECONDS = 2.0  # a re-run with less of the submission's budget left is not started


def helper_references(code: Path | None, names: Sequence[str]) -> dict[str, Callable] | None:
    """The course's reference of each of `names` (the functions the grader answers for in a re-run);
    None when the course has no code (the student bundle) or lacks one of them."""
    if code is None:
        return None
    from ..course.code import course_function
    found = {name: course_function(code, name) for name in names}
    return found if all(fn is not None for fn in found.values()) else None


def grade_behind_helpers(problems: Sequence[Problem], results: Sequence[ProblemResult], source: str | None,
                         submission: bytes, cases: Callable[[Problem], list], limits: Limits, start: float,
                         run: Callable[..., tuple[ProblemResult, ...] | None]) -> dict[str, ProblemResult]:
    """Each failing problem that calls the student's failing functions, graded again on its public
    cases with the course's reference answering for those functions: problem id -> that run's
    result. `run(submission, problems, cases, limits, helpers)` grades in a fresh sandbox session
    whose student process calls the grader for `helpers` ({name: reference}); None when it could
    not load."""
    behind = failing_callees(problems, results, source)
    by_function = {p.function.name: p for p in problems}
    result_of = {p.function.name: r for p, r in zip(problems, results) if r.id == p.id}
    groups: dict[tuple[str, ...], list[Problem]] = {}
    for problem in problems:
        helpers = behind.get(problem.id)
        # helpers not started yet (every one a stub) leave nothing to tell: the pointer says to write them
        if helpers and not all(result_of[h].not_implemented for h in helpers if h in result_of) \
                and any(not c.hidden for c in problem.cases):
            groups.setdefault(tuple(helpers), []).append(problem)

    def public(problem: Problem) -> list:
        return [c for c in cases(problem) if not c.case.hidden]

    found: dict[str, ProblemResult] = {}
    for names, group in groups.items():
        left = limits.submission_seconds - (time.monotonic() - start)
        code = {by_function[h].code for h in names}
        references = helper_references(code.pop(), names) if len(code) == 1 else None
        if references is None or left < _MIN_SECONDS:
            continue
        again = run(submission, group, public, replace(limits, submission_seconds=left), references)
        if again is not None:
            found.update((r.id, r) for r in again)
    return found


def answer(references: Mapping[str, Callable], name: str, args: list, kwargs: dict):
    """The course reference's answer for a stand-in's call (the arguments already decoded and bounded)."""
    import warnings

    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return references[name](*args, **kwargs)
