"""Your implementations of the multi-head attention exercises.

Replace each `raise NotImplementedError(...)` with your code, then run `mha check`
(or `mha check PROBLEM`) for instant feedback. `mha show PROBLEM` prints the full task.
Use numpy; do not rename the functions or change their parameters.
"""
import math

import numpy as np


def softmax(scores):
    """Softmax over the last axis of `scores` (any leading shape); stable for |scores| up to 1e4."""
    raise NotImplementedError("softmax: not implemented yet (see `mha show softmax`)")


def attention_reading(weights, values):
    """Weighted sum of value vectors: weights (S,) or (L, S), values (S, d_v) -> (d_v,) or (L, d_v)."""
    raise NotImplementedError("attention_reading: not implemented yet (see `mha show attention_reading`)")


def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None,
                                num_layers=1, batch=1, causal=False, num_kv_heads=None):
    """How many separately normalized distributions over key positions the model forms
    (see `mha show count_routing_distributions`: some parameters may not matter)."""
    raise NotImplementedError("count_routing_distributions: not implemented yet (see `mha show count_routing_distributions`)")


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Q (L, d_k), K (S, d_k), V (S, d_v), mask bool (L, S) with True = may attend.
    Return (output (L, d_v), weights (L, S))."""
    raise NotImplementedError("scaled_dot_product_attention: not implemented yet (see `mha show scaled_dot_product_attention`)")


def split_heads(X, num_heads):
    """(L, d_model) -> (num_heads, L, d_model // num_heads); ValueError if not divisible."""
    raise NotImplementedError("split_heads: not implemented yet (see `mha show split_heads`)")


def merge_heads(H):
    """(num_heads, L, d_v) -> (L, num_heads * d_v); the inverse of split_heads."""
    raise NotImplementedError("merge_heads: not implemented yet (see `mha show merge_heads`)")


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Self-attention with num_heads heads. X (L, d_model), each W (d_model, d_model).
    Head i (i = 1..h) uses columns (i-1)*d_k:i*d_k of X @ W_Q, X @ W_K, X @ W_V.
    Return (output (L, d_model), weights (num_heads, L, L))."""
    raise NotImplementedError("multi_head_attention: not implemented yet (see `mha show multi_head_attention`)")


def predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Shapes of the intermediates, keys "q_head", "k_head", "v_head", "scores", "weights",
    "head_output", "concat", "output", "returned_weights" (see `mha show predict_shapes`);
    ValueError if d_model % num_heads."""
    raise NotImplementedError("predict_shapes: not implemented yet (see `mha show predict_shapes`)")


def parameter_count(d_model, num_heads, bias=True):
    """Learned parameters of W_Q, W_K, W_V, W_O (plus their biases when bias=True)."""
    raise NotImplementedError("parameter_count: not implemented yet (see `mha show parameter_count`)")


def previous_token_head(seq_len):
    """Design W_Q, W_K (seq_len x seq_len) so query i attends to position i - 1 (X = identity)."""
    raise NotImplementedError("previous_token_head: not implemented yet (see `mha show previous_token_head`)")


def sink_head(seq_len):
    """Design W_Q, W_K (seq_len x seq_len) so every query attends to position 0 (X = identity)."""
    raise NotImplementedError("sink_head: not implemented yet (see `mha show sink_head`)")


def multi_head_reading(weights, values, W_O):
    """weights (h, S) or (h, L, S), values (h, S, d_v), W_O (h*d_v, d_model).
    Return (readings, concat, output) (see `mha show multi_head_reading`)."""
    raise NotImplementedError("multi_head_reading: not implemented yet (see `mha show multi_head_reading`)")


def head_contributions(weights, values, W_O):
    """weights (h, L, S), values (h, S, d_v), W_O (h*d_v, d_model).
    Return (contributions (h, L, d_model), ablated (h, L, d_model))."""
    raise NotImplementedError("head_contributions: not implemented yet (see `mha show head_contributions`)")


def two_head_layer(seq_len):
    """Design W_Q, W_K (seq_len x 2*seq_len): head 1 (columns 0:T) attends to i - 1, head 2 to position 0."""
    raise NotImplementedError("two_head_layer: not implemented yet (see `mha show two_head_layer`)")


def padded_batch_attention(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """X (N, L, d_model), key_mask bool (N, S) with True = a real token, False = padding (or None).
    Return (output (N, L, d_model), weights (N, h, L, S)); a row with no real key is all zeros."""
    raise NotImplementedError("padded_batch_attention: not implemented yet (see `mha show padded_batch_attention`)")


def one_head_both_designs(seq_len, max_scale):
    """The best one head with scales p, s <= max_scale can do for its worst query's smaller target
    weight (see `mha show one_head_both_designs`)."""
    raise NotImplementedError("one_head_both_designs: not implemented yet (see `mha show one_head_both_designs`)")


def run_model(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """tokens (T,), E (V, d_model), P (T, d_model), W_Q, W_K, W_V, W_O (d_model, d_model), W_U (d_model, 2V).
    Return (weights (h, T, T), logits (T, 2V)), using your multi_head_attention with a causal mask."""
    raise NotImplementedError("run_model: not implemented yet (see `mha show run_model`)")


def head_scores(weights):
    """weights (N, h, T, T): h heads' maps on N sequences.
    Return (previous (h,), first (h,)): mean weight on key i - 1 and on key 0, queries i = 2 .. T-1."""
    raise NotImplementedError("head_scores: not implemented yet (see `mha show head_scores`)")


def ablation_deltas(X, readings, W_O, W_U, tokens):
    """X (N, T, d_model), readings (N, h, T, d_k), W_O (h*d_k, d_model), W_U (d_model, 2V), tokens (N, T).
    Return (h,): the loss with head k's reading zeroed minus the whole model's loss."""
    raise NotImplementedError("ablation_deltas: not implemented yet (see `mha show ablation_deltas`)")


def thin_head(k, mask=None):
    """k (T,): a width-1 head's keys; mask (T, T) bool, True = may attend (or None).
    Return (reach (T, T) of 1/0, previous 1/0) (see `mha show thin_head`)."""
    raise NotImplementedError("thin_head: not implemented yet (see `mha show thin_head`)")


def one_wide_head(weights, tokens, vocab):
    """weights (N, T, T): one head's maps; tokens (N, T); vocab V.
    Return (split (2,), order (V,)) (see `mha show one_wide_head`)."""
    raise NotImplementedError("one_wide_head: not implemented yet (see `mha show one_wide_head`)")


def from_torch_layout(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """in_proj_weight (3E, E), in_proj_bias (3E,), out_proj_weight (E, E), out_proj_bias (E,): an
    nn.MultiheadAttention's parameters. Return (W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O) in the course's layout."""
    raise NotImplementedError("from_torch_layout: not implemented yet (see `mha show from_torch_layout`)")
