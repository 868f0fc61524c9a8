"""Named mistakes: one buggy submission per misconception, each told which mistake it made."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace

import pytest

from grader.course.model import Mistake
from grader.grading.checks import check
from grader.grading.diagnosis import GENERIC_MISTAKES
from grader.grading.grade import grade, judge
from grader.grading.prepared import prepare
from grader.grading.results import CaseStatus
from grader.sandbox.session import CaseRun, RunStatus

from .conftest import COURSE as reference, solution_source


@dataclass(frozen=True)
class Bug:
    problem: str
    mistake: str
    source: str  # a buggy definition that replaces the model answer's function of the same name


_SDPA = "def scaled_dot_product_attention(Q, K, V, mask=None):"
_MHA = "def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):"
_HEADS = f"""
        {_MHA}
            Q, K, V = (split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))
            out, weights = zip(*(scaled_dot_product_attention(q, k, v, mask) for q, k, v in zip(Q, K, V)))
            concat = merge_heads(np.stack(out))"""

BUGS = [
    Bug("softmax", "softmax-wrong-axis", """
        def softmax(scores):
            e = np.exp(scores - scores.max(axis=0, keepdims=True))
            return e / e.sum(axis=0, keepdims=True)
    """),
    Bug("softmax", "softmax-overflow", """
        def softmax(scores):
            e = np.exp(scores)
            return e / e.sum(axis=-1, keepdims=True)
    """),
    Bug("softmax", "softmax-whole-array-sum", """
        def softmax(scores):
            e = np.exp(scores - np.max(scores))
            return e / np.sum(e)
    """),
    Bug("scaled_dot_product_attention", "attention-no-scale", f"""
        {_SDPA}
            scores = Q @ K.T
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-scaled-by-d-k", f"""
        {_SDPA}
            scores = Q @ K.T / Q.shape[1]
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-scaled-by-d-v", f"""
        {_SDPA}
            scores = Q @ K.T / math.sqrt(V.shape[1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-softmax-over-queries", f"""
        {_SDPA}
            scores = Q @ K.T / math.sqrt(Q.shape[1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores.T).T
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-mask-after-softmax", f"""
        {_SDPA}
            weights = softmax(Q @ K.T / math.sqrt(Q.shape[1]))
            if mask is not None:
                weights = weights * mask
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-mask-inverted", f"""
        {_SDPA}
            scores = Q @ K.T / math.sqrt(Q.shape[1])
            if mask is not None:
                scores[mask] = -1e9
            weights = softmax(scores)
            return weights @ V, weights
    """),
    Bug("scaled_dot_product_attention", "attention-mask-ignored", f"""
        {_SDPA}
            weights = softmax(Q @ K.T / math.sqrt(Q.shape[1]))
            return weights @ V, weights
    """),
    Bug("split_heads", "split-without-transpose", """
        def split_heads(X, num_heads):
            n, d_model = X.shape
            if d_model % num_heads:
                raise ValueError("not divisible")
            return X.reshape(num_heads, n, d_model // num_heads)
    """),
    Bug("merge_heads", "merge-without-transpose", """
        def merge_heads(H):
            h, n, d_head = H.shape
            return H.reshape(n, h * d_head)
    """),
    Bug("multi_head_attention", "mha-scaled-by-d-model", f"""
        {_MHA}
            Q, K, V = (split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))
            scores = Q @ K.transpose(0, 2, 1) / math.sqrt(X.shape[1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return merge_heads(weights @ V) @ W_O, weights
    """),
    Bug("multi_head_attention", "mha-no-output-projection", _HEADS + """
            return concat, np.stack(weights)
    """),
    Bug("multi_head_attention", "mha-weights-averaged", _HEADS + """
            return concat @ W_O, np.mean(weights, axis=0)
    """),
    Bug("multi_head_attention", "mha-one-wide-head", f"""
        {_MHA}
            out, weights = scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V, mask)
            return out @ W_O, weights
    """),
    Bug("parameter_count", "params-grow-with-heads", """
        def parameter_count(d_model, num_heads, bias=True):
            per_matrix = d_model * d_model + (d_model if bias else 0)
            return num_heads * 3 * per_matrix + per_matrix
    """),
    Bug("parameter_count", "params-no-output-projection", """
        def parameter_count(d_model, num_heads, bias=True):
            return 3 * (d_model * d_model + (d_model if bias else 0))
    """),
    Bug("parameter_count", "params-no-biases", """
        def parameter_count(d_model, num_heads, bias=True):
            return 4 * d_model * d_model
    """),
    Bug("previous_token_head", "previous-head-attends-to-itself", """
        def previous_token_head(seq_len):
            return 50.0 * np.eye(seq_len), np.eye(seq_len)
    """),
    Bug("previous_token_head", "previous-head-too-soft", """
        def previous_token_head(seq_len):
            return np.eye(seq_len), np.eye(seq_len, k=1)
    """),
    Bug("sink_head", "sink-head-attends-to-itself", """
        def sink_head(seq_len):
            return 50.0 * np.eye(seq_len), np.eye(seq_len)
    """),
    Bug("sink_head", "sink-head-too-soft", """
        def sink_head(seq_len):
            W_Q, W_K = np.zeros((seq_len, seq_len)), np.zeros((seq_len, seq_len))
            W_Q[:, 0], W_K[0, 0] = 2.0, 1.0
            return W_Q, W_K
    """),
    # --- bugs found in real submissions ---
    Bug("softmax", "softmax-global-max", """
        def softmax(scores):
            x = np.asarray(scores, dtype=float)
            e = np.exp(x - x.max())
            return e / e.sum(axis=-1, keepdims=True)
    """),
    Bug("multi_head_attention", "mha-split-without-transpose", f"""
        {_MHA}
            n, d_model = X.shape
            d_k = d_model // num_heads
            Q, K, V = ((X @ W).reshape(num_heads, n, d_k) for W in (W_Q, W_K, W_V))
            scores = Q @ K.transpose(0, 2, 1) / math.sqrt(d_k)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return merge_heads(weights @ V) @ W_O, weights
    """),
    Bug("multi_head_attention", "mha-softmax-shared-across-heads", f"""
        {_MHA}
            Q, K, V = (split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))
            scores = Q @ K.transpose(0, 2, 1) / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            e = np.exp(scores - scores.max(axis=(0, 2), keepdims=True))
            weights = e / e.sum(axis=(0, 2), keepdims=True)   # one budget per query, over every head
            return merge_heads(weights @ V) @ W_O, weights
    """),
    Bug("previous_token_head", "previous-head-attends-to-next", """
        def previous_token_head(seq_len):
            return 50.0 * np.eye(seq_len), np.eye(seq_len, k=-1)
    """),
    Bug("split_heads", "assert-instead-of-raise", """
        def split_heads(X, num_heads):
            n, d_model = X.shape
            assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
            return X.reshape(n, num_heads, d_model // num_heads).transpose(1, 0, 2)
    """),
    Bug("softmax", "float16-answer", """
        def softmax(scores):
            x = np.asarray(scores, dtype=np.float64)
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return (e / e.sum(axis=-1, keepdims=True)).astype(np.float16)
    """),
    Bug("multi_head_attention", "mha-softmax-over-queries", """
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
            n, d_model = X.shape
            d_k = d_model // num_heads
            Q = (X @ W_Q).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            K = (X @ W_K).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            V = (X @ W_V).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            scores = Q @ K.transpose(0, 2, 1) / np.sqrt(d_k)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))   # inline, over the queries
            weights = weights / weights.sum(axis=1, keepdims=True)
            heads = weights @ V
            return heads.transpose(1, 0, 2).reshape(n, d_model) @ W_O, weights
    """),
    Bug("multi_head_attention", "mha-one-wide-head-in-every-head", """
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
            n, d_model = X.shape
            Q, K, V = X @ W_Q, X @ W_K, X @ W_V
            s = Q @ K.T / np.sqrt(d_model)
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            w = np.exp(s - s.max(axis=-1, keepdims=True))
            w /= w.sum(axis=-1, keepdims=True)
            return (w @ V) @ W_O, np.repeat(w[None], num_heads, axis=0)   # one pattern per head slot
    """),
    Bug("multi_head_attention", "mha-average-in-every-head", """
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
            n, d_model = X.shape
            d_k = d_model // num_heads
            Q = (X @ W_Q).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            K = (X @ W_K).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            V = (X @ W_V).reshape(n, num_heads, d_k).transpose(1, 0, 2)
            s = Q @ K.transpose(0, 2, 1) / np.sqrt(d_k)
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            w = np.exp(s - s.max(axis=-1, keepdims=True))
            w /= w.sum(axis=-1, keepdims=True)
            out = (w @ V).transpose(1, 0, 2).reshape(n, d_model) @ W_O
            return out, np.broadcast_to(w.mean(axis=0), w.shape).copy()   # the heads' mean, per head
    """),
    Bug("scaled_dot_product_attention", "mask-tested-with-if", """
        def scaled_dot_product_attention(Q, K, V, mask=None):
            scores = Q @ K.T / np.sqrt(K.shape[-1])
            if mask:
                scores = np.where(mask, scores, -1e9)
            w = np.exp(scores - scores.max(axis=-1, keepdims=True))
            w = w / w.sum(axis=-1, keepdims=True)
            return w @ V, w
    """),
]


# --- the flagship problems and the several-heads problems (reading, counting, shapes, heads) --

_COUNT = "def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, " \
         "num_layers=1, batch=1, causal=False, num_kv_heads=None):"
_READ = "def multi_head_reading(weights, values, W_O):"
_CONTRIB = """
        def head_contributions(weights, values, W_O):
            z = np.asarray(weights) @ np.asarray(values)
            h = z.shape[0]
            output = merge_heads(z) @ W_O"""
_SHAPE_AXES = dict(S="seq_len if src_len is None else src_len", d_v="d_k if d_v is None else d_v",
                   q="(*N, h, L, d_k)", k="(*N, h, S, d_k)", v="(*N, h, S, d_v)", scores="(*N, h, L, S)",
                   out="(*N, h, L, d_v)", ret="(*N, L, S) if average_weights else (*N, h, L, S)")


def _shapes_bug(**wrong: str) -> str:
    """predict_shapes written out axis by axis, with some of the expressions replaced."""
    axes = {**_SHAPE_AXES, **wrong}
    return f"""
        def predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
            if d_model % num_heads:
                raise ValueError("d_model is not divisible by num_heads")
            h, L, d_k = num_heads, seq_len, d_model // num_heads
            S = {axes["S"]}
            d_v = {axes["d_v"]}
            N = () if batch is None else (batch,)
            return {{"q_head": {axes["q"]}, "k_head": {axes["k"]}, "v_head": {axes["v"]},
                    "scores": {axes["scores"]}, "weights": {axes["scores"]}, "head_output": {axes["out"]},
                    "concat": (*N, L, h * d_v), "output": (*N, L, d_model), "returned_weights": {axes["ret"]}}}
    """


FLAGSHIP_BUGS = [
    Bug("attention_reading", "reading-transposed", """
        def attention_reading(weights, values):
            return np.asarray(values).T @ np.asarray(weights).T
    """),
    Bug("attention_reading", "reading-normalized-per-coordinate", """
        def attention_reading(weights, values):
            values = np.asarray(values)
            return np.asarray(weights) @ values / values.sum(axis=0)
    """),
    Bug("multi_head_reading", "reading-heads-averaged", f"""
        {_READ}
            shared = np.mean(weights, axis=0)             # one row for every head
            readings = np.stack([shared @ v for v in values])
            concat = np.concatenate(list(readings), axis=-1)
            return readings, concat, concat @ W_O
    """),
    Bug("multi_head_reading", "reading-concat-interleaved", f"""
        {_READ}
            readings = np.stack([w @ v for w, v in zip(weights, values)])
            concat = np.stack(list(readings), axis=-1)    # (..., d_v, h): coordinate by coordinate
            concat = concat.reshape(concat.shape[:-2] + (-1,))
            return readings, concat, concat @ W_O
    """),
    Bug("multi_head_reading", "reading-no-output-projection", f"""
        {_READ}
            readings = np.stack([w @ v for w, v in zip(weights, values)])
            concat = np.concatenate(list(readings), axis=-1)
            return readings, concat, concat
    """),
    Bug("head_contributions", "contribution-own-slice", _CONTRIB + """
            width = output.shape[-1] // h
            contributions = np.zeros((h,) + output.shape)
            for i in range(h):
                contributions[i][:, i * width:(i + 1) * width] = output[:, i * width:(i + 1) * width]
            return contributions, output - contributions
    """),
    Bug("head_contributions", "contribution-equal-split", _CONTRIB + """
            contributions = np.stack([output / h] * h)
            return contributions, output - contributions
    """),
    Bug("head_contributions", "contribution-heads-averaged", """
        def head_contributions(weights, values, W_O):
            shared = np.asarray(weights).mean(axis=0)        # one row per query, for every head
            z = np.stack([shared @ v for v in np.asarray(values)])
            h = z.shape[0]
            contributions = z @ np.asarray(W_O).reshape(h, z.shape[-1], -1)
            return contributions, contributions.sum(axis=0) - contributions
    """),
    Bug("head_contributions", "ablation-rescaled", _CONTRIB + """
            contributions = z @ np.asarray(W_O).reshape(h, z.shape[-1], -1)
            return contributions, (output - contributions) * h / (h - 1)
    """),
    Bug("count_routing_distributions", "counts-value-width", f"""
        {_COUNT}
            return num_layers * batch * num_heads * num_queries * d_v
    """),
    Bug("count_routing_distributions", "counts-key-width", f"""
        {_COUNT}
            return num_layers * batch * num_heads * num_queries * (d_v if d_k is None else d_k)
    """),
    Bug("count_routing_distributions", "counts-per-key", f"""
        {_COUNT}
            return num_layers * batch * num_heads * (num_queries if num_keys is None else num_keys)
    """),
    Bug("count_routing_distributions", "counts-weights", f"""
        {_COUNT}
            m = num_queries if num_keys is None else num_keys
            allowed = np.tri(num_queries, m).sum() if causal else num_queries * m
            return int(num_layers * batch * num_heads * allowed)
    """),
    Bug("count_routing_distributions", "ignores-queries", f"""
        {_COUNT}
            return num_layers * batch * num_heads
    """),
    Bug("count_routing_distributions", "ignores-layers", f"""
        {_COUNT}
            return batch * num_heads * num_queries
    """),
    Bug("count_routing_distributions", "ignores-batch", f"""
        {_COUNT}
            return num_layers * num_heads * num_queries
    """),
    Bug("count_routing_distributions", "counts-kv-heads", f"""
        {_COUNT}
            heads = num_heads if num_kv_heads is None else num_kv_heads
            return num_layers * batch * heads * num_queries
    """),
    Bug("predict_shapes", "shapes-head-output-full-width", _shapes_bug(out="(*N, h, L, d_model)")),
    Bug("predict_shapes", "shapes-scores-like-queries",
        _shapes_bug(scores="(*N, h, L, d_k)", ret="(*N, L, d_k) if average_weights else (*N, h, L, d_k)")),
    Bug("predict_shapes", "shapes-missing-head-axis",
        _shapes_bug(q="(*N, L, d_k)", k="(*N, S, d_k)", v="(*N, S, d_v)", scores="(*N, L, S)", out="(*N, L, d_v)",
                    ret="(*N, L, S)")),
    Bug("predict_shapes", "shapes-keys-from-queries", _shapes_bug(S="seq_len")),
    Bug("predict_shapes", "shapes-value-width-from-keys", _shapes_bug(d_v="d_k")),
    Bug("predict_shapes", "shapes-weights-layout-swapped",
        _shapes_bug(ret="(*N, h, L, S) if average_weights else (*N, L, S)")),
    Bug("two_head_layer", "pair-heads-swapped", """
        def two_head_layer(seq_len):
            (pq, pk), (sq, sk) = previous_token_head(seq_len), sink_head(seq_len)
            return np.hstack([sq, pq]), np.hstack([sk, pk])
    """),
    Bug("two_head_layer", "pair-heads-same-pattern", """
        def two_head_layer(seq_len):
            pq, pk = previous_token_head(seq_len)
            return np.hstack([pq, pq]), np.hstack([pk, pk])
    """),
    Bug("two_head_layer", "pair-one-head-does-both", """
        def two_head_layer(seq_len):
            (pq, pk), (sq, sk) = previous_token_head(seq_len), sink_head(seq_len)
            blank = np.zeros((seq_len, seq_len))
            return np.hstack([pq + sq, blank]), np.hstack([pk + sk, blank])   # both patterns in head 0
    """),
]
BUGS += FLAGSHIP_BUGS

# --- a padded batch, and the evidence that one head cannot hold both designs -----------------------

_PADDED = """
        def padded_batch_attention(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
            N, L, d_model = X.shape
            d_k = d_model // num_heads
            q, k, v = ((X @ W).reshape(N, L, num_heads, d_k).transpose(0, 2, 1, 3) for W in (W_Q, W_K, W_V))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)
            keep = np.ones((N, L), bool) if key_mask is None else np.asarray(key_mask)"""
_ZERO_EMPTY_ROWS = """
            top = np.where(np.isfinite(scores.max(-1, keepdims=True)), scores.max(-1, keepdims=True), 0.0)
            e = np.exp(scores - top)
            weights = np.divide(e, e.sum(-1, keepdims=True), out=np.zeros_like(e), where=e.sum(-1, keepdims=True) > 0)
            return (weights @ v).transpose(0, 2, 1, 3).reshape(N, L, d_model) @ W_O, weights
"""
_BOTH = """
        def one_head_both_designs(seq_len, max_scale):
            i, j = np.indices((seq_len, seq_len))
            rows = np.arange(2, seq_len)
            p = s = max_scale"""

REASONING_BUGS = [
    Bug("padded_batch_attention", "padding-nan-row", _PADDED + """
            scores = np.where(keep[:, None, None, :], scores, -np.inf)
            weights = softmax(scores)   # a row of -inf: nan
            return (weights @ v).transpose(0, 2, 1, 3).reshape(N, L, d_model) @ W_O, weights
    """),
    Bug("padded_batch_attention", "padding-mask-inverted", _PADDED + """
            scores = np.where(keep[:, None, None, :], -np.inf, scores)   # True read as padding""" + _ZERO_EMPTY_ROWS),
    Bug("padded_batch_attention", "padding-mask-on-queries", _PADDED + """
            scores = np.where(keep[:, None, :, None], scores, -np.inf)   # along the query axis""" + _ZERO_EMPTY_ROWS),
    Bug("one_head_both_designs", "budget-divided-by-sqrt", _BOTH + """
            scores = np.where(j <= i, (p * (j == i - 1) + s * (j == 0)) / math.sqrt(seq_len), -np.inf)
            w = softmax(scores)
            return float(np.minimum(w[rows, rows - 1], w[rows, 0]).min())
    """),
    Bug("one_head_both_designs", "budget-best-query", _BOTH + """
            w = softmax(np.where(j <= i, p * (j == i - 1) + s * (j == 0), -np.inf))
            return float(np.minimum(w[rows, rows - 1], w[rows, 0]).max())
    """),
    Bug("one_head_both_designs", "budget-the-limit", """
        def one_head_both_designs(seq_len, max_scale):
            return 0.5      # where the bound goes as the scales grow, whatever the cap
    """),
]
BUGS += REASONING_BUGS

_SCORES = "def head_scores(weights):"
_ABLATE = """
        def ablation_deltas(X, readings, W_O, W_U, tokens):
            N, h, T, d_k = readings.shape
            tokens = tokens.astype(int)

            def loss(scale, W_O=W_O, parts=(0, 1)):
                concat = (readings * scale[None, :, None, None]).transpose(0, 2, 1, 3).reshape(N, T, h * d_k)
                logits = (X + concat @ W_O) @ W_U
                V = logits.shape[-1] // 2
                total = 0.0
                for part, target in ((0, tokens[:, :-1]), (1, np.repeat(tokens[:, :1], T - 1, axis=1))):
                    if part in parts:
                        z = logits[:, 1:, part * V:(part + 1) * V]
                        log_p = z - z.max(axis=-1, keepdims=True)
                        log_p = log_p - np.log(np.exp(log_p).sum(axis=-1, keepdims=True))
                        total -= np.take_along_axis(log_p, target[..., None], axis=-1).mean()
                return total

            def without(k, kept=1.0):
                scale = np.full(h, kept)
                scale[k] = 0.0
                return scale"""
_RUN = "def run_model(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):"
# The trained-model problems (exercises/model_problems.py): one bug per named mistake.
MODEL_BUGS = [
    Bug("run_model", "run-model-no-mask", f"""
        {_RUN}
            X = E[tokens.astype(int)] + P[:len(tokens)]
            out, weights = multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads)
            return weights, (X + out) @ W_U
    """),
    Bug("run_model", "run-model-no-positions", f"""
        {_RUN}
            X = E[tokens.astype(int)]
            out, weights = multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, np.tri(len(tokens), dtype=bool))
            return weights, (X + out) @ W_U
    """),
    Bug("run_model", "run-model-no-residual", f"""
        {_RUN}
            X = E[tokens.astype(int)] + P[:len(tokens)]
            out, weights = multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, np.tri(len(tokens), dtype=bool))
            return weights, out @ W_U
    """),
    Bug("head_scores", "scores-from-query-1", f"""
        {_SCORES}
            i = np.arange(1, weights.shape[-1])
            return weights[:, :, i, i - 1].mean(axis=(0, 2)), weights[:, :, i, 0].mean(axis=(0, 2))
    """),
    Bug("head_scores", "scores-self-not-previous", f"""
        {_SCORES}
            i = np.arange(2, weights.shape[-1])
            return weights[:, :, i, i].mean(axis=(0, 2)), weights[:, :, i, 0].mean(axis=(0, 2))
    """),
    Bug("head_scores", "scores-swapped", f"""
        {_SCORES}
            i = np.arange(2, weights.shape[-1])
            return weights[:, :, i, 0].mean(axis=(0, 2)), weights[:, :, i, i - 1].mean(axis=(0, 2))
    """),
    Bug("ablation_deltas", "ablation-loss-not-change", _ABLATE + """
            return np.array([loss(without(k)) for k in range(h)])
    """),
    Bug("ablation_deltas", "ablation-output-columns", _ABLATE + """
            deltas = []
            for k in range(h):
                cut = W_O.copy()
                cut[:, k * d_k:(k + 1) * d_k] = 0.0   # head k's slice of the output
                deltas.append(loss(np.ones(h), W_O=cut) - loss(np.ones(h)))
            return np.array(deltas)
    """),
    Bug("ablation_deltas", "ablation-rescaled-heads", _ABLATE + """
            return np.array([loss(without(k, kept=h / (h - 1))) - loss(np.ones(h)) for k in range(h)])
    """),
    Bug("ablation_deltas", "ablation-previous-only", _ABLATE + """
            return np.array([loss(without(k), parts=(0,)) - loss(np.ones(h), parts=(0,)) for k in range(h)])
    """),
]
BUGS += MODEL_BUGS
# --- PyTorch's layout read as the course's matrices -----------------------------------------------

_TORCH = """
        def from_torch_layout(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
            E = out_proj_weight.shape[0]"""

BRIDGE_BUGS = [
    Bug("from_torch_layout", "torch-layout-not-transposed", _TORCH + """
            W_Q, W_K, W_V = np.split(in_proj_weight, 3)          # blocks as stored: x A, not x A^T
            b_Q, b_K, b_V = np.split(in_proj_bias, 3)
            return W_Q, W_K, W_V, out_proj_weight, b_Q, b_K, b_V, out_proj_bias
    """),
    Bug("from_torch_layout", "torch-layout-out-proj-not-transposed", _TORCH + """
            W_Q, W_K, W_V = (in_proj_weight[i * E:(i + 1) * E].T for i in range(3))
            b_Q, b_K, b_V = np.split(in_proj_bias, 3)
            return W_Q, W_K, W_V, out_proj_weight, b_Q, b_K, b_V, out_proj_bias
    """),
    Bug("from_torch_layout", "torch-layout-interleaved-rows", _TORCH + """
            W_Q, W_K, W_V = (in_proj_weight[i::3].T for i in range(3))   # every third row
            b_Q, b_K, b_V = (in_proj_bias[i::3] for i in range(3))
            return W_Q, W_K, W_V, out_proj_weight.T, b_Q, b_K, b_V, out_proj_bias
    """),
]
BUGS += BRIDGE_BUGS


# The thin-head and one-wide-head problems (exercises/thin_wide.py): one bug per named mistake.
_THIN = """
        def thin_head(k, mask=None):
            T = len(k)
            allowed = np.ones((T, T), dtype=bool) if mask is None else mask
            reach = np.zeros((T, T))
            for i in range(T):
                keys = np.flatnonzero(allowed[i])"""
_WIDE = """
        def one_wide_head(weights, tokens, vocab):
            i = np.arange(2, weights.shape[-1])
            prev, first = weights[:, i, i - 1], weights[:, i, 0]
            t_prev, t_first = tokens[:, i - 1], np.broadcast_to(tokens[:, :1], prev.shape)
            differ, margin = t_prev != t_first, prev - first
            won = [np.concatenate([margin[differ & (t_prev == t)], -margin[differ & (t_first == t)]]).mean()
                   for t in range(vocab)]
            split, order = np.array([prev.mean(), first.mean()]), np.argsort(-np.array(won))"""
THIN_WIDE_BUGS = [
    Bug("thin_head", "thin-head-largest-magnitude", _THIN + """
                reach[i, keys[np.argmax(np.abs(k[keys]))]] = 1
            return reach, float(all(reach[i, i - 1] for i in range(1, T)))
    """),
    Bug("thin_head", "thin-head-positive-queries-only", _THIN + """
                reach[i, keys[np.argmax(k[keys])]] = 1
            return reach, float(all(reach[i, i - 1] for i in range(1, T)))
    """),
    Bug("thin_head", "thin-head-mask-ignored", _THIN + """
                reach[i, np.argmax(k)] = reach[i, np.argmin(k)] = 1
            return reach, float(all(reach[i, i - 1] for i in range(1, T)))
    """),
    Bug("one_wide_head", "wide-head-top-weight-only", _WIDE + """
            i = np.arange(2, weights.shape[-1])
            rows = weights[:, i, :]
            top = rows.argmax(axis=-1)
            prev = np.where(top == i - 1, weights[:, i, i - 1], 0.0).mean()
            first = np.where(top == 0, weights[:, i, 0], 0.0).mean()
            return np.array([prev, first]), order
    """),
    Bug("one_wide_head", "wide-head-from-query-1", _WIDE + """
            i = np.arange(1, weights.shape[-1])
            return np.array([weights[:, i, i - 1].mean(), weights[:, i, 0].mean()]), order
    """),
    Bug("one_wide_head", "wide-head-order-reversed", _WIDE + """
            return split, order[::-1]
    """),
]
BUGS += THIN_WIDE_BUGS

def buggy_submission(bug: Bug) -> str:
    """The model answer with one function redefined (the later definition wins)."""
    return solution_source() + "\n\n" + textwrap.dedent(bug.source)


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: bug.mistake)
def test_buggy_submission_is_told_its_mistake(course, write_submission, bug):
    """The bug costs points on its problem and is named, with its message, on hidden cases too."""
    result = grade(course, write_submission(buggy_submission(bug)), problem_ids=[bug.problem]).problems[0]
    message = next(m.message for m in (*course.problem(bug.problem).mistakes, *GENERIC_MISTAKES)
                   if m.id == bug.mistake)
    named = [case for case in result.cases if case.mistake == bug.mistake]
    assert result.score < result.max_score
    assert named, f"{bug.mistake} was never named; cases named {[c.mistake for c in result.cases]}"
    assert all(case.mistake_message == message for case in named)
    assert result.mistakes == (bug.mistake,), f"told {result.mistakes}"
    hidden = [case for case in named if case.hidden]
    assert hidden, f"{bug.mistake} is named on public cases only"
    assert all(case.detail == "" and case.inputs == "" for case in hidden)


def test_every_declared_mistake_has_a_buggy_submission(course):
    """Each mistake of every problem file, and each mistake the grader recognizes in any problem
    (assert for ValueError, float16), is exercised by exactly one bug above or one bug file
    (test_real_bugs.NEW)."""
    from .test_real_bugs import NEW  # the mistakes learned from real code: one bug file each
    generic = {m.id for m in GENERIC_MISTAKES}
    declared = sorted((p.id, m.id) for p in course.problems for m in p.mistakes)
    from_files = [pair for named in NEW.values() for pair in named.items()]
    assert sorted([(bug.problem, bug.mistake) for bug in BUGS if bug.mistake not in generic] + from_files) == declared
    assert sorted(bug.mistake for bug in BUGS if bug.mistake in generic) == sorted(generic)


class TestJudge:
    @pytest.fixture
    def softmax_with_bug(self, course, monkeypatch):
        """softmax's worked example, with one mistake whose bug is the right answer times `factor`."""
        def make(factor: float):
            monkeypatch.setattr(reference, "scaled", lambda scores: reference.softmax(scores) * factor, raising=False)
            problem = replace(course.problem("softmax"), mistakes=(Mistake("scaled", "a message", "scaled"),))
            return problem, prepare(problem, problem.cases[0])
        return make

    def test_names_a_bug_that_differs_from_the_right_answer(self, softmax_with_bug):
        """A wrong answer equal to a bug that differs from the right one is told that mistake."""
        problem, prepared = softmax_with_bug(1 + 2e-5)
        result = judge(problem, prepared, CaseRun(RunStatus.RETURNED, prepared.expected * (1 + 2e-5)))
        assert (result.status, result.mistake, result.mistake_message) == (CaseStatus.FAILED, "scaled", "a message")

    def test_ignores_a_bug_that_agrees_with_the_right_answer(self, softmax_with_bug):
        """A bug within tolerance of the right answer explains no failure, even when it matches."""
        problem, prepared = softmax_with_bug(1 + 0.9e-5)
        got = prepared.expected * (1 + 1.8e-5)
        assert check(problem.compare, prepared.expected * (1 + 0.9e-5), got).passed
        result = judge(problem, prepared, CaseRun(RunStatus.RETURNED, got))
        assert (result.status, result.mistake) == (CaseStatus.FAILED, None)


def test_the_decorator_variant_still_registers_a_bug():
    """Course code that decorates with `variant`, the older name of `bug`, adds a bug all the same."""
    def some_wrong_softmax(scores):
        return scores

    try:
        assert reference.variant(some_wrong_softmax) is some_wrong_softmax
        assert reference.BUGS["some_wrong_softmax"] is some_wrong_softmax
    finally:
        reference.BUGS.pop("some_wrong_softmax", None)
