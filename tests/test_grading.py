"""Prepared cases shared by a batch (grader.grading.grade.PreparedCases)."""
from __future__ import annotations

import numpy as np
import pytest

from grader.grading.grade import grade
from grader.grading.prepared import PreparedCases, prepare

from .conftest import SOLUTIONS


class TestPreparedCases:
    def test_a_case_is_prepared_once_per_seed(self, course):
        """The same (problem, case, seed) gives the same object; another seed its own."""
        cache = PreparedCases()
        problem = course.problem("multi_head_attention")
        case = problem.cases[0]
        first = cache.get(problem, case, 7)
        assert cache.get(problem, case, 7) is first
        assert cache.get(problem, case, 8) is not first

    def test_equal_to_preparing_afresh_and_read_only(self, course):
        """Inputs and expected answer equal prepare()'s, and cannot be changed in place."""
        problem = course.problem("scaled_dot_product_attention")
        case = problem.cases[0]
        cached, fresh = PreparedCases().get(problem, case, 3), prepare(problem, case, 3)
        for got, want in zip((*cached.args, *cached.expected), (*fresh.args, *fresh.expected)):
            if isinstance(want, np.ndarray):
                assert np.array_equal(got, want)
                with pytest.raises(ValueError, match="read-only"):
                    got[...] = 0

    def test_keeps_only_the_last_seeds(self, course):
        """With per-student seeds, memory stays bounded: the oldest seed is dropped."""
        cache = PreparedCases(seeds=2)
        problem = course.problem("softmax")
        case = problem.cases[0]
        oldest = cache.get(problem, case, 1)
        cache.get(problem, case, 2)
        cache.get(problem, case, 3)
        assert cache.get(problem, case, 1) is not oldest

    def test_grading_with_the_cache_gives_the_same_result(self, course):
        """A submission graded with shared prepared cases gets exactly the result it gets alone."""
        cache = PreparedCases()
        alone = grade(course, SOLUTIONS / "attention.py", seed=5)
        shared = [grade(course, SOLUTIONS / "attention.py", seed=5, cache=cache) for _ in range(2)]
        for result in shared:
            assert result.problems == alone.problems
