"""Prepared cases shared by a batch (grader.grading.grade.PreparedCases)."""
from __future__ import annotations

import numpy as np
import pytest

from grader.grading.grade import grade
from grader.grading.prepared import PreparedCases, prepare

from .conftest import SOLUTIONS


class TestPreparedCases:
    def test_a_case_is_prepared_once_per_seed(self, assignment):
        """The same (problem, case, seed) gives the same object; another seed its own."""
        cache = PreparedCases()
        problem = assignment.problem("multi_head_attention")
        case = problem.cases[0]
        first = cache.get(problem, case, 7)
        assert cache.get(problem, case, 7) is first
        assert cache.get(problem, case, 8) is not first

    def test_equal_to_preparing_afresh_and_read_only(self, assignment):
        """Inputs and expected answer equal prepare()'s, and cannot be changed in place."""
        problem = assignment.problem("scaled_dot_product_attention")
        case = problem.cases[0]
        cached, fresh = PreparedCases().get(problem, case, 3), prepare(problem, case, 3)
        for got, want in zip((*cached.args, *cached.expected), (*fresh.args, *fresh.expected)):
            if isinstance(want, np.ndarray):
                assert np.array_equal(got, want)
                with pytest.raises(ValueError, match="read-only"):
                    got[...] = 0

    def test_keeps_only_the_last_seeds(self, assignment):
        """With per-student seeds, memory stays bounded: the oldest seed is dropped."""
        cache = PreparedCases(seeds=2)
        problem = assignment.problem("softmax")
        case = problem.cases[0]
        oldest = cache.get(problem, case, 1)
        cache.get(problem, case, 2)
        cache.get(problem, case, 3)
        assert cache.get(problem, case, 1) is not oldest

    def test_grading_with_the_cache_gives_the_same_result(self, assignment):
        """A submission graded with shared prepared cases gets exactly the result it gets alone."""
        cache = PreparedCases()
        alone = grade(assignment, SOLUTIONS / "attention.py", seed=5)
        shared = [grade(assignment, SOLUTIONS / "attention.py", seed=5, cache=cache) for _ in range(2)]
        for result in shared:
            assert result.problems == alone.problems
