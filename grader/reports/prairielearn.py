"""PrairieLearn's external-grader `results.json`: one test per case, the score as a fraction.

PrairieLearn reads `score` (0 to 1), `gradable`, `format_errors`, `message`, `output` and
`tests: [{name, description, points, max_points, message, output}]`. A submission that is not
valid Python is `gradable: false` with its syntax error in `format_errors`: PrairieLearn shows
it and does not count the attempt. A test is one case, worth its weighted share of its problem's
points (the share earned, for partial credit), so the tests' points add up to the score. PrairieLearn renders these
fields as text; hidden cases carry only their kind of failure, never inputs or answers.
"""
from __future__ import annotations

import json

from ..grading.results import CaseResult, GradeResult, ProblemResult, one_line
from .text import case_lines, problem_lines

__all__ = ["as_dict", "failure", "render"]


def _test(problem: ProblemResult, case: CaseResult) -> dict:
    """One case as a test worth its share of the problem's points."""
    total = sum(c.weight for c in problem.cases)
    worth = problem.max_score * case.weight / total if total else 0.0
    name = f"{problem.id}: {case.name}" + (" (hidden)" if case.hidden else "")
    return {"name": name, "description": "hidden case" if case.hidden else "public case",
            "points": round(worth * case.earned, 4), "max_points": round(worth, 4),
            "message": "passed" if case.passed else (case.summary or case.status.value),
            "output": "" if case.passed else "\n".join(case_lines(case))}


def as_dict(result: GradeResult) -> dict:
    if result.load_error is not None and result.load_error.kind == "syntax":
        return {"gradable": False, "score": 0.0, "format_errors": [one_line(result.load_error.describe())],
                "message": "Your file is not valid Python, so it was not graded; fix it and submit again.",
                "tests": []}
    counted = [p for p in result.problems if p.counted]
    tests = [_test(p, c) for p in counted for c in p.cases]
    score = result.score / result.max_score if result.max_score else 0.0
    lines = [f"Score: {result.score:g}/{result.max_score:g} ({result.percent:.0f}%)."]
    if result.pending_points:  # PrairieLearn grades the written items as questions of their own
        lines.append(f"Plus {result.pending_points:g} points for the written answers, graded by hand: pending.")
    lines += [one_line(m) for m in result.messages]
    for problem in counted:
        lines += problem_lines(problem)
    return {"gradable": True, "score": round(min(1.0, max(0.0, score)), 6), "message": "\n".join(lines),
            "output": "", "tests": tests}


def failure(message: str, submission_fault: bool = False) -> str:
    """results.json when nothing could be graded: not gradable, so the attempt does not count."""
    summary = ("Your submission could not be graded; see below, fix it and submit again." if submission_fault else
               "The autograder failed; this is not a grade. Please tell your instructor.")
    return json.dumps({"gradable": False, "score": 0.0, "format_errors": [one_line(message)], "message": summary,
                       "tests": []}, indent=2) + "\n"


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result), indent=2) + "\n"
