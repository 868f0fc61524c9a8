"""Correct answers with explicit Python loops and math.exp, one number at a time."""
import math

import numpy as np


def _softmax_row(row):
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    total = sum(exps)
    return [e / total for e in exps]


def softmax(scores):
    x = np.asarray(scores, dtype=float)
    out = np.empty_like(x)
    for index in np.ndindex(x.shape[:-1]):
        out[index] = _softmax_row(list(x[index]))
    return out


def attention_reading(weights, values):
    rows = np.atleast_2d(weights)
    out = np.zeros((len(rows), len(values[0])))
    for i, row in enumerate(rows):
        for j, a in enumerate(row):
            for c in range(len(values[j])):
                out[i, c] += a * values[j][c]
    return out if np.ndim(weights) == 2 else out[0]


def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None,
                                num_layers=1, batch=1, causal=False, num_kv_heads=None):
    count = 0
    for _layer in range(num_layers):
        for _sequence in range(batch):
            for _head in range(num_heads):
                for _query in range(num_queries):
                    count += 1  # one softmax row; its d_v value coordinates share it
    return count


def scaled_dot_product_attention(Q, K, V, mask=None):
    n, d_k = Q.shape
    m, d_v = V.shape
    out, weights = np.zeros((n, d_v)), np.zeros((n, m))
    for i in range(n):
        scores = [sum(Q[i, t] * K[j, t] for t in range(d_k)) / math.sqrt(d_k)
                  if mask is None or mask[i, j] else -math.inf for j in range(m)]
        weights[i] = _softmax_row(scores)
        for j in range(m):
            out[i] += weights[i, j] * V[j]
    return out, weights


def split_heads(X, num_heads):
    n, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return np.array([[X[t, i * d_k:(i + 1) * d_k] for t in range(n)] for i in range(num_heads)])


def merge_heads(H):
    return np.array([np.concatenate([head[t] for head in H]) for t in range(H.shape[1])])


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    d_k = X.shape[1] // num_heads
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    outputs, weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        out, w = scaled_dot_product_attention(Q[:, cols], K[:, cols], V[:, cols], mask)
        outputs.append(out)
        weights.append(w)
    return np.concatenate(outputs, axis=1) @ W_O, np.array(weights)


def parameter_count(d_model, num_heads, bias=True):
    d_k = d_model // num_heads
    total = 0
    for _head in range(num_heads):
        total += 3 * (d_model * d_k + (d_k if bias else 0))  # this head's W_Q, W_K, W_V slices
    return total + d_model * d_model + (d_model if bias else 0)  # W_O


def previous_token_head(seq_len):
    scale = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2)
    W_Q, W_K = np.zeros((seq_len, seq_len)), np.zeros((seq_len, seq_len))
    for i in range(seq_len):
        W_Q[i, i] = scale
        if i + 1 < seq_len:
            W_K[i, i + 1] = 1.0
    return W_Q, W_K


def sink_head(seq_len):
    scale = math.sqrt(seq_len) * (math.log(9 * seq_len) + 2)
    W_Q, W_K = np.zeros((seq_len, seq_len)), np.zeros((seq_len, seq_len))
    for i in range(seq_len):
        W_Q[i, 0] = scale
    W_K[0, 0] = 1.0
    return W_Q, W_K
