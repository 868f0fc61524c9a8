"""GitHub Classroom: the result JSON that `autograding-grading-reporter` reads from a step output.

The reporter adds up each test's `score` for "Points X/Y", so each problem is one test with its
fractional score; `max_score` is the sum over the problems reported.

The reporter prints each message in the Actions log, where a line that starts with `::` (after
its indentation) is a workflow command (`::add-mask::`, `::error::`...). Student text never
starts a line (it follows the grader's words and its line breaks are escaped: results.one_line),
and a line that would start with `::` all the same is quoted.
"""
from __future__ import annotations

import json

from ..grading.results import GradeResult
from .text import problem_lines


def _inert(text: str) -> str:
    """`text` with every line that would read as a workflow command quoted."""
    return "\n".join("| " + line if line.lstrip().startswith("::") else line for line in text.split("\n"))


def as_dict(result: GradeResult) -> dict:
    tests = [{
        "name": f"{p.id}: {p.title}",
        "status": "pass" if p.passed else "fail",
        "score": p.score,
        "max_score": p.max_score,
        "message": _inert("\n".join(problem_lines(p)[1:]).strip()) or "All cases passed.",
        "execution_time": "",
        "test_code": "",
        "filename": "",
        "line_no": 0,
    } for p in result.problems]
    status = "pass" if all(p.passed for p in result.problems) else "fail"
    return {"version": 1, "status": status, "max_score": result.max_score, "tests": tests}


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result)) + "\n"
