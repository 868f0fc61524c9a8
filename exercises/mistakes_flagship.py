"""Known-wrong answers of the flagship problems: reading values, counting distributions,
predicting shapes, several heads in one layer. Exported by name through course.py, like those
of mistakes.py (see that module for how a named mistake explains a failing answer).

A bug raises (ValueError) where its mistake makes no sense for the inputs, such as
confusing keys with queries in self-attention: then it names nothing there, and no two
mistakes of a problem can explain the same answer.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import reference as ref

FLAGSHIP_BUGS: dict[str, Callable] = {}


def _bug(fn: Callable) -> Callable:
    FLAGSHIP_BUGS[fn.__name__] = fn
    return fn


def _needs(condition: bool, why: str) -> None:
    if not condition:
        raise ValueError(f"the mistake does not apply: {why}")


# --- attention_reading -----------------------------------------------------------------------

@_bug
def reading_transposed(weights, values):
    """values.T @ weights.T: the right sums, laid out (d_v, n) instead of (n, d_v)."""
    a, v = np.asarray(weights, dtype=np.float64), np.asarray(values, dtype=np.float64)
    _needs(a.ndim == 2, "one query gives the same vector either way")
    return v.T @ a.T


@_bug
def reading_normalized_per_coordinate(weights, values):
    """Divides coordinate k of the reading by sum_j v_jk, as if each coordinate had its own normalization."""
    v = np.asarray(values, dtype=np.float64)
    return ref.attention_reading(weights, v) / v.sum(axis=0)


# --- multi_head_reading ----------------------------------------------------------------------

@_bug
def reading_heads_averaged(weights, values, W_O):
    """Averages the heads' weights into one shared row, then reads every head's values with it."""
    a = np.asarray(weights, dtype=np.float64)
    _needs(a.shape[0] > 1, "one head has nothing to average")
    return ref.multi_head_reading(np.broadcast_to(a.mean(axis=0), a.shape), values, W_O)


@_bug
def reading_concat_interleaved(weights, values, W_O):
    """Joins the readings coordinate by coordinate (z1[0], z2[0], z1[1], ...) instead of head after head."""
    readings, _, _ = ref.multi_head_reading(weights, values, W_O)
    _needs(readings.shape[0] > 1 and readings.shape[-1] > 1, "one head or width 1 joins the same way")
    if readings.ndim == 2:                                     # (h, d_v)
        concat = readings.T.reshape(-1)                        # (d_v, h) -> (d_v*h,)
    else:                                                      # (h, n, d_v)
        concat = readings.transpose(1, 2, 0).reshape(readings.shape[1], -1)  # (n, d_v, h) -> (n, d_v*h)
    return readings, concat, concat @ np.asarray(W_O, dtype=np.float64)


@_bug
def reading_without_output_projection(weights, values, W_O):
    """Returns the concatenation as the output: W_O never applied."""
    readings, concat, _ = ref.multi_head_reading(weights, values, W_O)
    return readings, concat, concat


@_bug
def reading_concat_reshaped(weights, values, W_O):
    """Joins the readings by reshaping (h, n, d_v) straight to (n, h * d_v): each row mixes the
    readings of different queries."""
    readings, _, _ = ref.multi_head_reading(weights, values, W_O)
    _needs(readings.ndim == 3 and readings.shape[0] > 1 and readings.shape[1] > 1,
           "one query or one head joins the same way")
    concat = readings.reshape(readings.shape[1], -1)                # (h, n, d_v) read in memory order
    return readings, concat, concat @ np.asarray(W_O, dtype=np.float64)


@_bug
def reading_outputs_averaged(weights, values, W_O):
    """Averages the heads' contributions z^(i) W_O^(i) instead of adding them: the output is 1/h of the sum."""
    readings, concat, output = ref.multi_head_reading(weights, values, W_O)
    _needs(readings.shape[0] > 1, "one head has nothing to average")
    return readings, concat, output / readings.shape[0]


# --- head_contributions ----------------------------------------------------------------------

def _output(weights, values, W_O) -> tuple[np.ndarray, int]:
    contributions, _ = ref.head_contributions(weights, values, W_O)
    return contributions.sum(axis=0), contributions.shape[0]  # (n, d_model), h


@_bug
def contributions_own_slice(weights, values, W_O):
    """Credits head i only with its own slice of the output's columns, as if W_O kept heads apart."""
    output, h = _output(weights, values, W_O)
    d_model = output.shape[-1]
    _needs(h > 1 and d_model % h == 0, "the output width must split into one slice per head")
    width = d_model // h
    contributions = np.zeros((h, *output.shape))
    for i in range(h):
        contributions[i][:, i * width:(i + 1) * width] = output[:, i * width:(i + 1) * width]
    return contributions, output[None] - contributions


@_bug
def contributions_equal_split(weights, values, W_O):
    """Gives every head the same share, output / h, whatever it reads and writes."""
    output, h = _output(weights, values, W_O)
    _needs(h > 1, "one head is the whole output")
    share = np.broadcast_to(output / h, (h, *output.shape))
    return share, output[None] - share


@_bug
def contributions_heads_averaged(weights, values, W_O):
    """Reads every head's values with one row shared by all heads (the heads' average), as if the
    layer had one distribution per query."""
    weights, values, W_O = (np.asarray(a, dtype=np.float64) for a in (weights, values, W_O))
    _needs(not np.allclose(weights, weights[:1]), "the heads' weights are all the same")
    shared = np.broadcast_to(weights.mean(axis=0), weights.shape)   # (h, L, S), one row for all heads
    return ref.head_contributions(shared, values, W_O)


@_bug
def ablation_rescaled(weights, values, W_O):
    """Removes head i, then scales the remaining heads up by h / (h - 1) to 'keep the total'."""
    contributions, _ = ref.head_contributions(weights, values, W_O)
    h = contributions.shape[0]
    _needs(h > 1, "one head leaves nothing to rescale")
    output = contributions.sum(axis=0)
    return contributions, (output[None] - contributions) * h / (h - 1)


# --- count_routing_distributions -------------------------------------------------------------

def _layer(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """The right count's factors: layers, batch, heads, queries."""
    return num_layers * batch * num_heads * num_queries


@_bug
def count_value_width(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """One distribution per value coordinate: the right count times d_v."""
    return _layer(num_heads, d_v, num_queries, num_keys, d_k, num_layers, batch) * d_v


@_bug
def count_key_width(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """One distribution per query/key coordinate: the right count times d_k (d_k is d_v when not given)."""
    return _layer(num_heads, d_v, num_queries, num_keys, d_k, num_layers, batch) * (d_v if d_k is None else d_k)


@_bug
def count_per_key(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """One distribution per key position instead of per query position."""
    return num_layers * batch * num_heads * (num_queries if num_keys is None else num_keys)


@_bug
def count_weights(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """Counts every weight (every allowed query-key pair) instead of every softmax row."""
    m = num_queries if num_keys is None else num_keys
    pairs = int(ref.causal_mask(num_queries, m).sum()) if causal else num_queries * m
    return num_layers * batch * num_heads * pairs


@_bug
def count_ignoring_queries(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """One distribution per head, whatever the number of queries."""
    return num_layers * batch * num_heads


@_bug
def count_ignoring_layers(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """Counts one layer, however many layers run."""
    return batch * num_heads * num_queries


@_bug
def count_ignoring_batch(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """Counts one sequence, however many sequences the batch holds."""
    return num_layers * num_heads * num_queries


@_bug
def count_ignoring_layers_and_batch(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """Counts one layer of one sequence: heads times queries."""
    return num_heads * num_queries


@_bug
def count_causal_triangle(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
        num_kv_heads=None):
    """With a causal mask, counts n(n+1)/2 per head (the allowed query-key pairs of an n x n
    triangle) instead of n rows; without one, the right count."""
    per_head = num_queries * (num_queries + 1) // 2 if causal else num_queries
    return num_layers * batch * num_heads * per_head


# --- predict_shapes --------------------------------------------------------------------------

_PER_HEAD = ("q_head", "k_head", "v_head", "scores", "weights", "head_output")


def _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights) -> dict[str, tuple[int, ...]]:
    return ref.predict_shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights)


def _lead(batch) -> tuple[int, ...]:
    return () if batch is None else (batch,)


@_bug
def shapes_head_output_full_width(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Each head's output as wide as the model, (h, n, d_model), instead of d_v."""
    shapes = _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights)
    shapes["head_output"] = (*_lead(batch), num_heads, seq_len, d_model)
    return shapes


@_bug
def shapes_scores_like_queries(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Scores (and so the weights) shaped like the queries, (h, n, d_k), instead of (h, L, S)."""
    shapes = _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights)
    d_k = d_model // num_heads
    shapes["scores"] = shapes["weights"] = (*_lead(batch), num_heads, seq_len, d_k)
    shapes["returned_weights"] = (*_lead(batch), seq_len, d_k) if average_weights else shapes["weights"]
    return shapes


@_bug
def shapes_missing_head_axis(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Leaves out the head axis of every per-head array, as if one head ran."""
    _needs(num_heads > 1, "with one head the axis has size 1 either way")
    shapes = _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights)
    axis = len(_lead(batch))
    keys = _PER_HEAD if average_weights else (*_PER_HEAD, "returned_weights")
    for key in keys:
        shapes[key] = shapes[key][:axis] + shapes[key][axis + 1:]
    return shapes


@_bug
def shapes_keys_from_queries(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Takes the number of keys from the queries (S = L), as in self-attention."""
    _needs(src_len is not None and src_len != seq_len, "self-attention has S = L")
    return _shapes(seq_len, d_model, num_heads, None, batch, d_v, average_weights)


@_bug
def shapes_value_width_from_keys(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Gives the values the width of the queries and keys (d_k) instead of d_v."""
    _needs(d_v is not None and d_v != d_model // num_heads, "d_v is d_k here")
    return _shapes(seq_len, d_model, num_heads, src_len, batch, None, average_weights)


@_bug
def shapes_weights_layout_swapped(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Returns the weights per head when they are averaged, or averaged when they are per head."""
    _needs(num_heads > 1, "with one head both layouts hold the same numbers")
    shapes = _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, average_weights)
    swapped = _shapes(seq_len, d_model, num_heads, src_len, batch, d_v, not average_weights)
    shapes["returned_weights"] = swapped["returned_weights"]
    return shapes


__all__ = ["FLAGSHIP_BUGS", *FLAGSHIP_BUGS]
