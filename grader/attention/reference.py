"""Reference multi-head attention in float64 numpy: the grader's source of truth.

Shape legend
    n        query positions (rows of Q; in self-attention also the key positions)
    m        key/value positions
    T        positions read by one attention row
    d_model  model width;  h heads;  d_k = d_model // h (per-head query/key/value width)
    d_v      value width

Every function has the name and signature of the student API. The reference also records
what it does: each softmax normalization (one per query row per head) and the shape of each
intermediate of multi-head attention. ``count_routing_distributions``, ``predict_shapes`` and
``parameter_count`` are answered by running the computation and reading that record, so the
grader never checks them against a formula typed a second time.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

__all__ = [
    "Trace", "tracing", "softmax", "attention_reading", "count_routing_distributions",
    "scaled_dot_product_attention", "split_heads", "merge_heads", "multi_head_attention",
    "predict_shapes", "build_parameters", "parameter_count", "previous_token_head", "sink_head",
    "causal_mask", "head_pattern_weights",
]


@dataclass
class Trace:
    """What one run of the reference did: softmax rows normalized and intermediate shapes."""

    normalizations: int = 0
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def shape(self, name: str, array: np.ndarray) -> np.ndarray:
        self.shapes[name] = tuple(int(s) for s in array.shape)
        return array


_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("mha_trace", default=None)


@contextlib.contextmanager
def tracing() -> Iterator[Trace]:
    """Record every softmax normalization and named shape inside the block."""
    trace = Trace()
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def _record(name: str, array: np.ndarray) -> np.ndarray:
    trace = _TRACE.get()
    return trace.shape(name, array) if trace is not None else array


def softmax(scores) -> np.ndarray:
    """Softmax over the last axis; any leading shape. Subtracting the row max keeps exp finite."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis")
    with np.errstate(invalid="ignore"):
        shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    trace = _TRACE.get()
    if trace is not None:
        # one distribution per row of the last axis, for every leading index (heads, queries)
        trace.normalizations += x.size // x.shape[-1] if x.shape[-1] else 0
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_reading(weights, values) -> np.ndarray:
    """z = sum_j a_j v_j: weights (T,) or (n, T), values (T, d_v) -> (d_v,) or (n, d_v)."""
    a = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    return a @ v  # the same scalar a_j multiplies every coordinate of v_j


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """(n, m) bool mask, True where query i may attend to key j (j <= i)."""
    return np.tri(n, n if m is None else m, dtype=bool)


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask) -> tuple[np.ndarray, np.ndarray]:
    """Attention over the last two axes: q (..., n, d_k), k (..., m, d_k), v (..., m, d_v)."""
    d_k = q.shape[-1]
    scores = _record("scores", q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k))  # (..., n, m)
    if mask is not None:
        allowed = np.asarray(mask, dtype=bool)
        if not allowed.any(axis=-1).all():
            raise ValueError("mask leaves a query row with no position it may attend to")
        scores = np.where(allowed, scores, -np.inf)  # masked keys get exactly zero weight
    weights = _record("weights", softmax(scores))
    return weights @ v, weights  # (..., n, d_v), (..., n, m)


def scaled_dot_product_attention(Q, K, V, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T / sqrt(d_k)) V. Q (n, d_k), K (m, d_k), V (m, d_v), mask bool (n, m)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    return _attend(q, k, v, mask)


def split_heads(X, num_heads: int) -> np.ndarray:
    """(n, d_model) -> (h, n, d_k): head i gets columns i*d_k:(i+1)*d_k."""
    x = np.asarray(X, dtype=np.float64)
    n, d_model = x.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return x.reshape(n, num_heads, d_k).transpose(1, 0, 2)  # (n, h, d_k) -> (h, n, d_k)


def merge_heads(H) -> np.ndarray:
    """(h, n, d_head) -> (n, h * d_head): the inverse of split_heads."""
    heads = np.asarray(H, dtype=np.float64)
    h, n, d_head = heads.shape
    return heads.transpose(1, 0, 2).reshape(n, h * d_head)  # (h, n, d) -> (n, h, d) -> (n, h*d)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads: int, mask=None):
    """Self-attention with h heads. X (n, d_model), each W (d_model, d_model).

    Returns output (n, d_model) and the per-head weights (h, n, n).
    """
    x = np.asarray(X, dtype=np.float64)
    w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64) for w in (W_Q, W_K, W_V, W_O))
    q = _record("q_head", split_heads(x @ w_q, num_heads))  # (h, n, d_k)
    k = split_heads(x @ w_k, num_heads)                    # (h, n, d_k)
    v = split_heads(x @ w_v, num_heads)                    # (h, n, d_k)
    heads, weights = _attend(q, k, v, mask)                # (h, n, d_k), (h, n, n)
    _record("head_output", heads)
    concat = _record("concat", merge_heads(heads))         # (n, d_model)
    output = _record("output", concat @ w_o)               # W_O mixes across head slices
    return output, weights


def count_routing_distributions(num_heads: int, d_v: int, num_queries: int = 1) -> int:
    """Run one layer of `num_heads` heads of value width d_v and count its softmax rows."""
    rng = np.random.default_rng(0)
    shape = (num_heads, num_queries, d_v)  # (h, n, d_v); keys come from the same n positions
    q, k, v = (rng.standard_normal(shape) for _ in range(3))
    with tracing() as trace:
        _attend(q, k, v, mask=None)
    return trace.normalizations


def predict_shapes(seq_len: int, d_model: int, num_heads: int) -> dict[str, tuple[int, ...]]:
    """Run multi-head attention once and report the shapes it actually produced."""
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    # shapes do not depend on the values: all-ones inputs and an identity projection suffice
    x, w = np.ones((seq_len, d_model)), np.eye(d_model)
    with tracing() as trace:
        multi_head_attention(x, w, w, w, w, num_heads)
    return dict(trace.shapes)


def build_parameters(d_model: int, num_heads: int, bias: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """The learned arrays of one attention layer, kept per head as an implementation would."""
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    rng = np.random.default_rng(seed)
    d_k = d_model // num_heads
    params: dict[str, np.ndarray] = {}
    for i in range(num_heads):
        for name in ("Q", "K", "V"):
            params[f"W_{name}[{i}]"] = rng.standard_normal((d_model, d_k))  # this head's slice
            if bias:
                params[f"b_{name}[{i}]"] = np.zeros(d_k)
    params["W_O"] = rng.standard_normal((num_heads * d_k, d_model))  # mixes the concatenated heads
    if bias:
        params["b_O"] = np.zeros(d_model)
    return params


def parameter_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    """Count the entries of the arrays build_parameters actually allocates."""
    return int(sum(p.size for p in build_parameters(d_model, num_heads, bias).values()))


def head_pattern_weights(seq_len: int, W_Q, W_K) -> np.ndarray:
    """Weights (n, n) of one head with X = I (one-hot positions), W_V = W_O = I, causal mask."""
    eye = np.eye(seq_len)
    _, weights = multi_head_attention(eye, W_Q, W_K, eye, eye, 1, mask=causal_mask(seq_len))
    return weights[0]


def previous_token_head(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K so that query i (i >= 1) puts almost all its weight on key i - 1."""
    # score(i, j) = c * [j == i - 1] / sqrt(T); a gap of 12 nats beats up to T - 1 rivals
    c = math.sqrt(seq_len) * (12.0 + math.log(seq_len))
    w_q = c * np.eye(seq_len)
    w_k = np.eye(seq_len, k=1)  # row j is e_{j+1}: key j answers query j + 1
    return w_q, w_k


def sink_head(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K so that every query puts almost all its weight on position 0."""
    c = math.sqrt(seq_len) * (12.0 + math.log(seq_len))
    w_q = np.zeros((seq_len, seq_len))
    w_q[:, 0] = c          # every query carries the same 'look for the start' direction
    w_k = np.zeros((seq_len, seq_len))
    w_k[0, 0] = 1.0        # only position 0's key has that direction
    return w_q, w_k

