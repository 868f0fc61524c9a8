"""GitHub Classroom: the result JSON that `autograding-grading-reporter` reads from a step output.

The reporter adds up each test's `score` for "Points X/Y", so each problem is one test with its
fractional score; `max_score` is the sum over the problems reported.
"""
from __future__ import annotations

import json

from ..grading.results import GradeResult
from .text import problem_lines


def as_dict(result: GradeResult) -> dict:
    tests = [{
        "name": f"{p.id}: {p.title}",
        "status": "pass" if p.passed else "fail",
        "score": p.score,
        "max_score": p.max_score,
        "message": "\n".join(problem_lines(p)[1:]).strip() or "All cases passed.",
        "execution_time": "",
        "test_code": "",
        "filename": "",
        "line_no": 0,
    } for p in result.problems]
    status = "pass" if all(p.passed for p in result.problems) else "fail"
    return {"version": 1, "status": status, "max_score": result.max_score, "tests": tests}


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result)) + "\n"
