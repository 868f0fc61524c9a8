"""The problems that ask for reasoning: the evidence that one head cannot hold two designs, a padded
batch with a defined fully padded row, and the order of the set (evidence, then its thesis, last)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from grader.course.render import render_prompt
from grader.grading.grade import grade
from grader.grading.prepared import prepare

from .conftest import COURSE as ref

SCALES = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]


def _closed_form(seq_len: int, p: float, s: float) -> float:
    """The worst query is the last: it sees T keys, T - 2 of them scored 0 beside its two targets."""
    return min(math.exp(p), math.exp(s)) / (math.exp(p) + math.exp(s) + seq_len - 2)


class TestOneHeadBothDesigns:
    @pytest.mark.parametrize("seq_len", [3, 5, 9])
    @pytest.mark.parametrize("max_scale", [0.0, 1.0, 4.0])
    def test_reference_is_the_best_of_every_pair_of_scales(self, seq_len, max_scale):
        """No pair of scales within the cap beats the reference, and the reference is the closed form at p = s."""
        best = ref.one_head_both_designs(seq_len, max_scale)
        grid = np.linspace(-2.0, max_scale, 13)
        searched = max(min(_closed_form(T, p, s) for T in range(3, seq_len + 1)) for p in grid for s in grid)
        assert best == pytest.approx(_closed_form(seq_len, max_scale, max_scale), rel=1e-12)
        assert searched <= best + 1e-12

    def test_no_scale_reaches_one_half(self):
        """However large the cap, the worst query's smaller weight stays below 1/2 (far from 0.9)."""
        values = [ref.one_head_both_designs(12, c) for c in (0, 5, 10, 15)]
        assert values == sorted(values) and values[-1] < 0.5 and values[-1] > 0.49

    def test_two_heads_clear_the_bar_one_head_misses(self):
        """The reference two-head layer puts at least 0.9 on both targets, where one head stays below 0.5."""
        T = 8
        W_Q, W_K = ref.two_head_layer(T)
        weights = ref.layer_pattern_weights(T, W_Q, W_K, 2)      # (h, T, T)
        rows = np.arange(1, T)
        assert (weights[0, rows, rows - 1] >= 0.9).all() and (weights[1, rows, 0] >= 0.9).all()

    def test_the_prompt_asks_and_does_not_tell(self, course):
        """The prompt asks for a prediction and never states the bound, the best scales or the hardest query."""
        problem = course.problem("one_head_both_designs")
        text = render_prompt(problem, 0) + " ".join(problem.hints)
        assert "Predict before you code" in text
        for told in ("1/2", "0.5", "one half", "below half", "e^p + e^s +", "p = s = max_scale", "last query"):
            assert told not in text, told


def _per_sequence(X, W_Q, W_K, W_V, W_O, num_heads, key_mask):
    """The batch, one sequence at a time, through the course's single-sequence reference."""
    outputs, weights = [], []
    for x, keys in zip(X, key_mask):
        mask = np.broadcast_to(keys, (len(x), len(keys)))        # (L, S): the same keys for every query
        out, w = ref.multi_head_attention(x, W_Q, W_K, W_V, W_O, num_heads, mask if keys.any() else None)
        if not keys.any():                                      # the defined empty rows
            out, w = np.zeros_like(out), np.zeros_like(w)
        outputs.append(out)
        weights.append(w)
    return np.stack(outputs), np.stack(weights)


class TestPaddedBatch:
    @pytest.fixture
    def batch(self):
        rng = np.random.default_rng(3)
        X = rng.standard_normal((4, 5, 6))
        Ws = [rng.standard_normal((6, 6)) * 0.5 for _ in range(4)]
        key_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 1, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=bool)
        return X, Ws, key_mask

    def test_reference_matches_one_sequence_at_a_time(self, batch):
        """The batched reference equals the single-sequence reference run on each sequence with its keys."""
        X, Ws, key_mask = batch
        out, weights = ref.padded_batch_attention(X, *Ws, 3, key_mask)
        want_out, want_weights = _per_sequence(X, *Ws, 3, key_mask)
        np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)

    def test_a_fully_padded_sequence_is_zero_not_nan(self, batch):
        """The all-padding sequence gets zero weights and a zero output; padded keys get zero weight."""
        X, Ws, key_mask = batch
        out, weights = ref.padded_batch_attention(X, *Ws, 3, key_mask)
        assert np.isfinite(out).all() and np.isfinite(weights).all()
        assert not out[3].any() and not weights[3].any()
        assert not weights[1][..., 3:].any() and np.allclose(weights[:3].sum(axis=-1), 1.0)

    def test_the_nan_bug_is_nan_only_on_the_empty_sequence(self, batch):
        """The named mistake differs from the reference exactly where a row has no real key."""
        X, Ws, key_mask = batch
        with np.errstate(invalid="ignore"):
            out, _ = ref.padded_batch_nan_rows(X, *Ws, 3, key_mask)
        assert np.isnan(out[3]).all() and np.isfinite(out[:3]).all()

    def test_every_public_case_shows_padding(self, course):
        """The public cases include a fully padded sequence, a partly padded one and a batch without a mask."""
        problem = course.problem("padded_batch_attention")
        args = [prepare(problem, c).args for c in problem.cases if not c.hidden]
        assert any(len(a) == 6 for a in args)                   # key_mask left at its default, None
        given = [np.asarray(a[6], dtype=bool) for a in args if len(a) == 7]
        assert any((~m.any(axis=-1)).any() for m in given) and any((m.any(axis=-1) & ~m.all(axis=-1)).any()
                                                                    for m in given)

    def test_the_prompt_defines_the_empty_row_without_the_code(self, course):
        """The prompt says what a fully padded row must be, and gives no call that produces it."""
        prompt = course.problem("padded_batch_attention").prompt
        assert "its weights are all 0" in prompt and "output row are 0" in prompt
        for code in ("np.divide", "nan_to_num", "where=", "np.where", "isfinite"):
            assert code not in prompt, code


class TestOrder:
    def test_the_set_ends_on_its_thesis_after_its_evidence(self, course, core_course):
        """In the core, the problems on a head's width (thin_head, one_wide_head) come after the
        evidence that one head falls short (one_head_both_designs); switched on, two_head_layer (the
        lesson's thesis, built by hand) comes after that evidence too."""
        ids = [p.id for p in core_course.problems]
        assert ids.index("one_head_both_designs") < min(ids.index("thin_head"), ids.index("one_wide_head"))
        assert ids.index("multi_head_attention") < ids.index("padded_batch_attention")
        every = [p.id for p in course.problems]
        assert every.index("one_head_both_designs") < every.index("two_head_layer")

    def test_a_one_line_answer_is_worth_less_than_a_layer(self, course):
        """Points follow effort: a one-line reading or formula is worth less than a whole layer."""
        points = {p.id: p.points for p in course.problems}
        for small in ("attention_reading", "parameter_count"):
            for large in ("scaled_dot_product_attention", "multi_head_attention", "padded_batch_attention"):
                assert points[small] < points[large], (small, large)


class TestGraded:
    def test_the_solutions_score_full_marks_on_the_new_problems(self, course):
        """The model answers pass every case of both new problems, hidden ones included."""
        from .conftest import SOLUTIONS
        result = grade(course, SOLUTIONS, problem_ids=["padded_batch_attention", "one_head_both_designs"])
        assert [p.score for p in result.problems] == [p.max_score for p in result.problems] == [15, 10]
