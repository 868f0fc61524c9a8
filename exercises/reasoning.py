"""Reference and bugs of the problems that ask the student to reason rather than
transcribe: shared key/value heads in the count of routing distributions, what one head reaches
with two designs at once (the evidence before `two_head_layer`), and attention over a padded batch.

Named by problem files (`function:`, `mistakes[].bug`) through course.py.
"""
from __future__ import annotations

import math

import numpy as np

from .reference import attention_reading, count_routing_distributions

__all__ = ["count_kv_heads", "one_head_both_designs", "both_designs_divided_by_sqrt",
           "both_designs_best_query", "both_designs_the_limit", "padded_batch_attention",
           "padded_batch_nan_rows", "padded_batch_mask_inverted", "padded_batch_mask_on_queries",
           "own_reading", "own_reading_swapped", "own_reading_unweighted", "own_reading_averaged"]


def count_kv_heads(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
                   num_kv_heads=None):
    """One distribution per key/value head: the right count with num_kv_heads in place of num_heads."""
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if kv_heads == num_heads:
        raise ValueError("no shared key/value heads: this mistake cannot show")
    return count_routing_distributions(kv_heads, d_v, num_queries, num_keys, d_k, num_layers, batch, causal)


# --- the worked reading by hand, with each student's own weights and values (quiz: own_reading) --

def _own(weights, p: int, q: int, coord: int) -> float:
    values = np.array([[1, 0, p, 0], [0, 1, 0, q]], dtype=np.float64)   # v1, v2: (T = 2, d_v = 4)
    return float(attention_reading(np.asarray(weights, dtype=np.float64), values)[coord - 1])


def own_reading(a: int, p: int, q: int, coord: int) -> float:
    """Coordinate `coord` (from 1) of z = 0.a v1 + (1 - 0.a) v2, v1 = [1, 0, p, 0], v2 = [0, 1, 0, q]."""
    return _own([a / 10, 1 - a / 10], p, q, coord)


def own_reading_swapped(a: int, p: int, q: int, coord: int) -> float:
    """The weights given to the wrong vectors: 0.a on v2."""
    return _own([1 - a / 10, a / 10], p, q, coord)


def own_reading_unweighted(a: int, p: int, q: int, coord: int) -> float:
    """v1 + v2, the weights left out."""
    return _own([1.0, 1.0], p, q, coord)


def own_reading_averaged(a: int, p: int, q: int, coord: int) -> float:
    """The plain mean of v1 and v2, as if the weights were equal."""
    return _own([0.5, 0.5], p, q, coord)


# --- one head holding the previous-token design and the sink design ------------------------------

def _both_designs_weights(seq_len: int, prev_scale: float, sink_scale: float, divide_by_sqrt: bool = False):
    """(T, T) causal weights of one head scoring key j for query i as
    prev_scale * [j = i - 1] + sink_scale * [j = 0]."""
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3, so that some query has i - 1 != 0 (got {seq_len})")
    i, j = np.indices((seq_len, seq_len))
    scores = prev_scale * (j == i - 1) + sink_scale * (j == 0)     # (T, T)
    if divide_by_sqrt:
        scores = scores / math.sqrt(seq_len)
    scores = np.where(j <= i, scores, -np.inf)                     # causal: keys 0..i
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _both_designs(seq_len, max_scale, over_queries, divide_by_sqrt=False) -> float:
    """The worst (or best) query's smaller target weight with both scales at max_scale.

    p = s = max_scale is the best a head with scales at most max_scale can do: for every query,
    raising the smaller scale raises the smaller weight, and raising both together raises it too
    (tests/test_reasoning.py checks this against a search over (p, s))."""
    c = float(max_scale)
    w = _both_designs_weights(seq_len, c, c, divide_by_sqrt)
    rows = np.arange(2, seq_len)                                   # queries whose i - 1 is not 0
    return float(over_queries(np.minimum(w[rows, rows - 1], w[rows, 0])))


def one_head_both_designs(seq_len, max_scale) -> float:
    """The largest value one head with scales p, s <= max_scale reaches for the smallest, over the
    queries i >= 2, of min(weight on i - 1, weight on 0): e^c / (2 e^c + T - 2) at c = max_scale."""
    return _both_designs(seq_len, max_scale, np.min)


def both_designs_divided_by_sqrt(seq_len, max_scale):
    """The scores divided by sqrt(T), as a designed head's are, though the scales are the scores."""
    return _both_designs(seq_len, max_scale, np.min, divide_by_sqrt=True)


def both_designs_best_query(seq_len, max_scale):
    """The best query (the largest value over i, the one with the fewest competitors) instead of the worst."""
    return _both_designs(seq_len, max_scale, np.max)


def both_designs_the_limit(seq_len, max_scale):
    """The limit 1/2 that the bound approaches as the scales grow, ignoring the cap on the scales."""
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3 (got {seq_len})")
    return 0.5


# --- multi-head attention over a padded batch ----------------------------------------------------

def _padded(X, W_Q, W_K, W_V, W_O, num_heads, allowed, rows_to_zero: bool):
    """Shared body: `allowed` (N, 1, L or 1, S) says which scores survive; rows with none left get
    zero weights when `rows_to_zero`, else whatever 0 / 0 gives (nan)."""
    X = np.asarray(X, dtype=np.float64)
    N, L, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads

    def heads(W):  # (N, L, d_model) @ (d_model, d_model) -> (N, h, L, d_k)
        return (X @ np.asarray(W, dtype=np.float64)).reshape(N, L, num_heads, -1).transpose(0, 2, 1, 3)

    q, k, v = heads(W_Q), heads(W_K), heads(W_V)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)          # (N, h, L, S)
    scores = np.where(allowed, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        top = scores.max(axis=-1, keepdims=True)
        if rows_to_zero:
            top = np.where(np.isfinite(top), top, 0.0)             # an empty row: exp(-inf) = 0 everywhere
        e = np.exp(scores - top)
        total = e.sum(axis=-1, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0) if rows_to_zero else e / total
    z = weights @ v                                                # (N, h, L, d_k)
    concat = z.transpose(0, 2, 1, 3).reshape(N, L, d_model)        # (N, L, h * d_k)
    return concat @ np.asarray(W_O, dtype=np.float64), weights


def _keys(key_mask, X):
    X = np.asarray(X)
    if key_mask is None:
        return np.ones(X.shape[:2], dtype=bool)
    return np.asarray(key_mask, dtype=bool)


def padded_batch_attention(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """Multi-head self-attention over a batch X (N, L, d_model) with a key mask (N, S = L):
    True = a real token, which every query of its sequence may attend; False = padding.
    Returns output (N, L, d_model) and weights (N, h, L, S). A query with no real key (a
    sequence that is all padding) gets zero weights, so a zero reading and a zero output row."""
    allowed = _keys(key_mask, X)[:, None, None, :]                 # (N, 1, 1, S)
    return _padded(X, W_Q, W_K, W_V, W_O, num_heads, allowed, rows_to_zero=True)


def padded_batch_nan_rows(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """A plain softmax: a row whose keys are all padding is exp(-inf) / 0 = nan."""
    allowed = _keys(key_mask, X)[:, None, None, :]
    return _padded(X, W_Q, W_K, W_V, W_O, num_heads, allowed, rows_to_zero=False)


def padded_batch_mask_inverted(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """True read as padding (PyTorch's key_padding_mask convention) instead of a real token."""
    allowed = ~_keys(key_mask, X)[:, None, None, :]
    return _padded(X, W_Q, W_K, W_V, W_O, num_heads, allowed, rows_to_zero=True)


def padded_batch_mask_on_queries(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """The mask applied along the query axis: padded queries lose every key, real queries read padding."""
    allowed = _keys(key_mask, X)[:, None, :, None]                 # (N, 1, L, 1)
    return _padded(X, W_Q, W_K, W_V, W_O, num_heads, allowed, rows_to_zero=True)
