"""Correct answers returned as plain Python containers: nested lists instead of arrays, lists
instead of tuples, and numpy integer scalars instead of ints."""
import math

import numpy as np


def softmax(scores):
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).tolist()


def attention_reading(weights, values):
    return (weights @ values).tolist()


def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None,
                                num_layers=1, batch=1, causal=False, num_kv_heads=None):
    return np.int64(num_layers) * np.int64(batch) * np.int64(num_heads) * np.int64(num_queries)


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


def predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    n, h, d_k = np.int64(seq_len), np.int64(num_heads), np.int64(d_model // num_heads)
    s = n if src_len is None else np.int64(src_len)
    v = d_k if d_v is None else np.int64(d_v)
    lead = [] if batch is None else [np.int64(batch)]
    return {"q_head": lead + [h, n, d_k], "k_head": lead + [h, s, d_k], "v_head": lead + [h, s, v],
            "scores": lead + [h, n, s], "weights": lead + [h, n, s], "head_output": lead + [h, n, v],
            "concat": lead + [n, h * v], "output": np.array(lead + [n, d_model]),
            "returned_weights": lead + ([n, s] if average_weights else [h, n, s])}


def parameter_count(d_model, num_heads, bias=True):
    return np.int64(4) * (d_model * d_model + (d_model if bias else 0))


def previous_token_head(seq_len):
    scale = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2)
    return [(scale * np.eye(seq_len)).tolist(), np.eye(seq_len, k=1).tolist()]


def sink_head(seq_len):
    W_Q, W_K = np.zeros((seq_len, seq_len)), np.zeros((seq_len, seq_len))
    W_Q[:, 0], W_K[0, 0] = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2), 1.0
    return (W_Q.tolist(), W_K.tolist())
