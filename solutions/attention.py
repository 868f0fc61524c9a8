"""Model answers for the multi-head attention exercises (instructors only).

Shape legend: n queries, m keys, T positions, d_model model width, h heads,
d_k = d_model // h per-head width, d_v value width.
"""
import math

import numpy as np


def softmax(scores):
    """Softmax over the last axis. Subtracting each row's max keeps exp() from overflowing."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_reading(weights, values):
    """z = sum_j a_j v_j: one weight per position scales that position's whole value vector."""
    return np.asarray(weights, dtype=np.float64) @ np.asarray(values, dtype=np.float64)


def count_routing_distributions(num_heads, d_v, num_queries=1):
    """One softmax row per query per head; the value width d_v adds no routing choices."""
    return num_heads * num_queries


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V; mask True = may attend."""
    d_k = Q.shape[-1]
    scores = Q @ K.T / math.sqrt(d_k)           # (n, m)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # exp(-inf) = 0: masked keys get no weight
    weights = softmax(scores)                   # (n, m), each row sums to 1
    return weights @ V, weights                 # (n, d_v), (n, m)


def split_heads(X, num_heads):
    """(n, d_model) -> (h, n, d_k); head i takes columns i*d_k:(i+1)*d_k."""
    n, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return X.reshape(n, num_heads, d_model // num_heads).transpose(1, 0, 2)


def merge_heads(H):
    """(h, n, d_head) -> (n, h * d_head), undoing split_heads."""
    h, n, d_head = H.shape
    return H.transpose(1, 0, 2).reshape(n, h * d_head)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Project, split into heads, attend in each head independently, concatenate, mix with W_O."""
    Q = split_heads(X @ W_Q, num_heads)   # (h, n, d_k)
    K = split_heads(X @ W_K, num_heads)
    V = split_heads(X @ W_V, num_heads)
    outputs, weights = [], []
    for q, k, v in zip(Q, K, V):          # every head normalizes its own scores
        out, w = scaled_dot_product_attention(q, k, v, mask)
        outputs.append(out)
        weights.append(w)
    concat = merge_heads(np.stack(outputs))   # (n, d_model)
    return concat @ W_O, np.stack(weights)    # (n, d_model), (h, n, n)


def predict_shapes(seq_len, d_model, num_heads):
    """Shapes of the stacked per-head intermediates of multi-head attention."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return {
        "q_head": (num_heads, seq_len, d_k),
        "scores": (num_heads, seq_len, seq_len),
        "weights": (num_heads, seq_len, seq_len),
        "head_output": (num_heads, seq_len, d_k),
        "concat": (seq_len, d_model),
        "output": (seq_len, d_model),
    }


def parameter_count(d_model, num_heads, bias=True):
    """W_Q, W_K, W_V, W_O are each d_model x d_model however the width is split into heads."""
    weights = 4 * d_model * d_model
    biases = 4 * d_model if bias else 0
    return weights + biases


def previous_token_head(seq_len):
    """Key j carries the direction of position j + 1, so query i matches key i - 1."""
    strength = math.sqrt(seq_len) * (10 + math.log(seq_len))
    W_Q = strength * np.eye(seq_len)
    W_K = np.eye(seq_len, k=1)
    return W_Q, W_K


def sink_head(seq_len):
    """Every query asks for one direction that only position 0's key has."""
    strength = math.sqrt(seq_len) * (10 + math.log(seq_len))
    W_Q = np.zeros((seq_len, seq_len))
    W_Q[:, 0] = strength
    W_K = np.zeros((seq_len, seq_len))
    W_K[0, 0] = 1.0
    return W_Q, W_K
