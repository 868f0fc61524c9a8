"""GitHub Classroom: the result JSON that `autograding-grading-reporter` reads from a step output.

The reporter computes two numbers from it (its src/notify-classroom.js and src/aggregate-results.js):
the points sent to Classroom are the sum of the tests' `score`; its table shows a runner's score
as (tests with status "pass" / all tests) x `max_score`. The two agree only when every test is
worth the same, so the result is cut into tests of equal value: one per case when a problem's
cases are worth the same, more when partial credit needs it (a multiple-answers item with n
true statements is n tests). When that would take more than MAX_TESTS tests (many problems of
unrelated sizes in one result), each problem is one test with its fractional score: the points
are still right, the table then counts whole problems only.

The reporter prints each message in the Actions log, where a line that starts with `::` (after
its indentation) is a workflow command (`::add-mask::`, `::error::`...). Student text never
starts a line (it follows the grader's words and its line breaks are escaped: results.one_line),
and a line that would start with `::` all the same is quoted.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction

from ..grading.results import GradeResult, ProblemResult
from .text import feedback

MAX_TESTS = 1000
_DENOMINATOR = 1000  # weights and partial credits are read as fractions with at most this denominator


def _test(name: str, passed: bool, score: float, max_score: float, message: str, status: str = "") -> dict:
    return {"name": name, "status": status or ("pass" if passed else "fail"), "score": score, "max_score": max_score,
            "message": message, "execution_time": "", "test_code": "", "filename": "", "line_no": 0}


def _message(p: ProblemResult, notes: str) -> str:
    return _inert((notes + feedback(p)).strip())


def _shares(p: ProblemResult) -> list[tuple[Fraction, Fraction]]:
    """(what each case is worth, what it earned), in points, as exact fractions."""
    weights = [Fraction(c.weight).limit_denominator(_DENOMINATOR) for c in p.cases]
    total, points = sum(weights), Fraction(p.max_score).limit_denominator(_DENOMINATOR)
    return [(points * w / total, points * w / total * Fraction(c.earned).limit_denominator(_DENOMINATOR))
            for w, c in zip(weights, p.cases)] if total else []


def _unit(result: GradeResult) -> Fraction | None:
    """The value of one test when every test is worth the same, or None if that takes too many."""
    values = [x for p in result.problems for pair in _shares(p) for x in pair if x]
    if not values:
        return None
    unit = Fraction(math.gcd(*(v.numerator for v in values)), math.lcm(*(v.denominator for v in values)))
    return unit if sum(worth for p in result.problems for worth, _ in _shares(p)) / unit <= MAX_TESTS else None


def _unit_tests(result: GradeResult, unit: Fraction, notes: str) -> list[dict]:
    tests: list[dict] = []
    for p in result.problems:
        first = len(tests)
        for case, (worth, earned) in zip(p.cases, _shares(p)):
            count, passed = int(worth / unit), int(earned / unit)
            for i in range(count):
                name = f"{p.id}: {case.name}" + (f" ({i + 1}/{count})" if count > 1 else "")
                tests.append(_test(name, i < passed, float(unit) if i < passed else 0.0, float(unit), ""))
        # the problem's report once: on its first failing test (the one a reader opens), else its first
        ours = tests[first:]
        if ours:
            next((t for t in ours if t["status"] != "pass"), ours[0])["message"] = _message(p, notes)
    return tests


def _inert(text: str) -> str:
    """`text` with every line that would read as a workflow command quoted."""
    return "\n".join("| " + line if line.lstrip().startswith("::") else line for line in text.split("\n"))


def as_dict(result: GradeResult) -> dict:
    notes = "".join(f"{m}\n" for m in result.messages)
    # written items are graded by hand, outside GitHub's points
    result = replace(result, problems=tuple(p for p in result.problems if not p.manual))
    if not result.problems:  # nothing could be graded: say why
        return {"version": 1, "status": "error", "max_score": 0,
                "tests": [_test("submission", False, 0, 0, _inert(notes.strip()) or "nothing was graded", "error")]}
    unit = _unit(result)
    tests = _unit_tests(result, unit, notes) if unit is not None else [
        _test(f"{p.id}: {p.title}", p.passed, p.score, p.max_score, _message(p, notes)) for p in result.problems]
    status = "pass" if all(p.passed for p in result.problems) else "fail"
    return {"version": 1, "status": status, "max_score": result.max_score, "tests": tests}


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result)) + "\n"
