"""The reference agrees with an independent loop implementation, with torch's multi-head attention
(recorded in tests/oracle/, and live where torch is installed) and with the maths' properties."""
from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grader.course.generators import draw_params, fill
from grader.grading.prepared import build_args

from .conftest import COURSE as ref


def loop_softmax(row):
    top = max(row)
    exps = [math.exp(x - top) if x != -math.inf else 0.0 for x in row]
    total = sum(exps)
    return [e / total for e in exps]


def loop_attention(Q, K, V, mask=None):
    """Plain Python loops over queries and keys: shares no code with the reference."""
    n, m, d_k = len(Q), len(K), len(Q[0])
    weights, out = [], []
    for i in range(n):
        scores = []
        for j in range(m):
            s = sum(Q[i][t] * K[j][t] for t in range(d_k)) / math.sqrt(d_k)
            scores.append(s if mask is None or mask[i][j] else -math.inf)
        w = loop_softmax(scores)
        weights.append(w)
        out.append([sum(w[j] * V[j][c] for j in range(m)) for c in range(len(V[0]))])
    return np.array(out), np.array(weights)


def loop_mha(X, W_Q, W_K, W_V, W_O, h, mask=None):
    """Per-head loop: slice each head's columns, attend, concatenate, project."""
    d_model = X.shape[1]
    d_k = d_model // h
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    outs, ws = [], []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        o, w = loop_attention(Q[:, cols].tolist(), K[:, cols].tolist(), V[:, cols].tolist(),
                              None if mask is None else mask.tolist())
        outs.append(o)
        ws.append(w)
    return np.concatenate(outs, axis=1) @ W_O, np.stack(ws)


def random_layer(rng, n, d_model):
    return rng.standard_normal((n, d_model)), [rng.standard_normal((d_model, d_model)) / math.sqrt(d_model) for _ in range(4)]


class TestMultiHeadAttention:
    @pytest.mark.parametrize("h,n,d_model", [(1, 3, 4), (2, 5, 8), (4, 6, 8), (8, 4, 16), (3, 7, 9)])
    @pytest.mark.parametrize("causal", [False, True])
    def test_matches_per_head_loop(self, h, n, d_model, causal):
        """Output and per-head weights equal an independent per-head loop implementation."""
        rng = np.random.default_rng(h * 100 + n)
        X, W = random_layer(rng, n, d_model)
        mask = ref.causal_mask(n) if causal else None
        out, weights = ref.multi_head_attention(X, *W, h, mask=mask)
        exp_out, exp_w = loop_mha(X, *W, h, mask=mask)
        np.testing.assert_allclose(out, exp_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights, exp_w, rtol=1e-10, atol=1e-12)

    def test_one_head_is_plain_attention(self):
        """With one head, MHA is scaled dot-product attention on the projections, then W_O."""
        rng = np.random.default_rng(1)
        X, (wq, wk, wv, wo) = random_layer(rng, 5, 6)
        out, weights = ref.multi_head_attention(X, wq, wk, wv, wo, 1)
        sdpa_out, sdpa_w = ref.scaled_dot_product_attention(X @ wq, X @ wk, X @ wv)
        np.testing.assert_allclose(out, sdpa_out @ wo, rtol=1e-12)
        np.testing.assert_allclose(weights[0], sdpa_w, rtol=1e-12)

    def test_rows_sum_to_one_and_causal_zeroes_future(self):
        """Every head's rows are distributions; a causal mask puts exactly zero on later keys."""
        rng = np.random.default_rng(2)
        X, W = random_layer(rng, 6, 8)
        _, weights = ref.multi_head_attention(X, *W, 4, mask=ref.causal_mask(6))
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
        assert np.all(weights[:, np.triu_indices(6, k=1)[0], np.triu_indices(6, k=1)[1]] == 0.0)

    def test_torch_agrees_when_installed(self):
        """torch's own multi-head attention (an independent implementation) gives the same output."""
        torch = pytest.importorskip("torch")
        rng = np.random.default_rng(3)
        n, d_model, h = 5, 8, 2
        X, (wq, wk, wv, wo) = random_layer(rng, n, d_model)
        mha = torch.nn.MultiheadAttention(d_model, h, bias=False, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([wq.T, wk.T, wv.T])))
            mha.out_proj.weight.copy_(torch.from_numpy(wo.T))
            x = torch.from_numpy(X)[None]
            out, w = mha(x, x, x, average_attn_weights=False)
        ref_out, ref_w = ref.multi_head_attention(X, wq, wk, wv, wo, h)
        np.testing.assert_allclose(out[0].numpy(), ref_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(w[0].numpy(), ref_w, rtol=1e-10, atol=1e-12)


ORACLE = Path(__file__).resolve().parent / "oracle" / "torch_mha.npz"
RECORDER = ORACLE.parent / "record_torch.py"
CLOSE = {"rtol": 1e-10, "atol": 1e-12}
TORCH_NAMES = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")  # nn.MultiheadAttention's


def recorded(path: Path = ORACLE) -> dict[str, np.ndarray]:
    """The arrays of a recording of record_torch.py: inputs, torch's answers and its version."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def reference_answers(r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The course reference's answers to the recorded inputs, keyed as torch's are in the file."""
    heads = dict(zip(r["cases"].tolist(), r["heads"].tolist()))
    W = [r[name] for name in ("W_Q", "W_K", "W_V", "W_O")]
    X, x_q, x_kv = r["X"], r["x_q"], r["x_kv"]
    found = {}
    for case, mask in (("self", None), ("causal", ref.causal_mask(len(X))), ("one_head", None)):
        found[f"{case}.output"], found[f"{case}.weights"] = ref.multi_head_attention(X, *W, heads[case], mask=mask)
    found["cross.output"], found["cross.averaged"] = ref.attention_layer(x_q, x_kv, *W, heads["cross"])
    found["cross.per_head"] = ref.attention_layer(x_q, x_kv, *W, heads["cross"], average_weights=False)[1]
    found["padded.output"], found["padded.weights"] = ref.padded_batch_attention(x_kv, *W, heads["padded"],
                                                                                 key_mask=r["key_mask"])
    course_W = ref.from_torch_layout(*(r[f"torch_layout.{name}"] for name in TORCH_NAMES))
    found["torch_layout.output"], found["torch_layout.weights"] = ref.biased_attention(
        X, *course_W, heads["torch_layout"], mask=ref.causal_mask(len(X)))
    found["sdpa.output"], _ = ref.scaled_dot_product_attention(X @ W[0], X @ W[1], X @ W[2], mask=ref.causal_mask(len(X)))
    return found


class TestRecordedTorch:
    """The reference against torch.nn.MultiheadAttention's answers recorded by tests/oracle/record_torch.py:
    runs everywhere, torch installed or not."""

    def test_the_recording_answers_every_case(self):
        """The file holds torch's answer to every case the reference is compared on, recorded by torch 2.x."""
        r = recorded()
        assert r["cases"].tolist() == ["self", "causal", "one_head", "cross", "padded", "torch_layout"]
        assert sorted(set(reference_answers(r)) - set(r)) == []
        assert str(r["torch_version"]).startswith("2.")

    @pytest.mark.parametrize("answer", sorted(reference_answers(recorded())))
    def test_the_reference_gives_torchs_recorded_answer(self, answer):
        """Each output and weight array of the reference equals torch's, in shape and value."""
        r = recorded()
        ours = reference_answers(r)[answer]
        assert ours.shape == r[answer].shape
        np.testing.assert_allclose(ours, r[answer], **CLOSE)

    def test_a_known_mistake_disagrees_with_the_recording(self):
        """The comparison tells a wrong layer apart: scaling by sqrt(d_model) misses torch's output."""
        r = recorded()
        W = [r[name] for name in ("W_Q", "W_K", "W_V", "W_O")]
        wrong, _ = ref.mha_scaled_by_sqrt_d_model(r["X"], *W, 2)
        assert not np.allclose(wrong, r["self.output"], **CLOSE)

    def test_the_course_reads_torchs_own_layout(self):
        """The parameters torch loaded under its own names, read by from_torch_layout and run with their
        biases, give torch's output: the layout is right, and the biases were not zero."""
        r = recorded()
        assert r["torch_layout.in_proj_weight"].shape == (18, 6) and r["torch_layout.out_proj.bias"].shape == (6,)
        assert np.abs(r["torch_layout.in_proj_bias"]).min() > 0 and np.abs(r["torch_layout.out_proj.bias"]).min() > 0
        W = ref.from_torch_layout(*(r[f"torch_layout.{name}"] for name in TORCH_NAMES))
        without_biases, _ = ref.multi_head_attention(r["X"], *W[:4], 3, mask=ref.causal_mask(len(r["X"])))
        assert not np.allclose(without_biases, r["torch_layout.output"], **CLOSE)

    @pytest.mark.parametrize("bug", ["torch_layout_not_transposed", "torch_layout_out_proj_not_transposed",
                                     "torch_layout_interleaved_rows"])
    def test_each_named_layout_mistake_misses_torchs_output(self, bug):
        """Each named mistake of from_torch_layout, run the same way, gives another output than torch."""
        r = recorded()
        W = getattr(ref, bug)(*(r[f"torch_layout.{name}"] for name in TORCH_NAMES))
        wrong, _ = ref.biased_attention(r["X"], *W, 3, mask=ref.causal_mask(len(r["X"])))
        assert not np.allclose(wrong, r["torch_layout.output"], **CLOSE)

    def test_torch_reads_a_boolean_mask_as_the_keys_to_block(self):
        """The course's causal mask given to nn.MultiheadAttention unchanged blocks the allowed keys: query 0
        reads only later keys and the last query, with every key blocked, gets nan (the quiz's claim)."""
        w = recorded()["misread.weights"]                                   # (h, L, L)
        assert np.isnan(w[:, -1]).all()
        assert np.all(w[:, 0, 0] == 0.0) and np.allclose(w[:, 0, 1:].sum(-1), 1.0)

    def test_torch_averages_the_heads_weights_by_default(self):
        """Without average_attn_weights=False, torch returns the mean of the heads' weights, (N, L, S)."""
        r = recorded()
        assert r["cross.averaged"].shape == (2, 3, 4) and r["cross.per_head"].shape == (2, 2, 3, 4)
        np.testing.assert_allclose(r["cross.averaged"], r["cross.per_head"].mean(axis=1), **CLOSE)

    def test_torch_records_the_same_answers_when_installed(self, tmp_path):
        """Recorded afresh by the installed torch (in its own process), every array equals the committed one."""
        if importlib.util.find_spec("torch") is None:
            pytest.skip("torch is not installed: the recording above still checked the reference")
        fresh = tmp_path / "torch_mha.npz"
        subprocess.run([sys.executable, str(RECORDER), "--out", str(fresh)], check=True, timeout=300,
                       capture_output=True)
        now, committed = recorded(fresh), recorded()
        assert sorted(now) == sorted(committed)
        for name in sorted(set(committed) - {"torch_version"}):
            if committed[name].dtype.kind == "f":
                np.testing.assert_allclose(now[name], committed[name], **CLOSE, err_msg=name)
            else:
                np.testing.assert_array_equal(now[name], committed[name], err_msg=name)


class TestFromTorchLayout:
    """The problem that reads nn.MultiheadAttention's parameters as the course's matrices."""

    def test_each_student_gets_a_layer_of_their_own_width(self, course):
        """The first public case's E is the student's param, shown in the prompt; students differ."""
        problem = course.problem("from_torch_layout")
        widths = set()
        for seed in range(40):
            e = draw_params(problem.params, problem.id, seed)["e"]
            in_w, in_b, out_w, out_b = build_args(problem, problem.cases[0], seed)
            assert (in_w.shape, in_b.shape, out_w.shape, out_b.shape) == ((3 * e, e), (3 * e,), (e, e), (e,))
            assert f"width E = {e}." in fill(problem.prompt, {"e": e})
            widths.add(e)
        assert len(widths) >= 3

    def test_the_prompt_asks_and_does_not_tell(self, course):
        """The prompt and hints give torch's layout, never the conversion: no transpose, no slice written out."""
        problem = course.problem("from_torch_layout")
        for text in (problem.prompt, *problem.hints):
            for phrase in (".T", "transpos", "[:E]", "np.split", "in_proj_weight[", "reshape"):
                assert phrase not in text, phrase

    def test_four_matrices_and_four_biases_of_width_e(self):
        """(3E, E), (3E,), (E, E), (E,) in: four (E, E) matrices and four (E,) biases out."""
        shapes = ((12, 4), (12,), (4, 4), (4,))
        assert [w.shape for w in ref.from_torch_layout(*map(np.zeros, shapes))] == [(4, 4)] * 4 + [(4,)] * 4

    @pytest.mark.parametrize("shapes", [((4, 12), (12,), (4, 4), (4,)), ((12, 4), (4,), (4, 4), (4,)),
                                        ((12, 4), (12,), (4, 4), (12,))])
    def test_a_wrong_shape_is_refused_naming_every_shape(self, shapes):
        """Arrays that are not (3E, E), (3E,), (E, E), (E,) are a ValueError that names what it got."""
        with pytest.raises(ValueError, match=r"expected in_proj_weight \(3E, E\).*for E = 4; got"):
            ref.from_torch_layout(*map(np.zeros, shapes))


@pytest.fixture(scope="module")
def torch():
    """torch, where installed: a test oracle only, never a dependency of the package."""
    return pytest.importorskip("torch")


class TestFromTorchLayoutLive:
    """from_torch_layout against a live torch, when it is installed: torch's own initialization and the
    mask conventions the quiz states."""

    @pytest.mark.parametrize("E,h", [(4, 1), (8, 2), (12, 4)])
    def test_a_layer_torch_initialized_runs_the_same_in_the_course(self, torch, E, h):
        """A layer as torch initializes it (biases then drawn, since torch starts them at zero), read by
        from_torch_layout, gives torch's output and per-head weights through the course's layer."""
        torch.manual_seed(E * 10 + h)
        mha = torch.nn.MultiheadAttention(E, h, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
            X = np.random.default_rng(E).standard_normal((5, E))
            x = torch.from_numpy(X)[None]
            allowed = ref.causal_mask(5)
            out, weights = mha(x, x, x, attn_mask=torch.from_numpy(~allowed), average_attn_weights=False)
        state = mha.state_dict()
        W = ref.from_torch_layout(*(state[name].numpy() for name in TORCH_NAMES))
        ours, our_weights = ref.biased_attention(X, *W, h, mask=allowed)
        np.testing.assert_allclose(ours, out[0].numpy(), **CLOSE)
        np.testing.assert_allclose(our_weights, weights[0].numpy(), **CLOSE)

    def test_masks_are_read_as_the_quiz_says(self, torch):
        """nn.MultiheadAttention: True in attn_mask or key_padding_mask blocks a key; F.scaled_dot_product_attention:
        True lets it be read, as in the course."""
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
        x = torch.randn(1, 3, 4, dtype=torch.float64)
        key0 = torch.tensor([[True, False, False]] * 3)
        with torch.no_grad():
            _, blocked = mha(x, x, x, attn_mask=key0, average_attn_weights=False)
            _, padded = mha(x, x, x, key_padding_mask=key0[:1], average_attn_weights=False)
            read = torch.nn.functional.scaled_dot_product_attention(x[0], x[0], torch.eye(3, dtype=torch.float64),
                                                                    attn_mask=key0)
        assert float(blocked[..., 0].abs().max()) == 0.0 and float(padded[..., 0].abs().max()) == 0.0
        np.testing.assert_allclose(read.numpy(), np.tile([1.0, 0.0, 0.0], (3, 1)), **CLOSE)


class TestSoftmax:
    def test_stable_for_huge_scores(self):
        """Scores of +-1e4 give finite weights that sum to 1."""
        w = ref.softmax(np.array([[1e4, -1e4, 1e4 - 1], [-1e4, -1e4, -1e4]]))
        assert np.isfinite(w).all()
        np.testing.assert_allclose(w.sum(-1), 1.0)
        np.testing.assert_allclose(w[1], [1 / 3] * 3)

    def test_counts_one_normalization_per_row(self):
        """Tracing records one normalization per row of the last axis."""
        with ref.tracing() as trace:
            ref.softmax(np.zeros((3, 4, 5)))
        assert trace.normalizations == 12


class TestHeads:
    @pytest.mark.parametrize("h", [1, 2, 3, 6])
    def test_split_then_merge_is_identity(self, h):
        """merge_heads(split_heads(X)) == X, and head i holds columns i*d_k:(i+1)*d_k."""
        X = np.arange(24.0).reshape(4, 6)
        H = ref.split_heads(X, h)
        assert H.shape == (h, 4, 6 // h)
        np.testing.assert_array_equal(H[h - 1], X[:, (h - 1) * (6 // h):])
        np.testing.assert_array_equal(ref.merge_heads(H), X)

    def test_split_rejects_indivisible_width(self):
        """A width that heads do not divide is a ValueError naming both numbers."""
        with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
            ref.split_heads(np.zeros((2, 10)), 3)


class TestObservedAnswers:
    def test_width_128_head_forms_one_distribution(self):
        """The lesson's question: one head, value width 128, one query -> 1 distribution."""
        assert ref.count_routing_distributions(1, 128) == 1

    @pytest.mark.parametrize("h,d_v,n", [(2, 4, 1), (8, 64, 10), (12, 8, 3)])
    def test_count_is_heads_times_queries_not_width(self, h, d_v, n):
        """The traced count depends on heads and queries, never on d_v."""
        assert ref.count_routing_distributions(h, d_v, n) == h * n
        assert ref.count_routing_distributions(h, 2 * d_v, n) == ref.count_routing_distributions(h, d_v, n)

    @staticmethod
    def full_size_count(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1,
                        causal=False, num_kv_heads=None):
        """The routing count as it was first written: every layer run at its full widths, rows traced."""
        m = num_queries if num_keys is None else num_keys
        width = d_v if d_k is None else d_k
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if kv_heads < 1 or num_heads % kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={kv_heads}")
        rng = np.random.default_rng(0)
        mask = ref.causal_mask(num_queries, m) if causal else None
        attend = sys.modules[ref.count_routing_distributions.__module__]._attend  # the reference's own
        with ref.tracing() as trace:
            for _ in range(num_layers):
                q = rng.standard_normal((batch, num_heads, num_queries, width))
                k = np.repeat(rng.standard_normal((batch, kv_heads, m, width)), num_heads // kv_heads, axis=1)
                v = np.repeat(rng.standard_normal((batch, kv_heads, m, d_v)), num_heads // kv_heads, axis=1)
                attend(q, k, v, mask)
        return trace.normalizations

    @staticmethod
    def outcome(fn, *args, **kwargs):
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            return type(exc).__name__
        return type(value).__name__, value

    def test_the_narrow_count_equals_the_full_size_one(self):
        """The reference counts one layer with widths of at most 1 (widths add no rows; layers repeat the
        first one's shapes): on every routing case of the course, over several seeds, and on edge inputs
        (no layer, no keys, widths 0 or negative, causal cross-attention, bad groups), its answer, or
        the error it raises, is the full-size traced count's."""
        from grader.course.loader import load_course
        from grader.grading.prepared import build_args

        from .conftest import EXERCISES
        problem = load_course(EXERCISES).problem("count_routing_distributions")
        calls = [build_args(problem, case, seed) for seed in (0, 1, 7, 12345) for case in problem.cases]
        calls += [(2, 8, 3, None, None, 0), (2, 8, 3, 0), (2, 0, 3), (2, 8, 3, None, 0), (2, -1, 3),
                  (2, 8, 3, None, -2), (2, 8, 4, 2, 1, 2, 3, True), (2, 8, 4, 6, 5, 3, 2, True, 1), (3, 8, 2, None, None,
                  1, 1, False, 2), (1, 1, 1), (4, 1, 1, 1, 1, 1, 0), (2, 8, 0), (2, 8, 3, 0, None, 1, 1, True),
                  (2, 8, 3, None, None, -1), (2, 8, 3, None, np.int64(5), np.int64(2)), (2, 8, 3, None, None, 2.5)]
        for args in calls:
            assert self.outcome(ref.count_routing_distributions, *args) == self.outcome(self.full_size_count, *args), args

    def test_predicted_shapes_are_observed(self):
        """predict_shapes reports what a run of the layer produced."""
        assert ref.predict_shapes(4, 768, 12) == {
            "q_head": (12, 4, 64), "k_head": (12, 4, 64), "v_head": (12, 4, 64), "scores": (12, 4, 4),
            "weights": (12, 4, 4), "head_output": (12, 4, 64), "concat": (4, 768), "output": (4, 768),
            "returned_weights": (4, 4)}

    def test_predicted_shapes_of_batched_cross_attention(self):
        """L = 3 queries, S = 7 keys, N = 2, h = 4, d_k = 5, d_v = 6: scores L x S, values d_v wide, batch first."""
        shapes = ref.predict_shapes(3, 20, 4, src_len=7, batch=2, d_v=6, average_weights=False)
        assert shapes == {"q_head": (2, 4, 3, 5), "k_head": (2, 4, 7, 5), "v_head": (2, 4, 7, 6),
                          "scores": (2, 4, 3, 7), "weights": (2, 4, 3, 7), "head_output": (2, 4, 3, 6),
                          "concat": (2, 3, 24), "output": (2, 3, 20), "returned_weights": (2, 4, 3, 7)}
        assert ref.predict_shapes(3, 20, 4, src_len=7, batch=2, d_v=6)["returned_weights"] == (2, 3, 7)
        assert ref.predict_shapes(3, 20, 4, src_len=7, batch=2, d_v=6)["concat"] == (2, 3, 24)

    @pytest.mark.parametrize("h", [1, 2, 8, 16])
    def test_parameter_count_does_not_grow_with_heads(self, h):
        """Splitting 512 into h heads re-partitions the same 4*d^2 + 4*d parameters."""
        assert ref.parameter_count(512, h) == 4 * 512 * 512 + 4 * 512
        assert ref.parameter_count(512, h, bias=False) == 4 * 512 * 512

    def test_worked_example_reading(self):
        """[0.8, 0.2] over v1 = [1,0,10,0], v2 = [0,1,0,20] reads [0.8, 0.2, 8, 4]."""
        np.testing.assert_allclose(ref.attention_reading([0.8, 0.2], [[1, 0, 10, 0], [0, 1, 0, 20]]),
                                   [0.8, 0.2, 8, 4], rtol=0, atol=1e-15)

    @pytest.mark.parametrize("designer,target", [(ref.previous_token_head, "previous"), (ref.sink_head, "sink")])
    @pytest.mark.parametrize("T", [2, 5, 16, 64])
    def test_designed_heads_meet_the_threshold(self, designer, target, T):
        """The reference's designed heads put >= 0.9 on their target position for every query."""
        w = ref.head_pattern_weights(T, *designer(T))
        rows = np.arange(1, T) if target == "previous" else np.arange(T)
        cols = rows - 1 if target == "previous" else np.zeros_like(rows)
        assert (w[rows, cols] >= 0.9).all()
