"""Correct answers returned as plain Python containers: nested lists instead of arrays, lists
instead of tuples, and numpy integer scalars instead of ints."""
import math

import numpy as np


def softmax(scores):
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).tolist()


def attention_reading(weights, values):
    return (weights @ values).tolist()


def count_routing_distributions(num_heads, d_v, num_queries=1):
    return np.int64(num_heads) * np.int64(num_queries)


def _attention(Q, K, V, mask):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.asarray(softmax(scores))
    return weights @ V, weights


def scaled_dot_product_attention(Q, K, V, mask=None):
    return [part.tolist() for part in _attention(Q, K, V, mask)]


def _split(X, num_heads):
    n, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return X.reshape(n, num_heads, d_model // num_heads).transpose(1, 0, 2)


def _merge(H):
    return H.transpose(1, 0, 2).reshape(H.shape[1], -1)


def split_heads(X, num_heads):
    return _split(X, num_heads).tolist()


def merge_heads(H):
    return _merge(H).tolist()


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    heads, weights = _attention(*(_split(X @ W, num_heads) for W in (W_Q, W_K, W_V)), mask)
    return [(_merge(heads) @ W_O).tolist(), weights.tolist()]


def predict_shapes(seq_len, d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    n, h, d_k = np.int64(seq_len), np.int64(num_heads), np.int64(d_model // num_heads)
    return {"q_head": [h, n, d_k], "scores": [h, n, n], "weights": [h, n, n],
            "head_output": [h, n, d_k], "concat": [n, np.int64(d_model)], "output": np.array([n, d_model])}


def parameter_count(d_model, num_heads, bias=True):
    return np.int64(4) * (d_model * d_model + (d_model if bias else 0))


def previous_token_head(seq_len):
    scale = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2)
    return [(scale * np.eye(seq_len)).tolist(), np.eye(seq_len, k=1).tolist()]


def sink_head(seq_len):
    W_Q, W_K = np.zeros((seq_len, seq_len)), np.zeros((seq_len, seq_len))
    W_Q[:, 0], W_K[0, 0] = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2), 1.0
    return (W_Q.tolist(), W_K.tolist())
