"""`reveal: false`: a public case whose answer the student must work out shows what was got, never
the expected answer, in `mha grade`, in every problem that uses it, and is not in the student bundle's seed cases."""
from __future__ import annotations

import re

import pytest

from grader.course.loader import load_problem
from grader.errors import SpecErrors
from grader.grading.grade import ON_SUBMISSION, ON_SUBMISSION_DETAIL, UNREVEALED, grade, judge
from grader.grading.prepared import prepare
from grader.grading.results import CaseStatus
from grader.grading.seed_cases import SeedCases, build
from grader.sandbox.session import CaseRun, RunStatus

from .conftest import COURSE as ref, COURSE_CODE
from .test_mistakes import BUGS, buggy_submission

# problems whose public cases are answers to work out by hand: none of them shows its expected value
WORKED_OUT = {"count_routing_distributions": "all", "parameter_count": ("width 768, 12 heads", "width 768, one head")}

PROBLEM = """\
id: count_routing_distributions
title: Count
points: 10
prompt: Count the rows.
cases:
  - name: one head
    visibility: public
    reveal: {reveal}
    args: {{num_heads: 1, d_v: 8, num_queries: 3}}
"""


def _load(tmp_path, reveal: str):
    path = tmp_path / "count_routing_distributions.yaml"
    path.write_text(PROBLEM.format(reveal=reveal))
    return path, load_problem(path, COURSE_CODE)


class TestLoader:
    def test_reveal_defaults_to_true_and_reads_false(self, tmp_path, course):
        """A case without `reveal` shows its expected answer; `reveal: false` is read as False."""
        assert all(c.reveal for c in course.problem("softmax").cases)
        assert _load(tmp_path, "false")[1].cases[0].reveal is False

    def test_reveal_must_be_a_bool(self, tmp_path):
        """`reveal: sometimes` is one file:line error naming the key and the value."""
        with pytest.raises(SpecErrors) as info:
            _load(tmp_path, "sometimes")
        path = tmp_path / "count_routing_distributions.yaml"
        assert [str(e) for e in info.value.errors] == [f"{path}:8: 'reveal' must be true or false (got 'sometimes')"]


def _wrong_count_result(problem, case, seed=0):
    prepared = prepare(problem, case, seed)
    return prepared, judge(problem, prepared, CaseRun(status=RunStatus.RETURNED, value=prepared.expected + 1))


class TestFeedback:
    def test_unrevealed_case_shows_got_not_expected(self, tmp_path):
        """A wrong count on a `reveal: false` case says what was got and that the count is not shown."""
        _, problem = _load(tmp_path, "false")
        prepared, result = _wrong_count_result(problem, problem.cases[0])
        assert not result.passed and result.inputs
        assert result.detail == UNREVEALED.format("the int 4")
        assert not re.search(rf"\b{prepared.expected}\b", result.detail + result.summary)

    def test_revealed_case_shows_expected(self, tmp_path):
        """The same case with `reveal: true` shows expected vs got, as every public case did before."""
        _, problem = _load(tmp_path, "true")
        _, result = _wrong_count_result(problem, problem.cases[0])
        assert "3" in result.detail and "4" in result.detail and "not shown" not in result.detail

    @pytest.mark.parametrize("problem_id", sorted(WORKED_OUT))
    def test_worked_out_cases_are_unrevealed(self, course, problem_id):
        """Every public case meant to be worked out by hand sets `reveal: false`."""
        problem = course.problem(problem_id)
        names = WORKED_OUT[problem_id]
        cases = [c for c in problem.cases if not c.hidden and (names == "all" or c.name in names)]
        assert cases and all(not c.reveal for c in cases), [c.name for c in cases if c.reveal]

    @pytest.mark.parametrize("seed", [0, 7, 12345])
    def test_a_wrong_count_never_shows_the_students_own_count(self, course, write_submission, seed):
        """Graded end to end with a known bug, no public count case's feedback holds its expected count."""
        bug = next(b for b in BUGS if b.mistake == "ignores-layers")
        problem = course.problem("count_routing_distributions")
        result = grade(course, write_submission(buggy_submission(bug)), problem_ids=[problem.id],
                       seed=seed).problems[0]
        failed = [c for c in result.cases if not c.hidden and not c.passed]
        assert failed
        for case_result in failed:
            case = next(c for c in problem.cases if c.name == case_result.name)
            expected = prepare(problem, case, seed).expected
            shown = " ".join((case_result.summary, case_result.detail, case_result.mistake_message or ""))
            assert "not shown" in case_result.detail and not re.search(rf"\b{expected}\b", shown)


class TestSeedCases:
    def test_student_seed_cases_keep_reveal(self, course):
        """The student bundle's seed cases carry `reveal` and hold no unrevealed answer: `mha check`
        checks its form and says it is graded on submission, whatever the value."""
        seed_cases = SeedCases(build(course, 0, "default"), path=None)
        problem, prepared = next((p, c) for p, c in seed_cases.problems if p.id == "count_routing_distributions")
        assert prepared and all(not c.case.reveal and c.expected is None and c.form == {} for c in prepared)
        for value in (3, 10**6):
            result = judge(problem, prepared[0], CaseRun(status=RunStatus.RETURNED, value=value))
            assert (result.status, result.summary) == (CaseStatus.ON_SUBMISSION, ON_SUBMISSION)
            assert result.detail == ON_SUBMISSION_DETAIL.format(f"the int {value}")
        result = judge(problem, prepared[0], CaseRun(status=RunStatus.RETURNED, value="24"))
        assert (result.status, result.summary) == (CaseStatus.FAILED, "wrong type")
        softmax = next(p for p, _ in seed_cases.problems if p.id == "softmax")
        assert all(c.reveal for c in softmax.cases)


class TestSharedKeyValueHeads:
    @pytest.mark.parametrize("kv", [1, 2, 4])
    def test_the_count_follows_query_heads(self, kv):
        """Multi-query (1) and grouped-query (2) attention form as many rows as 4 separate heads."""
        assert ref.count_routing_distributions(4, 8, num_queries=5, num_layers=2, num_kv_heads=kv) == 40

    def test_heads_not_a_multiple_of_key_value_heads(self):
        """Query heads that cannot be grouped evenly are a ValueError naming both numbers."""
        with pytest.raises(ValueError, match="num_heads=4 is not a multiple of num_kv_heads=3"):
            ref.count_routing_distributions(4, 8, num_kv_heads=3)
