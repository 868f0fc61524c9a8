"""Mistakes as ideas: two at once in one function, and a building block's mistake written inline."""
from __future__ import annotations

import textwrap

import pytest

from grader.grading.diagnosis import BOTH
from grader.grading.grade import grade

from .conftest import SOLUTIONS

HEAD = '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, d_model = X.shape
    d_k = d_model // num_heads
    Q = (X @ W_Q).reshape(n, num_heads, d_k).transpose(1, 0, 2)
    K = (X @ W_K).reshape(n, num_heads, d_k).transpose(1, 0, 2)
    V = (X @ W_V).reshape(n, num_heads, d_k).transpose(1, 0, 2)
'''
SCORES = {"right": "    scores = Q @ K.transpose(0, 2, 1) / np.sqrt(d_k)\n",
          "d_model": "    scores = Q @ K.transpose(0, 2, 1) / np.sqrt(d_model)\n"}
MASK = {"right": "    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)\n",
        "ignored": ""}
SOFTMAX = ("    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
           "    weights = weights / weights.sum(axis=-1, keepdims=True)\n")
MERGE = {"right": "    return (weights @ V).transpose(1, 0, 2).reshape(n, d_model) @ W_O, weights\n",
         "reshape": "    return (weights @ V).reshape(n, d_model) @ W_O, weights\n",
         "no_projection": "    return (weights @ V).transpose(1, 0, 2).reshape(n, d_model), weights\n"}


def layer(scores="right", mask="right", merge="right") -> str:
    return HEAD + SCORES[scores] + MASK[mask] + SOFTMAX + MERGE[merge]


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    def run(source: str):
        path = tmp_path_factory.mktemp("ideas") / "attention.py"
        path.write_text((SOLUTIONS / "attention.py").read_text() + "\n\n" + textwrap.dedent(source))
        result = grade(course, path)
        return next(p for p in result.problems if p.id == "multi_head_attention")
    return run


class TestTwoAtOnce:
    @pytest.mark.parametrize("parts, named", [
        ({"scores": "d_model", "merge": "reshape"}, ("mha-scaled-by-d-model", "mha-merge-without-transpose")),
        ({"scores": "d_model", "merge": "no_projection"}, ("mha-scaled-by-d-model", "mha-no-output-projection")),
        ({"mask": "ignored", "merge": "reshape"}, ("mha-merge-without-transpose", "mha-mask-ignored")),
    ])
    def test_two_catalogued_mistakes_in_one_function_are_both_named(self, graded, parts, named):
        """Written as a student would, with two steps wrong: one name holding both mistakes, on every
        failing case it explains, and no 'several causes' note."""
        problem = graded(layer(**parts))
        assert len(problem.mistakes) == 1
        assert set(problem.mistakes[0].split(BOTH)) == set(named)
        named_on = [c for c in problem.cases if c.mistake == problem.mistakes[0]]
        assert any(c.hidden for c in named_on) and any(not c.hidden for c in named_on)
        assert all(c.passed or c.mistake == problem.mistakes[0] for c in problem.cases)

    @pytest.mark.parametrize("parts, named", [
        ({"scores": "d_model"}, "mha-scaled-by-d-model"),
        ({"merge": "reshape"}, "mha-merge-without-transpose"),
    ])
    def test_one_mistake_alone_is_still_named_alone(self, graded, parts, named):
        """A single step wrong keeps its own name: no pair is tried when one mistake explains all."""
        assert graded(layer(**parts)).mistakes == (named,)

    def test_the_right_layer_names_nothing(self, graded):
        problem = graded(layer())
        assert problem.passed and problem.mistakes == ()


def test_softmax_over_the_queries_inline_is_named_in_multi_head_attention(graded):
    """softmax's mistake (over the query axis) written inline in multi-head attention's own code,
    not through the student's softmax: named there."""
    source = layer().replace("axis=-1", "axis=1")
    assert graded(source).mistakes == ("mha-softmax-over-queries",)


# --- every idea in two ways: the course's own bug, and a student's rewrite (test_mistakes.py) ---

class _Course:
    """Stands in for the sandbox's session: the course's own bug called in this process for the
    problem's function (the bug is the course's code, trusted; no student code runs here)."""

    def __init__(self, function):
        self.function = function
        self.load_failure, self.left_behind, self.earlier_left_behind = None, False, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def stop(self):  # every answer is in (run_problems): nothing to end here
        return None

    def run(self, name, args, seconds, then=None):
        import copy

        import numpy as np

        from grader.sandbox.runs import CaseRun, RunStatus, StudentError
        from grader.sandbox.session import ProblemRun
        runs = []
        for case in args:
            try:
                with np.errstate(all="ignore"):
                    value = self.function(*copy.deepcopy(list(case)))
            except Exception as exc:
                error = StudentError(type(exc).__name__, tuple(c.__name__ for c in type(exc).__mro__), str(exc))
                runs.append(CaseRun(RunStatus.RAISED, error=error))
            else:
                runs.append(CaseRun(RunStatus.RETURNED, value=value))
        return ProblemRun(tuple(runs))


def _course_bugs(course):
    return [(p, m) for p in course.problems for m in p.mistakes if not m.detector]


def test_the_course_s_own_bug_is_named_for_every_mistake(course, tmp_path, monkeypatch):
    """Each mistake with a bug function, written the course's way (its bug answering every case of
    the problem, hidden ones included): graded by the same judge, it is named. With each mistake's
    student-style rewrite in test_mistakes.py (named there too), every idea is found written two ways."""
    from grader.course.code import course_function
    from grader.grading import grade as grading
    unnamed = {}
    for problem, mistake in _course_bugs(course):
        bug = course_function(problem.code, mistake.bug)
        assert bug is not None, mistake.bug
        monkeypatch.setattr(grading, "WatchedSession", lambda data, limits=None, *, _bug=bug, **kw: _Course(_bug))
        path = tmp_path / f"{mistake.id}.py"
        path.write_text(f"def {problem.function.name}(*args):\n    return None\n")  # read, never run here
        result = next(p for p in grade(course, path, problem_ids=[problem.id]).problems if p.id == problem.id)
        if mistake.id not in result.mistakes and not any(mistake.id in m.split(BOTH) for m in result.mistakes):
            unnamed[mistake.id] = (result.mistakes, result.message[:120])
    assert len(_course_bugs(course)) >= 40
    assert unnamed == {}
