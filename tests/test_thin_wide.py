"""The thin-head and one-wide-head problems: references checked against a search over query values
and against the models' own code, the facts their prompts state checked on every shipped seed, and
cases that are each student's own model."""
from __future__ import annotations

import json

import numpy as np
import pytest

from exercises import thin_wide as tw
from exercises.models import model as M  # the models' own code: an independent implementation
from grader.course.generators import draw_params
from grader.grading.prepared import prepare

from .conftest import EXERCISES

MODELS = EXERCISES / "models"
SEEDS = (0, 1, 2, 3)


def _searched_reach(k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """reach by brute force: every query value on a fine grid of both signs, a key marked when it
    alone has the row's largest score."""
    T = k.shape[0]
    reach = np.zeros((T, T))
    for q in np.linspace(-20, 20, 801):
        scores = np.where(mask, q * k[None, :], -np.inf)           # (T, T)
        for i in range(T):
            best = np.flatnonzero(scores[i] == scores[i].max())
            if best.size == 1:
                reach[i, best[0]] = 1
    return reach


def _student_case(course, problem_id: str, case_name: str, seed: int):
    problem = course.problem(problem_id)
    case = next(c for c in problem.cases if c.name == case_name)
    return prepare(problem, case, seed), draw_params(problem.params, problem.id, seed)


def _model(name: str):
    m = M.load(MODELS / f"{name}.npz")
    return m, M.eval_tokens(m.config)


class TestThinHead:
    @pytest.mark.parametrize("trial", range(60))
    def test_reach_is_what_a_search_over_query_values_finds(self, trial):
        """For random keys under no mask, a causal mask or a random one, the reference marks exactly
        the keys that some query value makes a row's strict favourite."""
        rng = np.random.default_rng(trial)
        T = int(rng.integers(2, 8))
        k = rng.normal(size=T)
        mask = [np.ones((T, T), bool), np.tril(np.ones((T, T), bool)), rng.random((T, T)) < 0.6][trial % 3]
        mask[:, 0] = True
        reach, _ = tw.thin_head(k, mask)
        np.testing.assert_array_equal(reach, _searched_reach(k, mask))
        assert (reach.sum(axis=1) <= 2).all()   # one key for q > 0, one for q < 0: never more

    def test_without_a_mask_no_width_1_head_is_a_previous_token_head(self):
        """Without a mask every query can prefer only the two extreme keys, so T - 1 >= 3 targets are out of reach."""
        rng = np.random.default_rng(0)
        for T in range(4, 9):
            for _ in range(50):
                assert tw.thin_head(rng.normal(size=T))[1] == 0

    def test_under_a_causal_mask_zigzag_keys_make_one(self):
        """Each key a new largest or new smallest, in turn: every query i >= 1 can prefer key i - 1."""
        causal = np.tril(np.ones((5, 5), bool))
        assert tw.thin_head([0.0, 1.0, -1.0, 2.0, -2.0], causal)[1] == 1
        assert tw.thin_head([0.0, 1.0, 2.0, 3.0, 4.0], causal)[1] == 0

    @pytest.mark.parametrize("s", SEEDS)
    def test_the_keys_are_the_models_own(self, s):
        """thin_head_keys is head k's column of K in the models' own forward pass, width 1."""
        m, tokens = _model(f"d8_h8_s{s}")
        K = M.forward(m.params, tokens[:3], m.config.n_heads)["K"]         # (3, 8, T, 1)
        for head in (1, 5, 8):
            for first in range(3):
                np.testing.assert_allclose(tw.thin_head_keys(s, head, first), K[first, head - 1, :, 0], atol=1e-12)

    def test_a_previous_token_head_of_a_shipped_model_zigzags(self):
        """Head 8 of d8_h8_s0 (previous-token score 0.98) can route every query to the key before it on
        the first evaluation sequence, and its keys are then alternately new highs and new lows."""
        k = tw.thin_head_keys(0, 8, 0)
        assert tw.thin_head(k, np.tril(np.ones((8, 8), bool)))[1] == 1
        assert tw.thin_head(k)[1] == 0
        records = [j for j in range(1, 7) if k[j] > k[:j].max() or k[j] < k[:j].min()]
        assert records == [1, 2, 3, 4, 5, 6]

    def test_the_public_case_is_the_students_head(self, course):
        """The third public case holds the keys of head hk of the student's d8_h8_s{s8} on sequence n;
        two students get other keys."""
        keys = []
        for seed in (3, 11):
            prepared, params = _student_case(course, "thin_head", "a head of your eight-head model, causal mask", seed)
            m, tokens = _model(f"d8_h8_s{params['s8']}")
            K = M.forward(m.params, tokens[params["n"]:params["n"] + 1], 8)["K"][0, params["hk"] - 1, :, 0]
            np.testing.assert_allclose(prepared.args[0], K, atol=1e-12)
            keys.append(prepared.args[0])
        assert not np.allclose(keys[0], keys[1])


class TestOneWideHead:
    @pytest.mark.parametrize("s", SEEDS)
    def test_the_split_is_the_index_head_scores(self, s):
        """On all 2048 evaluation sequences the split is the index's previous-token and first-token
        score of the single head: about 0.50 and 0.48."""
        index = {m["name"]: m for m in json.loads((MODELS / "index.json").read_text())["models"]}
        m, tokens = _model(f"d16_h1_s{s}")
        split, _ = tw.one_wide_head(M.forward(m.params, tokens, 1)["A"][:, 0], tokens, 8)
        entry = index[f"d16_h1_s{s}"]
        np.testing.assert_allclose(split, [entry["previous_score"][0], entry["first_score"][0]], atol=1e-4)
        assert 0.47 < split.min() and split.max() < 0.53

    @pytest.mark.parametrize("s", SEEDS)
    def test_every_sensible_statistic_gives_one_order(self, s):
        """What the prompt promises: on the students' sequences (0-255, 256-511) the order is the same by
        the mean margin won in contests, the win rate, the mean weight on key i - 1 by its token, and
        the mean weight on either key by its token."""
        m, tokens = _model(f"d16_h1_s{s}")
        orders = set()
        for first in (0, 256):
            t = tokens[first:first + 256]
            W = M.forward(m.params, t, 1)["A"][:, 0]
            _, order = tw.one_wide_head(W, t, 8)
            i = np.arange(2, 8)
            prev, first_w, t_prev = W[:, i, i - 1], W[:, i, 0], t[:, i - 1]
            t_first = np.broadcast_to(t[:, :1], t_prev.shape)
            differ = t_prev != t_first
            stats = [
                [np.concatenate([prev[differ & (t_prev == v)] > first_w[differ & (t_prev == v)],
                                 first_w[differ & (t_first == v)] > prev[differ & (t_first == v)]]).mean()
                 for v in range(8)],
                [prev[t_prev == v].mean() for v in range(8)],
                [np.concatenate([prev[t_prev == v], first_w[t_first == v]]).mean() for v in range(8)],
            ]
            orders.add(tuple(order.astype(int)))
            orders.update(tuple(np.argsort(-np.array(x), kind="stable")) for x in stats)
        assert len(orders) == 1, orders

    @pytest.mark.parametrize("s", SEEDS)
    def test_two_heads_of_the_same_width_split_the_task_instead(self, s):
        """Beside it, each head of the two-head model puts about 1 on one of the two keys and about 0 on the other."""
        m, tokens = _model(f"d16_h2_s{s}")
        A = M.forward(m.params, tokens[:256], 2)["A"]
        splits = sorted(tuple(np.round(tw.one_wide_head(A[:, h], tokens[:256], 8)[0])) for h in range(2))
        assert splits == [(0.0, 1.0), (1.0, 0.0)]

    @pytest.mark.parametrize("seed", [1, 7, 402, 500, 999])
    def test_the_made_up_head_is_ordered_by_its_ranking(self, seed):
        """The made-up head's order is the ranking drawn from its seed, by the reference's statistic,
        the win rate in contests and the mean weight on either key by its token."""
        W, tokens = tw.ranked_head_input(seed, "maps"), tw.ranked_head_input(seed, "tokens").astype(int)
        rank = np.random.default_rng([seed, 38]).permutation(5)
        _, order = tw.one_wide_head(W, tokens, 5)
        np.testing.assert_array_equal(order, np.argsort(-rank))
        np.testing.assert_allclose(W.sum(axis=-1), 1.0)
        i = np.arange(2, W.shape[-1])
        prev, first, t_prev = W[:, i, i - 1], W[:, i, 0], tokens[:, i - 1]
        t_first = np.broadcast_to(tokens[:, :1], t_prev.shape)
        differ = t_prev != t_first
        wins = [np.concatenate([(prev > first)[differ & (t_prev == v)], (first > prev)[differ & (t_first == v)]]).mean()
                for v in range(5)]
        either = [np.concatenate([prev[t_prev == v], first[t_first == v]]).mean() for v in range(5)]
        for statistic in (wins, either):
            np.testing.assert_array_equal(np.argsort(-np.array(statistic), kind="stable"), order)

    def test_the_public_case_is_the_students_single_head(self, course):
        """The public case holds the maps of the student's own d16_h1_s{s16} on sequences 0-255, recomputed
        with the models' own code."""
        prepared, params = _student_case(course, "one_wide_head", "your single-head model, evaluation sequences 0 to 255", 5)
        m, tokens = _model(f"d16_h1_s{params['s16']}")
        np.testing.assert_allclose(prepared.args[0], M.forward(m.params, tokens[:256], 1)["A"][:, 0], atol=1e-10)
        np.testing.assert_array_equal(prepared.args[1], tokens[:256])

    @pytest.mark.parametrize("model, head", [("d16_h1", 1), ("d16_h2", 1), ("d16_h2", 2)])
    def test_the_maps_are_the_references_one_sequence_at_a_time(self, model, head):
        """one_head_input computes every sequence's maps at once: each is the reference's
        multi_head_attention on that one sequence, for every head of a model of two heads too."""
        from exercises import reference as ref
        from exercises.model_problems import _evaluation_tokens, _student_model
        maps = tw.one_head_input(model, 2, "maps", head=head, first=40, count=24)
        heads = int(model.split("_h")[1])
        m = _student_model(f"{model}_s2", int("12"[:heads]))
        tokens = _evaluation_tokens()[40:64]
        T = tokens.shape[1]
        one_at_a_time = [ref.multi_head_attention(m.E[t] + m.P[:T], m.W_Q, m.W_K, m.W_V, m.W_O, m.num_heads,
                                                  ref.causal_mask(T))[1][head - 1] for t in tokens]
        assert maps.shape == (24, T, T)
        np.testing.assert_allclose(maps, one_at_a_time, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(tw.one_head_input(model, 2, "tokens", first=40, count=24), tokens)

    def test_bad_inputs_are_named(self):
        """A map that is not (N, T, T), or tokens outside the vocabulary, is refused with what was expected."""
        with pytest.raises(ValueError, match=r"weights must be \(N, T, T\)"):
            tw.one_wide_head(np.ones((2, 3, 4)), np.zeros((2, 3)), 4)
        with pytest.raises(ValueError, match="below vocab = 4"):
            tw.one_wide_head(np.ones((1, 3, 3)) / 3, np.array([[0, 1, 4]]), 4)
        with pytest.raises(ValueError, match=r"mask must be \(3, 3\)"):
            tw.thin_head([1.0, 2.0, 3.0], np.ones((2, 3), bool))
