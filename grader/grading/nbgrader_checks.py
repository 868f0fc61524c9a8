"""What the exported nbgrader test cells call: a problem's cases and a quiz answer, scored as `mha grade` does.

nbgrader grades a test cell by its output: an error, or anything written to stderr, earns 0; a
last value that reads as a number is the points earned (partial credit); anything else earns the
cell's points. So each test cell of `mha export nbgrader` ends in a call to `problem_score` or
`answer_score`, whose value is the points earned by `mha grade`'s rule (grading/scoring.py), and
whose feedback is printed to stdout, the lines `mha check` shows. What student code writes to
stderr, and the warnings numpy raises on its behalf, are kept out of the cell's output: nbgrader
would otherwise give the cell nothing, where `mha grade` only shows them.

The cases themselves come from `otter_checks`: the same preparation, the same call of the
student's function and the same `judge`, so a problem's score equals the otter export's and
`mha grade`'s (for the default seed).
"""
from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["answer_score", "problem_score"]


@contextlib.contextmanager
def _quiet():
    """Student code's stderr and warnings caught here, never in the cell's output."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def problem_score(problem_id: str, fn: Callable[..., Any] | None, cases: Sequence[str],
                  course_dir: str | os.PathLike | None = None) -> float:
    """The points `fn` earns on the named cases of one problem: the problem's points times the
    weighted share of those cases earned, to 4 decimals. Each case's feedback is printed (a hidden
    case's: the kind of failure only). The exported cell lists the hidden cases inside nbgrader's
    hidden-tests markers, so a student's own run scores the public cases alone; with the student
    wheel, a withheld case (its expected value never shown) is checked for its form only and left
    out of that score."""
    from ..reports.text import case_lines
    from .grade import judge
    from .otter_checks import call_student, prepared_case
    from .scoring import points_earned, weighted_share
    results, problem = [], None
    for name in cases:
        problem, prepared = prepared_case(problem_id, name, course_dir)
        with _quiet():
            run = call_student(fn, prepared.args)
        result = judge(problem, prepared, run)
        results.append(result)
        print("\n".join(line.rstrip() for line in case_lines(result)))
    if problem is None:
        return 0.0
    from .results import CaseStatus
    # a withheld case (the student wheel holds its form only) is graded on submission: not here
    judged = [r for r in results if r.status is not CaseStatus.ON_SUBMISSION]
    if not judged:  # every case's form right, every value graded on submission
        return float(problem.points)
    return points_earned(problem.points, weighted_share((r.weight, r.earned) for r in judged))


def answer_score(item_id: str, value: Any, course_dir: str | os.PathLike | None = None) -> float:
    """The points a quiz answer earns by `mha grade`'s rule (partial credit with penalty for a
    multiple-answers item). A wrong answer's feedback is printed; a hidden item's says only that it
    is not right. `...` or None (the answer left out) earns nothing."""
    from .answers import grade_item
    from .otter_checks import drawn_item, plain
    v = drawn_item(item_id, course_dir)
    with _quiet():
        answer = None if value is ... else plain(value)
    result = grade_item(v, answer, None, include_hidden=True)
    if result.score < v.item.points:
        case = result.cases[0]
        if v.item.hidden:
            print(f"{item_id}: not right ({case.status.value})")
        else:
            detail = f"likely mistake ({case.mistake}): {case.mistake_message}" if case.mistake else case.mistake_message
            summary = (case.summary or case.status.value).removeprefix("answers.yaml:None: ")  # a variable, not a file
            print("\n".join(filter(None, (f"{item_id}: {summary}", detail, result.hints[0] if result.hints else ""))))
    return float(result.score)
