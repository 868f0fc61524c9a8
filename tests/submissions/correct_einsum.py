"""Correct answers written with einsum, np.split/np.concatenate and a log-sum-exp softmax."""
import numpy as np


def softmax(scores):
    x = np.asarray(scores, dtype=float)
    top = x.max(axis=-1, keepdims=True)
    log_total = top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True))
    return np.exp(x - log_total)


def attention_reading(weights, values):
    return np.einsum("...t,td->...d", weights, values)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = np.einsum("nd,md->nm", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return np.einsum("nm,mv->nv", weights, V), weights


def split_heads(X, num_heads):
    return np.stack(np.split(X, num_heads, axis=1))  # np.split raises ValueError on an unequal split


def merge_heads(H):
    return np.concatenate(list(H), axis=1)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, d_model = X.shape
    d_k = d_model // num_heads
    q, k, v = (np.einsum("nd,de->ne", X, W).reshape(n, num_heads, d_k) for W in (W_Q, W_K, W_V))
    scores = np.einsum("nhd,mhd->hnm", q, k) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    heads = np.einsum("hnm,mhd->nhd", weights, v).reshape(n, d_model)
    return np.einsum("nd,de->ne", heads, W_O), weights
