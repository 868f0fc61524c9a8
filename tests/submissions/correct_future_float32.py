"""Correct answers in a modern style: postponed annotations, type hints, float32 arrays
throughout, validation by raising (never `assert`), helpers shared between functions."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

Array = np.ndarray
F32 = np.float32


def _f32(*arrays: object) -> tuple[Array, ...]:
    return tuple(np.asarray(a, dtype=F32) for a in arrays)


def _require_divisible(d_model: int, num_heads: int) -> int:
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return d_model // num_heads


def softmax(scores: Array) -> Array:
    (x,) = _f32(scores)
    shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


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
