"""Gradescope `results.json`: one test per problem, named after the problem id.

`hidden` says what students see of the hidden cases and hidden quiz items: "visible" (one test
per problem, hidden cases inside it, as `mha grade` reports them), or, as the Gradescope export
writes it, "after_due_date" or "hidden": then each problem's hidden cases and each hidden quiz
item are tests of their own with that Gradescope visibility, and what stays visible (the public
tests, the summary) carries no score, feedback or mistake of theirs; the summary says they were
recorded. The top-level score counts everything either way.

Gradescope renders `output` as Markdown. Everything that can hold student text (an exception's
message, what the code printed, an answer) goes inside a code block whose fence is longer than
any run of backticks in it, so nothing a student writes can close it and become a heading, a
link or an image.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace

from ..grading.results import GradeResult, ProblemResult
from .text import feedback


def fenced(text: str) -> str:
    """`text` as a Markdown code block that nothing inside can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _output(problem: ProblemResult) -> str:
    return feedback(problem)


HIDDEN_VISIBILITY = ("visible", "after_due_date", "hidden")


def _test(problem: ProblemResult, name: str, visibility: str) -> dict:
    return {"name": name, "score": problem.score, "max_score": round(problem.max_score, 4),
            "status": "passed" if problem.passed else "failed", "visibility": visibility,
            "output": fenced(_output(problem)), "output_format": "md", "tags": [problem.id, *problem.mistakes]}


def _written_test(problem: ProblemResult, name: str) -> dict:
    """A written item: its text shown to the student and the instructor as recorded, for grading by
    hand in a manually graded question of its own. The test has no `score` or `max_score` (a message,
    not a zero: Gradescope adds the hand-given points from that question); it fails only when there
    is nothing to grade (no answer, or one of the wrong form)."""
    case = problem.cases[0]
    if problem.written is not None:
        return {"name": name, "visibility": "visible", "output_format": "md", "tags": [problem.id, "graded_by_hand"],
                "output": f"Pending: graded by hand ({problem.max_score:g} points, given by your instructor).\n\n"
                          + fenced(problem.written)}
    return {"name": name, "status": "failed", "visibility": "visible", "output_format": "md",
            "tags": [problem.id, "graded_by_hand"], "output": fenced(case.summary)}


def _split(problem: ProblemResult) -> tuple[ProblemResult | None, ProblemResult | None]:
    """(the public part, the hidden part) of a problem, each worth its cases' share of the points."""
    total = sum(c.weight for c in problem.cases)
    parts = []
    for hidden in (False, True):
        cases = tuple(c for c in problem.cases if c.hidden is hidden)
        share = sum(c.weight for c in cases) / total if total else 0.0
        parts.append(replace(problem, cases=cases, max_score=problem.max_score * share) if cases else None)
    return parts[0], parts[1]


def _tests(result: GradeResult, hidden: str) -> tuple[list[dict], float, float, list[str]]:
    """The tests, the visible score and points, and the ids of what was only recorded."""
    tests, seen, seen_max, recorded = [], 0.0, 0.0, []
    for p in result.problems:
        title = f"{p.id}: {p.title}"
        if p.pending:  # graded by hand in Gradescope: no points here
            tests.append(_written_test(p, title))
            continue
        public, secret = _split(p) if hidden != "visible" else (p, None)
        if public is not None:
            tests.append(_test(public, title, "visible"))
            seen, seen_max = seen + public.score, seen_max + public.max_score
        if secret is not None:
            name = f"{p.id}: {p.title}" if p.quiz else f"{p.id}: hidden cases"
            tests.append(_test(secret, name, hidden))
            recorded.append(p.id)
    for i, test in enumerate(tests, start=1):
        test["number"] = str(i)
    return tests, seen, seen_max, recorded


def as_dict(result: GradeResult, hidden: str = "visible") -> dict:
    if hidden not in HIDDEN_VISIBILITY:
        raise ValueError(f"hidden visibility must be one of {', '.join(HIDDEN_VISIBILITY)} (got {hidden!r})")
    tests, seen, seen_max, recorded = _tests(result, hidden)
    if hidden == "visible":
        summary = f"Score: {result.score:g}/{result.max_score:g} ({result.percent:.0f}%)."
    else:
        when = "after the due date" if hidden == "after_due_date" else "to your instructor only"
        problems = sum(not _is_quiz(result, i) for i in recorded)
        items = [i for i in recorded if _is_quiz(result, i)]
        summary = (f"Visible tests: {seen:.4g}/{seen_max:.4g}. Recorded and graded, with results shown {when}: "
                   f"the hidden cases of {problems} problem(s) and {len(items)} hidden quiz item(s)"
                   + (f" ({', '.join(items)})." if items else "."))
    if result.pending_points:
        summary += (f"\n\nPlus {result.pending_points:g} points for the written answers, graded by hand: "
                    "pending, not in this score.")
    if result.messages:
        summary += "\n\n" + fenced("\n".join(result.messages))
    return {
        "score": result.score,  # no execution_time: a clock student code could modulate (docs/security.md)
        "output": summary,
        "output_format": "md",
        "test_output_format": "md",
        "stdout_visibility": "hidden",
        "visibility": "visible",
        "tests": tests,
    }


def failure(message: str, submission_fault: bool = False) -> str:
    """results.json when nothing could be graded: score 0 and a visible explanation.

    `submission_fault`: the upload itself is unusable (no attention.py...), so the student can fix it.
    """
    name, summary = (("submission not gradable", "Your submission could not be graded; see below, fix it and resubmit.")
                     if submission_fault else
                     ("autograder failed", "The autograder failed; this is not a grade. Please tell your instructor."))
    return json.dumps({
        "score": 0.0,
        "output": summary,
        "output_format": "md",
        "stdout_visibility": "hidden",
        "tests": [{"name": name, "score": 0.0, "max_score": 0.0, "status": "failed",
                   "visibility": "visible", "output": message, "output_format": "text"}],
    }, indent=2) + "\n"


def _is_quiz(result: GradeResult, problem_id: str) -> bool:
    return any(p.quiz for p in result.problems if p.id == problem_id)


def render(result: GradeResult, hidden: str = "visible") -> str:
    return json.dumps(as_dict(result, hidden), indent=2) + "\n"
