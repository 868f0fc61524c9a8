"""Known-wrong answers: each one is a misconception a student may hold.

A problem file names one under `mistakes:` (key `bug`, or `detector` for a predicate of
detectors.py). When a problem fails, the grader weighs each named mistake against all its cases
together (grader/grading/diagnosis.py):

- a **bug** (key `bug`) has the signature of the function it imitates and computes the
  wrong answer; it explains an answer that matches it, on a case where it differs from the
  right one (it raises on inputs where the mistake cannot be told apart, e.g. averaged heads
  when there is one head);
- a **detector** (key `detector`, detectors.py) is a predicate `(args, got) -> bool` for mistakes that are
  easier to recognize in the answer than to reproduce, such as a designed head that looks at
  the wrong position.

Inputs are float64 ndarrays (masks are bool), exactly as the student receives them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import reference as ref

BUGS: dict[str, Callable] = {}  # the flagship problems' own are in mistakes_flagship.py


def bug(fn: Callable) -> Callable:
    """Register a bug (a known-wrong implementation) under its function name."""
    BUGS[fn.__name__] = fn
    return fn


variant = bug  # the decorator's older name, kept for course code that imports it



# --- softmax ---------------------------------------------------------------------------------

@bug
def softmax_over_first_axis(scores):
    """Normalizes down each column (axis 0) instead of along each row."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


@bug
def softmax_without_max(scores):
    """exp() of the raw scores: overflows to inf, and inf / inf is nan, once a score passes ~709."""
    e = np.exp(np.asarray(scores, dtype=np.float64))
    return e / e.sum(axis=-1, keepdims=True)


@bug
def softmax_whole_array_sum(scores):
    """Divides by the sum over the whole array, so the rows together (not each row) sum to 1."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


# --- scaled dot-product attention ------------------------------------------------------------

def _read(scores, V, mask=None):
    """The correct rest of attention: mask (True = may attend), softmax each row, read values."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = ref.softmax(scores)
    return weights @ V, weights


def _scaled(Q, K):
    return Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])


@bug
def attention_unscaled(Q, K, V, mask=None):
    """Raw dot products: no 1/sqrt(d_k)."""
    return _read(Q @ K.T, V, mask)


@bug
def attention_divided_by_d_k(Q, K, V, mask=None):
    """Divides the scores by d_k instead of sqrt(d_k)."""
    return _read(Q @ K.T / Q.shape[-1], V, mask)


@bug
def attention_divided_by_sqrt_d_v(Q, K, V, mask=None):
    """Takes the width to scale by from the values instead of the queries and keys."""
    return _read(Q @ K.T / math.sqrt(V.shape[-1]), V, mask)


@bug
def attention_softmax_over_queries(Q, K, V, mask=None):
    """Normalizes each key's column of scores instead of each query's row."""
    scores = _scaled(Q, K) if mask is None else np.where(mask, _scaled(Q, K), -np.inf)
    weights = ref.softmax(scores.T).T  # (n, m), columns sum to 1
    return weights @ V, weights


@bug
def attention_mask_after_softmax(Q, K, V, mask=None):
    """Zeroes the masked weights after the softmax, so the rows no longer sum to 1."""
    weights = ref.softmax(_scaled(Q, K))
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights @ V, weights


@bug
def attention_mask_inverted(Q, K, V, mask=None):
    """Reads True as 'hidden' instead of 'may attend'."""
    return _read(_scaled(Q, K), V, None if mask is None else ~mask)


@bug
def attention_mask_ignored(Q, K, V, mask=None):
    """Accepts the mask and never uses it."""
    return _read(_scaled(Q, K), V)


# --- heads -----------------------------------------------------------------------------------

@bug
def split_heads_reshape_only(X, num_heads):
    """Reshapes (n, d_model) straight to (h, n, d_k): 'heads' cut across positions."""
    n, d_model = X.shape
    return X.reshape(num_heads, n, d_model // num_heads)


@bug
def merge_heads_reshape_only(H):
    """Reshapes (h, n, d) straight to (n, h * d): rows mix values of different positions."""
    h, n, d_head = H.shape
    return H.reshape(n, h * d_head)


@bug
def mha_scaled_by_sqrt_d_model(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Scales every head's scores by sqrt(d_model) instead of its own width sqrt(d_k)."""
    q, k, v = (ref.split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))  # (h, n, d_k)
    heads, weights = _read(q @ k.transpose(0, 2, 1) / math.sqrt(X.shape[1]), v, mask)
    return ref.merge_heads(heads) @ W_O, weights


@bug
def mha_without_output_projection(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Returns the concatenated heads: W_O never applied (the identity in its place)."""
    return ref.multi_head_attention(X, W_Q, W_K, W_V, np.eye(X.shape[1]), num_heads, mask)


def _several_heads(num_heads: int) -> None:
    """With one head, one wide head and averaged heads are the right computation with the head
    axis dropped: neither mistake can be told apart there, so it names nothing."""
    if num_heads < 2:
        raise ValueError("indistinguishable with one head")


@bug
def mha_one_wide_head(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Runs one head over the full width and returns its single (n, n) pattern."""
    _several_heads(num_heads)
    output, weights = ref.multi_head_attention(X, W_Q, W_K, W_V, W_O, 1, mask)
    return output, weights[0]


@bug
def mha_weights_averaged(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Returns the mean of the heads' patterns, shape (n, n), instead of each head's own."""
    _several_heads(num_heads)
    output, weights = ref.multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask)
    return output, weights.mean(axis=0)


# --- parameter counts ------------------------------------------------------------------------

def _matrix(d_model: int, bias: bool) -> int:
    """Parameters of one d_model x d_model projection and its bias."""
    return d_model * d_model + (d_model if bias else 0)


@bug
def parameter_count_without_output_projection(d_model, num_heads, bias=True):
    """Counts W_Q, W_K, W_V (and their biases) but not W_O."""
    return 3 * _matrix(d_model, bias)


@bug
def parameter_count_without_biases(d_model, num_heads, bias=True):
    """Counts the four weight matrices and never the biases."""
    return 4 * _matrix(d_model, bias=False)


# --- diagnoses of bugs found in real submissions ---------------------------------------------

@bug
def softmax_global_max(scores):
    """Subtracts the largest score of the whole array (no axis): a row far below it underflows, 0 / 0."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)


def _heads(X, W_Q, W_K, W_V, num_heads, split=ref.split_heads):
    return (split(X @ W, num_heads) for W in (W_Q, W_K, W_V))  # each (h, n, d_k)


def _reshape_split(X, num_heads):
    n, d_model = X.shape
    return X.reshape(num_heads, n, d_model // num_heads)  # (h, n, d_k) in memory order: no transpose


@bug
def mha_split_without_transpose(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Splits the projections by reshaping (n, d_model) straight to (h, n, d_k)."""
    q, k, v = _heads(X, W_Q, W_K, W_V, num_heads, split=_reshape_split)
    heads, weights = _read(q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1]), v, mask)
    return ref.merge_heads(heads) @ W_O, weights


@bug
def mha_softmax_shared_across_heads(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """One softmax per query over every head's keys together: the heads share one budget."""
    q, k, v = _heads(X, W_Q, W_K, W_V, num_heads)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])      # (h, n, n)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    h, n, m = scores.shape
    joint = ref.softmax(scores.transpose(1, 0, 2).reshape(n, h * m))  # (n, h * m): one row per query
    weights = joint.reshape(n, h, m).transpose(1, 0, 2)               # (h, n, m), rows sum to < 1
    return ref.merge_heads(weights @ v) @ W_O, weights


# --- bugs found in real submissions: softmax --------------------------------------------------

@bug
def softmax_global_max_first_axis(scores):
    """A much-copied answer: subtracts the largest score of the whole array, then normalizes down
    each column (axis 0). A row far below the largest score underflows to 0 / 0 = nan."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=0)


# --- scaled dot-product attention ------------------------------------------------------------

@bug
def attention_scaled_by_sqrt_queries(Q, K, V, mask=None):
    """Divides the scores by the square root of the number of queries (Q.shape[0]) instead of d_k."""
    return _read(Q @ K.T / math.sqrt(Q.shape[0]), V, mask)


@bug
def attention_scaled_by_sqrt_keys(Q, K, V, mask=None):
    """Divides the scores by the square root of the number of keys (K.shape[0]) instead of d_k."""
    return _read(Q @ K.T / math.sqrt(K.shape[0]), V, mask)


@bug
def attention_mask_after_softmax_inf(Q, K, V, mask=None):
    """Sets the masked weights to -inf after the softmax: the weights hold -inf, the output nan or inf."""
    weights = ref.softmax(_scaled(Q, K))
    if mask is None:
        raise ValueError("the mistake does not apply: no mask")
    weights = np.where(mask, weights, -np.inf)
    return weights @ V, weights


@bug
def attention_weights_scaled(Q, K, V, mask=None):
    """Takes the softmax of the raw scores, then divides the weights by sqrt(d_k)."""
    output, weights = _read(Q @ K.T, V, mask)
    weights = weights / math.sqrt(Q.shape[-1])
    return weights @ V, weights


# --- heads -----------------------------------------------------------------------------------

@bug
def split_heads_no_transpose(X, num_heads):
    """Reshapes (n, d_model) to (n, h, d_k) and stops: the head axis is not moved to the front."""
    n, d_model = X.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError("the mistake does not apply: not divisible")
    return X.reshape(n, num_heads, d_model // num_heads)


def _mha(X, W_Q, W_K, W_V, W_O, num_heads, mask=None, *, merge=ref.merge_heads, use_mask=True,
         project=None):
    """Multi-head attention with one step swapped: `merge` joins the heads, `project(X, W)` makes
    one projection's heads (h, n, d_k); `use_mask` False leaves the mask out."""
    project = project or (lambda x, w: ref.split_heads(x @ w, num_heads))
    q, k, v = (project(X, W) for W in (W_Q, W_K, W_V))                  # (h, n, d_k)
    heads, weights = _read(q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1]), v,
                           mask if use_mask else None)
    return merge(heads) @ W_O, weights


@bug
def mha_transpose_3d(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Uses K.T on the (h, n, d_k) keys: .T reverses every axis, giving (d_k, n, h), so the scores
    are not Q K^T per head (numpy raises unless the sizes happen to line up)."""
    q, k, v = (ref.split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))  # (h, n, d_k)
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if scores.shape != (num_heads, X.shape[0], X.shape[0]):
        raise ValueError("the mistake does not apply: the scores have no (h, n, n) shape")
    heads, weights = _read(scores, v, mask)
    return ref.merge_heads(heads) @ W_O, weights


@bug
def mha_input_split(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Splits the input X into heads before projecting: head i reads only its own d_k columns of X
    (through the matching d_k x d_k block of each W), instead of all of X."""
    _several_heads(num_heads)
    d_model = X.shape[1]
    d_k = d_model // num_heads

    def project(x, w):
        blocks = [x[:, i * d_k:(i + 1) * d_k] @ w[i * d_k:(i + 1) * d_k, i * d_k:(i + 1) * d_k]
                  for i in range(num_heads)]
        return np.stack(blocks)                                              # (h, n, d_k)
    return _mha(X, W_Q, W_K, W_V, W_O, num_heads, mask, project=project)


@bug
def mha_merge_without_transpose(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Joins the heads by reshaping (h, n, d_k) straight to (n, d_model): the weights are right,
    the output mixes positions."""
    _several_heads(num_heads)
    return _mha(X, W_Q, W_K, W_V, W_O, num_heads, mask, merge=lambda H: H.reshape(H.shape[1], -1))


@bug
def mha_mask_ignored(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Accepts the mask and never applies it."""
    if mask is None:
        raise ValueError("the mistake does not apply: no mask")
    return _mha(X, W_Q, W_K, W_V, W_O, num_heads, mask, use_mask=False)


@bug
def mha_weights_scaled_by_d_model(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Takes each head's softmax of the raw scores, then divides the weights by sqrt(d_model): the
    scale lands after the softmax (rows no longer sum to 1) and uses the model's width."""
    q, k, v = (ref.split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))  # (h, n, d_k)
    _, weights = _read(q @ k.transpose(0, 2, 1), v, mask)                    # (h, n, n)
    weights = weights / math.sqrt(X.shape[1])
    return ref.merge_heads(weights @ v) @ W_O, weights


@bug
def split_heads_batched_reshape_first(X, num_heads):
    """A batched tutorial's split on one sequence: reshape to (1, h, n, d_k) first, then swap the
    head and position axes, giving (1, n, h, d_k), numbers cut across positions."""
    n, d_model = X.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError("the mistake does not apply: not divisible")
    return X.reshape(1, num_heads, n, d_model // num_heads).transpose(0, 2, 1, 3)


# --- multi-head attention as steps: two bugs of different steps compose ----------------------
#
# A student's layer can get two steps wrong at once (every head scaled by sqrt(d_model) *and* the
# heads merged without the transpose); no one bug matches it. Each bug below that changes one
# step of the layer says which (`steps`), and `combine_bugs` runs the layer with both changes:
# the grader tries those pairs when no single mistake explains a problem's failures.

def _scale_d_model(d_k: int, d_model: int) -> float:
    return math.sqrt(d_model)


def _softmax_over_queries(scores):
    return np.swapaxes(ref.softmax(np.swapaxes(scores, -1, -2)), -1, -2)  # each key's column sums to 1


def _merge_reshape(H):
    return H.reshape(H.shape[1], -1)  # (h, n, d) straight to (n, h * d): no transpose


STEPS: dict[str, dict[str, Any]] = {  # bug -> the steps it does differently (see run_steps)
    "mha_scaled_by_sqrt_d_model": {"scale": _scale_d_model},
    "mha_without_output_projection": {"project": False},
    "mha_split_without_transpose": {"split": _reshape_split},
    "mha_merge_without_transpose": {"merge": _merge_reshape},
    "mha_mask_ignored": {"use_mask": False},
    "mha_softmax_over_queries": {"softmax": _softmax_over_queries},
}


def run_steps(X, W_Q, W_K, W_V, W_O, num_heads, mask=None, *, split=ref.split_heads, scale=None,
              use_mask=True, softmax=ref.softmax, merge=ref.merge_heads, project=True):
    """Multi-head attention step by step, any step replaceable: split the projections into heads,
    divide the scores by `scale(d_k, d_model)` (default sqrt(d_k)), mask, softmax, read, merge,
    project with W_O."""
    q, k, v = (split(X @ W, num_heads) for W in (W_Q, W_K, W_V))           # (h, n, d_k)
    d_k, d_model = q.shape[-1], X.shape[1]
    scores = q @ k.transpose(0, 2, 1) / (math.sqrt(d_k) if scale is None else scale(d_k, d_model))
    if mask is not None and use_mask:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)                                               # (h, n, n)
    merged = merge(weights @ v)                                             # (n, d_model)
    return (merged @ W_O if project else merged), weights


def combine_bugs(first: Callable, second: Callable) -> Callable | None:
    """The layer with both bugs' steps done their way, or None when they are not two different
    steps of it (the grader's hook for two mistakes at once)."""
    a, b = STEPS.get(getattr(first, "__name__", "")), STEPS.get(getattr(second, "__name__", ""))
    if a is None or b is None or set(a) & set(b):
        return None
    steps: dict[str, Any] = {**a, **b}
    several = "merge" in steps

    # a mask left out changes nothing where no mask is given: there the pair is the other bug alone
    def both(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
        if several:
            _several_heads(num_heads)  # with one head the merge has nothing to interleave
        return run_steps(X, W_Q, W_K, W_V, W_O, num_heads, mask, **steps)
    both.__name__ = f"{first.__name__}+{second.__name__}"
    return both


@bug
def mha_softmax_over_queries(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Normalizes each head's scores over the queries (axis -2) instead of over the keys: each key's
    column of weights sums to 1, no query's row does."""
    return run_steps(X, W_Q, W_K, W_V, W_O, num_heads, mask, softmax=_softmax_over_queries)


# --- PyTorch's layout --------------------------------------------------------------------------

def _torch_blocks(in_proj_weight, in_proj_bias):
    w_in, b_in = np.asarray(in_proj_weight, dtype=np.float64), np.asarray(in_proj_bias, dtype=np.float64)
    E = w_in.shape[1]
    return [w_in[i * E:(i + 1) * E] for i in range(3)], [b_in[i * E:(i + 1) * E] for i in range(3)]


@bug
def torch_layout_not_transposed(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """Takes each stacked block and out_proj.weight as stored, as if PyTorch computed x A, not x A^T."""
    (w_q, w_k, w_v), (b_q, b_k, b_v) = _torch_blocks(in_proj_weight, in_proj_bias)
    return w_q, w_k, w_v, np.asarray(out_proj_weight, dtype=np.float64), b_q, b_k, b_v, out_proj_bias


@bug
def torch_layout_out_proj_not_transposed(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """Transposes the input projections but keeps out_proj.weight as stored."""
    (w_q, w_k, w_v), (b_q, b_k, b_v) = _torch_blocks(in_proj_weight, in_proj_bias)
    return w_q.T, w_k.T, w_v.T, np.asarray(out_proj_weight, dtype=np.float64), b_q, b_k, b_v, out_proj_bias


@bug
def torch_layout_interleaved_rows(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """Reads the stack as interleaved, row 3r + 0/1/2 for query/key/value, instead of three blocks."""
    w_in, b_in = np.asarray(in_proj_weight, dtype=np.float64), np.asarray(in_proj_bias, dtype=np.float64)
    E = w_in.shape[1]
    rows, biases = w_in.reshape(E, 3, E), b_in.reshape(E, 3)             # (E, 3, E): every third row
    return (rows[:, 0].T, rows[:, 1].T, rows[:, 2].T, np.asarray(out_proj_weight, dtype=np.float64).T,
            biases[:, 0], biases[:, 1], biases[:, 2], out_proj_bias)


# each by name, for course.py
__all__ = ["BUGS", "STEPS", "bug", "combine_bugs", "run_steps", "variant", *BUGS]  # variant: bug's older name
