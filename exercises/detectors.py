"""Detectors: predicates `(args, got) -> bool` for mistakes easier to recognize in an answer
than to reproduce, such as a designed head that looks at the wrong position.

A problem file names one with `detector:` under `mistakes:`; the grader calls it with the case's
arguments and the student's answer (course code: it runs in the grader, never in a student bundle).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from grader.grading.head_pattern import head_weights, pair_head_weights

from . import reference as ref

DETECTORS: dict[str, Callable[[tuple, Any], bool]] = {}


def detector(fn: Callable[[tuple, Any], bool]) -> Callable[[tuple, Any], bool]:
    """Register a predicate (args, got) -> bool under its function name."""
    DETECTORS[fn.__name__] = fn
    return fn


# --- designed heads --------------------------------------------------------------------------

def _head_weights(args: tuple, got: Any) -> np.ndarray:
    """The (seq_len, seq_len) pattern the student's (W_Q, W_K) make in the graded setting."""
    W_Q, W_K = (np.asarray(m, dtype=np.float64) for m in got)
    return head_weights(args[0], W_Q, W_K)


def _favours(weights: np.ndarray, rows: np.ndarray, targets: np.ndarray) -> bool:
    """Each row gives its target clearly more weight than any other position."""
    if rows.size == 0:
        return False
    picked = weights[rows, targets]
    others = weights[rows].copy()
    others[np.arange(rows.size), targets] = -np.inf
    return bool((picked > others.max(axis=1) + 1e-6).all())


@detector
def head_attends_to_itself(args, got) -> bool:
    """Every query from position 1 on puts most of its weight on its own position."""
    weights = _head_weights(args, got)
    rows = np.arange(1, len(weights))
    return _favours(weights, rows, rows)


@detector
def previous_head_too_soft(args, got) -> bool:
    """Every query favours the previous position, yet some query gives it too little weight."""
    weights = _head_weights(args, got)
    rows = np.arange(1, len(weights))
    return _favours(weights, rows, rows - 1)


@detector
def sink_head_too_soft(args, got) -> bool:
    """Every query favours position 0, yet some query gives it too little weight."""
    weights = _head_weights(args, got)
    rows = np.arange(1, len(weights))
    return _favours(weights, rows, np.zeros_like(rows))


# --- diagnoses of bugs found in real submissions ---------------------------------------------

@detector
def head_attends_to_next(args, got) -> bool:
    """Every query's best-matching key is the next position, which the causal mask hides (for
    example W_K = np.eye(T, k=-1)): the visible scores are all equal and each row is uniform."""
    W_Q, W_K = (np.asarray(m, dtype=np.float64) for m in got)
    scores = W_Q @ W_K.T  # (query, key), before the mask
    rows = np.arange(len(scores) - 1)
    return bool(rows.size) and _favours(scores, rows, rows + 1)


@detector
def parameter_count_grows_with_heads(args, got) -> bool:
    """A count that gives three or all four projections a full d_model x d_model matrix per head
    (biases per head or shared): any count of that family, which grows with the number of heads."""
    d, h = int(args[0]), int(args[1])
    bias = bool(args[2]) if len(args) > 2 else True
    if h < 2 or isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)):
        return False
    counts = set()
    for per_head in (3, 4):
        weights = per_head * h * d * d + (4 - per_head) * d * d
        counts.update({weights + 4 * d, weights + per_head * h * d + (4 - per_head) * d} if bias else {weights})
    return got in counts


# --- multi-head attention: one pattern copied into every head ---------------------------------

def _every_head(args: tuple, got: Any, pattern: np.ndarray) -> bool:
    """The answer's weights are (h, n, n) with h >= 2 and every head holds `pattern` (n, n)."""
    num_heads = int(args[5])
    weights = np.asarray(got[1], dtype=np.float64)
    if num_heads < 2 or weights.shape != (num_heads, *pattern.shape):
        return False
    return bool(np.allclose(weights, pattern[None], rtol=1e-6, atol=1e-9))


def _layer(args: tuple, num_heads: int) -> np.ndarray:
    """The right (h, n, n) weights of the layer the case describes, with `num_heads` heads."""
    X, W_Q, W_K, W_V, W_O = (np.asarray(a, dtype=np.float64) for a in args[:5])
    mask = args[6] if len(args) > 6 else None
    return ref.multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask)[1]


@detector
def heads_repeat_one_wide_head(args, got) -> bool:
    """Every head returns the pattern of one head over the full width (one wide head's weights
    repeated, or broadcast, into the (h, n, n) shape)."""
    return _every_head(args, got, _layer(args, 1)[0])


@detector
def heads_repeat_their_average(args, got) -> bool:
    """Every head returns the mean of the right heads' patterns (averaged after a right layer,
    then repeated into the (h, n, n) shape)."""
    return _every_head(args, got, _layer(args, int(args[5])).mean(axis=0))


# --- a designed two-head layer (two_head_layer): head 0 previous-token, head 1 sink ----------

def _pair_weights(args: tuple, got: Any) -> np.ndarray:
    """The (2, seq_len, seq_len) patterns of the student's two heads in the graded setting."""
    W_Q, W_K = (np.asarray(m, dtype=np.float64) for m in got)
    return pair_head_weights(args[0], W_Q, W_K)


def _later_rows(weights: np.ndarray) -> np.ndarray:
    """Queries 2.. : there position i - 1 and position 0 differ, so the two patterns can be told apart."""
    return np.arange(2, weights.shape[-1])


@detector
def pair_heads_swapped(args, got) -> bool:
    """Head 0 favours position 0 and head 1 favours the previous position: the roles in the wrong heads."""
    weights = _pair_weights(args, got)
    rows = _later_rows(weights)
    return _favours(weights[0], rows, np.zeros_like(rows)) and _favours(weights[1], rows, rows - 1)


@detector
def pair_heads_same_pattern(args, got) -> bool:
    """Both heads favour the same position (both previous-token, or both sink)."""
    weights = _pair_weights(args, got)
    rows = _later_rows(weights)
    return any(_favours(weights[0], rows, target) and _favours(weights[1], rows, target)
               for target in (rows - 1, np.zeros_like(rows)))


@detector
def pair_one_head_does_both(args, got) -> bool:
    """One head splits each row between position i - 1 and position 0 (at least 0.25 on each)."""
    weights = _pair_weights(args, got)
    rows = _later_rows(weights)
    if rows.size == 0:
        return False
    return any(bool(((w[rows, rows - 1] >= 0.25) & (w[rows, 0] >= 0.25)).all()) for w in weights)


__all__ = ["DETECTORS", "detector", *DETECTORS]
