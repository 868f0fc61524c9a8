"""Small things the feedback says right: a function that returns None, an exception without a
message, weights that are nan or inf drawn and marked, right weights beside a wrong output, and
GitHub's report on the failing test."""
from __future__ import annotations

import math

import numpy as np
import pytest

from grader.course.model import CompareKind, Comparison
from grader.grading.checks import check
from grader.grading.grade import grade
from grader.grading.results import RETURNED_NONE, CaseResult, CaseStatus, GradeResult, ProblemResult, WeightGrid
from grader.reports import github, html, text
from grader.reports.terminal import Style, grid_lines
from grader.sandbox.limits import Limits

from .conftest import SOLUTIONS

PLAIN = Style(color=False, width=100)


def _graded(course, folder, source: str, problem: str) -> ProblemResult:
    (folder / "attention.py").write_text(source)
    result = grade(course, folder / "attention.py", problem_ids=[problem], limits=Limits(problem_seconds=10))
    return result.problems[0]


class TestReturnedNone:
    def test_check_says_missing_return(self):
        """None as an answer: "returned None: missing return?", before any shape or value is looked at."""
        verdict = check(Comparison(kind=CompareKind.ALLCLOSE), np.ones(3), None)
        assert (verdict.passed, verdict.kind) == (False, RETURNED_NONE)

    def test_a_softmax_without_return(self, course, tmp_path):
        """Every case says it once, and no hint about axes follows."""
        source = (SOLUTIONS / "attention.py").read_text().replace(
            "    return e / e.sum(axis=-1, keepdims=True)", "    e / e.sum(axis=-1, keepdims=True)", 1)
        problem = _graded(course, tmp_path, source, "softmax")
        assert problem.score == 0 and {c.summary for c in problem.cases} == {RETURNED_NONE}
        report = text.render(GradeResult("t", "a.py", (problem,)), PLAIN)
        assert "      every case: returned None: missing return?\n" in report
        assert "hint:" not in report and "axis" not in report


def test_an_exception_without_a_message_prints_cleanly(course, tmp_path):
    """`assert d_model % num_heads == 0` where ValueError is expected: no ': ,' in the summary."""
    source = (SOLUTIONS / "attention.py").read_text()
    check_line = "    if d_model % num_heads:\n        raise ValueError("
    assert check_line in source
    source = source.replace(check_line, "    assert d_model % num_heads == 0\n    if False:\n        raise ValueError(", 1)
    problem = _graded(course, tmp_path, source, "split_heads")
    case = next(c for c in problem.cases if c.name == "width not divisible by heads")
    line = next(n for n, t in enumerate(source.splitlines(), 1) if "assert d_model % num_heads" in t)
    assert case.summary == f"raised AssertionError at line {line}, expected ValueError"


class TestNotFiniteWeights:
    GRID = WeightGrid("", got=((0.5, math.inf, -math.inf), (math.nan, 1.0, 0.0)),
                      expected=((1.0, 0.0, 0.0), (0.5, 0.5, 0.0)), shape=(2, 3))

    def test_text_marks_nan_and_inf_cells(self):
        """?? for nan, !! for inf, -- for -inf, with a legend of the marks used."""
        assert grid_lines([self.GRID], PLAIN, "") == [
            "yours     expected",
            "│▒▒!!--│  │██    │",
            "│??██  │  │▒▒▒▒  │",
            "(?? = nan, !! = inf, -- = -inf)"]

    def test_html_marks_them_too(self):
        """The picture draws every cell; a cell that is not a number gets its own fill and a red frame."""
        case = CaseResult("c", False, 1.0, CaseStatus.FAILED, summary="weights: not finite", grids=(self.GRID,))
        page = html.fragment(GradeResult("t", "a.py", (ProblemResult("sdpa", "SDPA", 15, (case,)),)))
        assert page.count("<rect") == 12 and page.count('fill="#f4c430"') == 3
        assert "query 1, key 0: nan" in page and "query 0, key 2: -inf" in page

    def test_grading_draws_weights_with_minus_inf(self, course, tmp_path):
        """The mask applied after the softmax (masked weights -inf): the case carries the grid, -inf marked."""
        source = (SOLUTIONS / "attention.py").read_text()
        before = ("    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)  # exp(-inf) = 0: masked keys "
                  "get no weight\n    weights = softmax(scores)")
        assert before in source
        source = source.replace(before, "    weights = softmax(scores)\n    if mask is not None:\n"
                                        "        weights = np.where(mask, weights, -np.inf)", 1)
        problem = _graded(course, tmp_path, source, "scaled_dot_product_attention")
        drawn = [c for c in problem.cases if c.grids]
        assert drawn and any(-math.inf in row for c in drawn for row in c.grids[0].got)
        assert "(-- = -inf)" in text.render(GradeResult("t", "a.py", (problem,)), PLAIN)


class TestHugeWeights:
    """Weights at the edges of a float (1e308 * 4 is inf, which round() refused): every format is
    written, the case costs its points, never "the autograder failed"."""

    GRID = WeightGrid("", got=((1e308, -1e308, 5e-324), (math.nan, math.inf, 1.7976931348623157e308)),
                      expected=((1.0, 0.0, 0.0), (0.5, 0.5, 0.0)), shape=(2, 3))

    def test_text_shades_them_as_the_darkest_and_lightest(self):
        assert grid_lines([self.GRID], PLAIN, "") == [
            "yours     expected",
            "│██    │  │██    │",
            "│??!!██│  │▒▒▒▒  │",
            "(?? = nan, !! = inf)"]

    def test_grading_weights_of_1e308_in_every_format(self, course, tmp_path):
        """scaled_dot_product_attention's weights times 1e308: 0 points, every format renders."""
        from grader.reports import names, render
        source = (SOLUTIONS / "attention.py").read_text()
        before = "    weights = softmax(scores)"
        assert before in source
        source = source.replace(before, before + "\n    weights = weights * 1e308", 1)
        problem = _graded(course, tmp_path, source, "scaled_dot_product_attention")
        assert problem.score == 0 and any(c.grids for c in problem.cases)
        result = GradeResult("t", "a.py", (problem,))
        for fmt in names():
            assert render(fmt, result), fmt


def test_right_weights_beside_a_wrong_output_are_said():
    """(output, weights) with the weights right and the output wrong: the detail says the weights are right."""
    cmp = Comparison(kind=CompareKind.ALLCLOSE)
    expected = (np.ones((2, 2)), np.eye(2))
    verdict = check(cmp, expected, (np.zeros((2, 2)), np.eye(2)), ("output", "weights"))
    assert verdict.kind == "output: wrong values" and verdict.detail.endswith(" (weights right)")
    both = check(cmp, expected, (np.zeros((2, 2)), np.zeros((2, 2))), ("output", "weights"))
    assert both.kind == "output: wrong values" and "right" not in both.detail


@pytest.mark.parametrize("first_passes", [True, False])
def test_github_report_on_the_first_failing_test(first_passes):
    """A problem whose first case passes and second fails: its report is on the failing test only."""
    cases = (CaseResult("a", False, 1.0, CaseStatus.PASSED if first_passes else CaseStatus.FAILED, summary="x"),
             CaseResult("b", False, 1.0, CaseStatus.FAILED, summary="wrong values", detail="got 2, expected 1"))
    tests = github.as_dict(GradeResult("t", "a.py", (ProblemResult("p", "P", 10, cases),)))["tests"]
    carrying = [t["name"] for t in tests if t["message"]]
    assert carrying == (["p: b"] if first_passes else ["p: a"])
    assert "got 2, expected 1" in next(t["message"] for t in tests if t["message"])
