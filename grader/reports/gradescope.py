"""Gradescope `results.json`: one test per problem, named after the problem id.

Gradescope renders `output` as Markdown. Everything that can hold student text (an exception's
message, what the code printed, an answer) goes inside a code block whose fence is longer than
any run of backticks in it, so nothing a student writes can close it and become a heading, a
link or an image.
"""
from __future__ import annotations

import json
import re

from ..grading.results import GradeResult
from .text import problem_lines


def fenced(text: str) -> str:
    """`text` as a Markdown code block that nothing inside can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _output(problem) -> str:
    return "\n".join(line for line in problem_lines(problem)[1:]).strip() or "All cases passed."


def as_dict(result: GradeResult) -> dict:
    tests = [
        {
            "name": f"{p.id}: {p.title}",
            "number": str(i),
            "score": p.score,
            "max_score": p.max_score,
            "status": "passed" if p.passed else "failed",
            "visibility": "visible",
            "output": fenced(_output(p)),
            "output_format": "md",
            "tags": [p.id, *p.mistakes],
        }
        for i, p in enumerate(result.problems, start=1)
    ]
    summary = f"Score: {result.score:g}/{result.max_score:g} ({result.percent:.0f}%)."
    if result.messages:
        summary += "\n\n" + fenced("\n".join(result.messages))
    return {
        "score": result.score,
        "execution_time": result.execution_time,
        "output": summary,
        "output_format": "md",
        "test_output_format": "md",
        "stdout_visibility": "hidden",
        "visibility": "visible",
        "tests": tests,
    }


def failure(message: str, execution_time: float = 0.0, submission_fault: bool = False) -> str:
    """results.json when nothing could be graded: score 0 and a visible explanation.

    `submission_fault`: the upload itself is unusable (no attention.py...), so the student can fix it.
    """
    name, summary = (("submission not gradable", "Your submission could not be graded; see below, fix it and resubmit.")
                     if submission_fault else
                     ("autograder failed", "The autograder failed; this is not a grade. Please tell your instructor."))
    return json.dumps({
        "score": 0.0,
        "execution_time": execution_time,
        "output": summary,
        "output_format": "md",
        "stdout_visibility": "hidden",
        "tests": [{"name": name, "score": 0.0, "max_score": 0.0, "status": "failed",
                   "visibility": "visible", "output": message, "output_format": "text"}],
    }, indent=2) + "\n"


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result), indent=2) + "\n"
