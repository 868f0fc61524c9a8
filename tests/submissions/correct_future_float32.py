"""Correct answers in a modern style: postponed annotations, type hints, float32 arrays
throughout, validation by raising (never `assert`), helpers shared between functions."""
from __future__ import annotations

import json
import logging
import math
import pathlib
from typing import Optional

import numpy as np

Array = np.ndarray
F32 = np.float32

log = logging.getLogger(__name__)


def _f32(*arrays: object) -> tuple[Array, ...]:
    return tuple(np.asarray(a, dtype=F32) for a in arrays)


def _require_divisible(d_model: int, num_heads: int) -> int:
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return d_model // num_heads


def _heads_and_width(W_O: Array, values: Array) -> tuple[int, int]:
    h, d_v = values.shape[0], values.shape[-1]
    if W_O.shape[0] != h * d_v:
        raise ValueError(f"W_O has {W_O.shape[0]} rows, expected h * d_v = {h} * {d_v} = {h * d_v}")
    return h, d_v


def softmax(scores: Array) -> Array:
    (x,) = _f32(scores)
    shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_reading(weights: Array, values: Array) -> Array:
    a, v = _f32(weights, values)
    # each query's row of weights scales whole value vectors: one pattern for all d_v coordinates
    return np.einsum("...t,td->...d", a, v).astype(F32)


def multi_head_reading(weights: Array, values: Array, W_O: Array) -> tuple[Array, Array, Array]:
    a, v, W_O = _f32(weights, values, W_O)
    h, d_v = _heads_and_width(W_O, v)
    readings = np.stack([attention_reading(a[i], v[i]) for i in range(h)])  # (h, d_v) or (h, n, d_v)
    concat = np.concatenate(list(readings), axis=-1)                           # head after head
    return readings, concat, concat @ W_O


def count_routing_distributions(num_heads: int, d_v: int, num_queries: int = 1, num_keys: Optional[int] = None,
                                d_k: Optional[int] = None, num_layers: int = 1, batch: int = 1,
                                causal: bool = False, num_kv_heads: Optional[int] = None) -> int:
    # one softmax row per query, per head, per layer, per sequence; widths, keys, the mask and
    # shared key/value heads add none
    del d_v, num_keys, d_k, causal, num_kv_heads
    return num_layers * batch * num_heads * num_queries


def head_contributions(weights: Array, values: Array, W_O: Array) -> tuple[Array, Array]:
    a, v, W_O = _f32(weights, values, W_O)
    h, d_v = _heads_and_width(W_O, v)
    blocks = W_O.reshape(h, d_v, W_O.shape[1])           # block i is W_O^(i)
    contributions = np.matmul(np.matmul(a, v), blocks)     # (h, n, d_model): z_i W_O^(i)
    ablated = contributions.sum(axis=0, dtype=F32) - contributions
    return contributions, ablated


def predict_shapes(seq_len: int, d_model: int, num_heads: int, src_len: Optional[int] = None,
                   batch: Optional[int] = None, d_v: Optional[int] = None,
                   average_weights: bool = True) -> dict[str, tuple[int, ...]]:
    d_k = _require_divisible(d_model, num_heads)
    L, h = seq_len, num_heads
    S = L if src_len is None else src_len
    d_v = d_k if d_v is None else d_v
    lead: tuple[int, ...] = () if batch is None else (batch,)
    shapes = {
        "q_head": lead + (h, L, d_k),
        "k_head": lead + (h, S, d_k),
        "v_head": lead + (h, S, d_v),
        "scores": lead + (h, L, S),
        "weights": lead + (h, L, S),
        "head_output": lead + (h, L, d_v),
        "concat": lead + (L, h * d_v),
        "output": lead + (L, d_model),
        "returned_weights": lead + ((L, S) if average_weights else (h, L, S)),
    }
    log.debug("%s predicted %s", pathlib.PurePosixPath(__name__).name, json.dumps(shapes))
    return shapes


def scaled_dot_product_attention(Q: Array, K: Array, V: Array,
                                 mask: Optional[Array] = None) -> tuple[Array, Array]:
    Q, K, V = _f32(Q, K, V)
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / F32(math.sqrt(Q.shape[-1]))
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, F32(-np.inf))
    weights = softmax(scores)
    return np.matmul(weights, V), weights


def split_heads(X: Array, num_heads: int) -> Array:
    (X,) = _f32(X)
    n, d_model = X.shape
    d_k = _require_divisible(d_model, num_heads)
    return np.transpose(X.reshape(n, num_heads, d_k), (1, 0, 2))


def merge_heads(H: Array) -> Array:
    (H,) = _f32(H)
    h, n, d_head = H.shape
    return np.transpose(H, (1, 0, 2)).reshape(n, h * d_head)


def multi_head_attention(X: Array, W_Q: Array, W_K: Array, W_V: Array, W_O: Array, num_heads: int,
                         mask: Optional[Array] = None) -> tuple[Array, Array]:
    X, W_Q, W_K, W_V, W_O = _f32(X, W_Q, W_K, W_V, W_O)
    heads = [split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V)]
    outputs, weights = scaled_dot_product_attention(*heads, mask=mask)  # batched over the head axis
    return merge_heads(outputs) @ W_O, weights


def parameter_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    d_k = _require_divisible(d_model, num_heads)
    per_head = 3 * (d_model * d_k + (d_k if bias else 0))
    return num_heads * per_head + d_model * d_model + (d_model if bias else 0)


def _one_hot_head(seq_len: int, W_K: Array, every_query_same: bool) -> tuple[Array, Array]:
    strength = F32((math.log(9 * seq_len) + 3) * math.sqrt(seq_len))
    W_Q = np.zeros((seq_len, seq_len), dtype=F32)
    if every_query_same:
        W_Q[:, 0] = strength
    else:
        W_Q += strength * np.eye(seq_len, dtype=F32)
    return W_Q, W_K


def previous_token_head(seq_len: int) -> tuple[Array, Array]:
    return _one_hot_head(seq_len, np.eye(seq_len, k=1, dtype=F32), every_query_same=False)


def sink_head(seq_len: int) -> tuple[Array, Array]:
    W_K = np.zeros((seq_len, seq_len), dtype=F32)
    W_K[0, 0] = 1
    return _one_hot_head(seq_len, W_K, every_query_same=True)


def two_head_layer(seq_len: int) -> tuple[Array, Array]:
    heads = (previous_token_head(seq_len), sink_head(seq_len))  # head 0, then head 1
    W_Q, W_K = (np.hstack([head[part] for head in heads]) for part in (0, 1))
    return W_Q, W_K


def padded_batch_attention(X: Array, W_Q: Array, W_K: Array, W_V: Array, W_O: Array, num_heads: int,
                           key_mask: Optional[Array] = None) -> tuple[Array, Array]:
    X, W_Q, W_K, W_V, W_O = _f32(X, W_Q, W_K, W_V, W_O)
    batch, length, d_model = X.shape
    d_k = _require_divisible(d_model, num_heads)
    q, k, v = (np.einsum("nld,dhk->nhlk", X, W.reshape(d_model, num_heads, d_k)) for W in (W_Q, W_K, W_V))
    scores = np.einsum("nhlk,nhsk->nhls", q, k) / F32(math.sqrt(d_k))
    keys = np.ones((batch, length), dtype=bool) if key_mask is None else np.asarray(key_mask, dtype=bool)
    scores = np.where(keys[:, None, None, :], scores, F32(-np.inf))
    # a row without real keys reads nothing: exclude it from the softmax instead of dividing 0 by 0
    empty = ~keys.any(axis=-1)[:, None, None, None]
    safe = np.where(empty, F32(0.0), scores)
    weights = np.where(empty, F32(0.0), softmax(safe)).astype(F32)
    heads = np.einsum("nhls,nhsk->nlhk", weights, v).reshape(batch, length, d_model)
    return heads @ W_O, weights


def one_head_both_designs(seq_len: int, max_scale: Array) -> float:
    if seq_len < 3:
        raise ValueError(f"seq_len={seq_len}: no query i >= 2")
    c = F32(max_scale)
    i, j = np.indices((seq_len, seq_len))
    rows = np.arange(2, seq_len)
    scores = np.where(j <= i, c * (j == i - 1) + c * (j == 0), F32(-np.inf))   # (T, T)
    weights = softmax(scores)
    return float(np.minimum(weights[rows, rows - 1], weights[rows, 0]).min())


def run_model(tokens: Array, E: Array, P: Array, W_Q: Array, W_K: Array, W_V: Array, W_O: Array,
              W_U: Array, num_heads: int) -> tuple[Array, Array]:
    E, P, W_U = _f32(E, P, W_U)
    ids = np.rint(np.asarray(tokens)).astype(np.int64)
    if ids.ndim != 1:
        raise ValueError(f"tokens must be one sequence (T,), got shape {ids.shape}")
    X = E[ids] + P[: len(ids)]
    causal = np.tri(len(ids), dtype=bool)
    out, weights = multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=causal)
    return weights, (X + out) @ W_U


def head_scores(weights: Array) -> tuple[Array, Array]:
    (w,) = _f32(weights)
    if w.ndim != 4:
        raise ValueError(f"weights must be (N, h, T, T), got shape {w.shape}")
    queries = np.arange(2, w.shape[-1])
    previous = np.einsum("nhq->h", w[..., queries, queries - 1]) / (w.shape[0] * len(queries))
    first = np.einsum("nhq->h", w[..., queries, 0]) / (w.shape[0] * len(queries))
    return previous, first


def _readout_loss(logits: Array, tokens: Array) -> float:
    """Both cross-entropies, summed, averaged over positions 1.. (log-sum-exp in float32)."""
    vocab = logits.shape[-1] // 2
    total = F32(0)
    for half, target in ((logits[:, 1:, :vocab], tokens[:, :-1]),
                         (logits[:, 1:, vocab:], np.broadcast_to(tokens[:, :1], tokens[:, 1:].shape))):
        top = half.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(half - top).sum(axis=-1)) + top[..., 0]
        picked = np.take_along_axis(half, target[..., None], axis=-1)[..., 0]
        total += (log_z - picked).mean(dtype=np.float64)
    return float(total)


def ablation_deltas(X: Array, readings: Array, W_O: Array, W_U: Array, tokens: Array) -> Array:
    X, z, W_O, W_U = _f32(X, readings, W_O, W_U)
    ids = np.rint(np.asarray(tokens)).astype(np.int64)
    keep = np.ones(z.shape[1], dtype=F32)

    def loss(scale: Array) -> float:
        concat = np.einsum("nhtd,h->nthd", z, scale).reshape(*X.shape[:2], -1)
        return _readout_loss((X + concat @ W_O) @ W_U, ids)

    whole = loss(keep)
    return np.array([loss(np.where(np.arange(len(keep)) == k, F32(0), keep)) - whole
                     for k in range(len(keep))], dtype=F32)


def thin_head(k: Array, mask: Optional[Array] = None) -> tuple[Array, int]:
    """Width 1: a positive query favours the largest visible key, a negative one the smallest."""
    (keys,) = _f32(k)
    seen = np.ones((keys.size, keys.size), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    high = np.where(seen, keys[None, :], -np.inf).argmax(axis=1)
    low = np.where(seen, keys[None, :], np.inf).argmin(axis=1)
    rows = np.arange(keys.size)
    reach = np.zeros(seen.shape, dtype=np.int8)
    reach[rows, high] = reach[rows, low] = 1
    return reach, int(all(reach[rows[1:], rows[1:] - 1]))


def one_wide_head(weights: Array, tokens: Array, vocab: int) -> tuple[Array, Array]:
    """The split between key i-1 and key 0, and the tokens ranked by how often their key wins."""
    (w,) = _f32(weights)
    ids = np.rint(np.asarray(tokens)).astype(np.int64)
    queries = np.arange(2, w.shape[-1])
    prev, first = w[:, queries, queries - 1], w[:, queries, 0]
    split = np.array([prev.mean(dtype=np.float64), first.mean(dtype=np.float64)], dtype=F32)
    a, b = ids[:, queries - 1], np.broadcast_to(ids[:, :1], prev.shape)
    contest = a != b
    wins = np.zeros(vocab)
    games = np.zeros(vocab)
    np.add.at(wins, a[contest], (prev > first)[contest])
    np.add.at(wins, b[contest], (first > prev)[contest])
    np.add.at(games, a[contest], 1)
    np.add.at(games, b[contest], 1)
    return split, np.argsort(-(wins / np.maximum(games, 1)), kind="stable")


def from_torch_layout(in_proj_weight: Array, in_proj_bias: Array, out_proj_weight: Array,
                      out_proj_bias: Array) -> tuple[Array, ...]:
    w_in, b_in, w_out, b_out = _f32(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias)
    w_q, w_k, w_v = np.split(w_in, 3, axis=0)   # stacked by rows: query, key, value
    b_q, b_k, b_v = np.split(b_in, 3)
    return w_q.T, w_k.T, w_v.T, w_out.T, b_q, b_k, b_v, b_out
