"""Bugs written as students write them (tests/submissions/bug_*.py, each laid over the model
answers), graded on every problem: each is told its own mistake, on one problem, once."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from grader.grading.diagnosis import SEVERAL_CAUSES
from grader.grading.grade import grade, judged_problem
from grader.grading.prepared import prepare

from .conftest import solution_source

SUBMISSIONS = Path(__file__).resolve().parent / "submissions"

# each file: the mistake its problem is told (a problem not listed names none). NEW: one file
# per mistake the catalogue gained from real code; KNOWN: real code for mistakes it had, which
# one odd case used to rule out
NEW = {
    "bug_softmax_stack_overflow": {"softmax": "softmax-global-max-first-axis"},
    "bug_attention_sqrt_queries": {"scaled_dot_product_attention": "attention-scaled-by-sqrt-queries"},
    "bug_attention_sqrt_keys": {"scaled_dot_product_attention": "attention-scaled-by-sqrt-keys"},
    "bug_attention_mask_after_softmax_inf": {"scaled_dot_product_attention": "attention-mask-after-softmax-inf"},
    "bug_attention_weights_scaled": {"scaled_dot_product_attention": "attention-weights-scaled"},
    "bug_split_heads_no_transpose": {"split_heads": "split-heads-no-transpose"},
    "bug_mha_transpose_3d": {"multi_head_attention": "mha-transpose-3d"},
    "bug_mha_input_split": {"multi_head_attention": "mha-input-split"},
    "bug_mha_merge_inline": {"multi_head_attention": "mha-merge-without-transpose"},
    "bug_mha_mask_ignored": {"multi_head_attention": "mha-mask-ignored"},
    "bug_reading_concat_reshape": {"multi_head_reading": "reading-concat-reshaped"},
    "bug_reading_outputs_averaged": {"multi_head_reading": "reading-outputs-averaged"},
    "bug_count_layers_batch": {"count_routing_distributions": "ignores-layers-and-batch"},
    "bug_count_causal_triangle": {"count_routing_distributions": "counts-causal-triangle"},
    "bug_mha_vit_weights_scaled": {"multi_head_attention": "mha-weights-scaled-after-softmax"},
    "bug_split_heads_tutorial": {"split_heads": "split-heads-batched-reshape"},
}
KNOWN = {
    "bug_mha_vit_scale": {"multi_head_attention": "mha-scaled-by-d-model"},
    "bug_mha_heads_averaged": {"multi_head_attention": "mha-weights-averaged"},
    "bug_mha_one_wide_head": {"multi_head_attention": "mha-one-wide-head"},
    "bug_contribution_own_slice": {"head_contributions": "contribution-own-slice"},
}
NAMED = {**NEW, **KNOWN}


def test_every_bug_file_is_listed():
    assert sorted(p.stem for p in SUBMISSIONS.glob("bug_*.py")) == sorted([*NAMED, "bug_cascade_overflow_unscaled"])


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """Grade a bug file (over the model answers) on every problem, once per file."""
    done = {}

    def grade_file(stem: str):
        if stem not in done:
            path = tmp_path_factory.mktemp(stem) / "attention.py"
            path.write_text(solution_source() + "\n\n" + (SUBMISSIONS / f"{stem}.py").read_text())
            done[stem] = grade(course, path)
        return done[stem]
    return grade_file


@pytest.mark.parametrize("stem", sorted(NAMED))
def test_a_real_bug_is_named_once_on_its_problem(graded, course, stem):
    """The bug costs points on its problem, which is told its mistake (with the problem file's
    message, on a hidden case too); no problem is told any other."""
    result = graded(stem)
    told = {p.id: p.mistakes for p in result.problems if p.mistakes}
    assert told == {problem: (mistake,) for problem, mistake in NAMED[stem].items()}
    for problem_id, mistake in NAMED[stem].items():
        problem = next(p for p in result.problems if p.id == problem_id)
        message = next(m.message for m in course.problem(problem_id).mistakes if m.id == mistake)
        named = [c for c in problem.cases if c.mistake == mistake]
        assert problem.score < problem.max_score
        assert all(c.mistake_message == message for c in named)
        assert any(c.hidden for c in named), f"{mistake} is named on public cases only"


class TestOneOddCase:
    """diagnose() on a problem whose catalogue is cut down to the mistakes under test."""

    @staticmethod
    def judged(course, problem_id, mistake_ids, source, case_names=None):
        from grader.sandbox.session import Session
        problem = course.problem(problem_id)
        mistakes = tuple(m for m in problem.mistakes if m.id in mistake_ids)
        cases = tuple(c for c in problem.cases if case_names is None or c.name in case_names)
        problem = replace(problem, mistakes=mistakes, cases=cases)
        prepared = [prepare(problem, c) for c in cases]
        with Session((solution_source() + "\n\n" + source).encode()) as session:
            run = session.run(problem.function.name, [p.args for p in prepared], 30.0)
            return judged_problem(problem, prepared, run.cases, session)

    def test_a_nan_where_the_mistake_is_finite_does_not_rule_it_out(self, course):
        """The copied softmax (global max, sum over axis 0) weighed against 'wrong axis' alone:
        nan on the cases where its global max underflows, which 'wrong axis' answers finitely.
        Those cases are listed, the others named."""
        source = (SUBMISSIONS / "bug_softmax_stack_overflow.py").read_text()
        result = self.judged(course, "softmax", {"softmax-wrong-axis"}, source)
        assert result.mistakes == ("softmax-wrong-axis",)
        unexplained = [c.name for c in result.cases if not c.passed and c.mistake is None]
        assert unexplained and "huge scores of both signs" in unexplained
        assert result.message.startswith("softmax-wrong-axis does not explain ")
        assert all(repr(name) in result.message for name in unexplained)

    def test_inputs_the_code_cannot_take_do_not_rule_a_mistake_out(self, course):
        """The ViT port raises on every masked case (numpy arrays have no masked_fill): the
        sqrt(d_model) scale is still named on the others, and the masked cases are listed."""
        source = (SUBMISSIONS / "bug_mha_vit_scale.py").read_text()
        result = self.judged(course, "multi_head_attention", {"mha-scaled-by-d-model", "mha-mask-ignored"},
                             source)
        assert result.mistakes == ("mha-scaled-by-d-model",)
        assert "causal mask" in result.message and "does not explain" in result.message

    def test_two_mistakes_that_fit_alike_name_the_first_declared(self, course):
        """On a case without underflow, 'wrong axis' and the copied softmax give the same answer on the
        same cases: the student's answers are both bugs' there, so either name is right; the one the
        problem file declares first is named, with no 'several causes' note."""
        source = "def softmax(scores):\n    e = np.exp(scores - scores.max(axis=0))\n    return e / e.sum(axis=0)\n"
        result = self.judged(course, "softmax", {"softmax-wrong-axis", "softmax-global-max-first-axis"},
                             source, {"one distribution per row"})
        declared = [m.id for m in course.problem("softmax").mistakes]
        assert declared.index("softmax-wrong-axis") < declared.index("softmax-global-max-first-axis")
        assert result.mistakes == ("softmax-wrong-axis",)
        assert not result.message.startswith(SEVERAL_CAUSES)

    def test_two_mistakes_that_fit_different_cases_are_both_named_in_the_note(self, course):
        """Two mistakes that each explain different failing cases, neither most: the note names both."""
        from grader.grading.diagnosis import several_causes
        note = several_causes([(course.problem("softmax").mistakes[0], ["a"]),
                               (course.problem("softmax").mistakes[1], ["b"])])
        assert note.startswith(SEVERAL_CAUSES) and "'a'" in note and "'b'" in note

    def test_nothing_fits_says_nothing(self, course):
        """An answer no known mistake explains gets no 'several causes' note."""
        source = "def softmax(scores):\n    return np.asarray(scores, dtype=float) * 0 + 0.5\n"
        result = self.judged(course, "softmax", {m.id for m in course.problem("softmax").mistakes}, source)
        assert result.score == 0 and result.mistakes == () and result.message == ""


@pytest.mark.parametrize("stem", ["bug_mha_transpose_3d", "bug_cascade_overflow_unscaled"])
def test_mha_grade_names_them_too(cli_everything, tmp_path, stem):
    """`mha grade` grades on the seed cache (wrong answers computed ahead, a bug's
    error included): the .T mistake and the mistake behind a broken helper are named there too."""
    import json
    path = tmp_path / "attention.py"
    path.write_text(solution_source() + "\n\n" + (SUBMISSIONS / f"{stem}.py").read_text())
    result = cli_everything("grade", str(path), "--format", "json")   # scaled_dot_product_attention switched on
    problems = {p["id"]: p["mistakes"] for p in json.loads(result.stdout)["problems"] if p["mistakes"]}
    expected = {"bug_mha_transpose_3d": {"multi_head_attention": ["mha-transpose-3d"]},
                "bug_cascade_overflow_unscaled": {"softmax": ["softmax-overflow"],
                                                  "scaled_dot_product_attention": ["attention-no-scale"]}}[stem]
    assert result.exit_code == 0 and problems == expected
