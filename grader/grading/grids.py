"""The attention weights a student's answer gives beside the expected ones, for pictures in reports.

Problems whose answer holds weights (scaled dot-product and multi-head attention return
`(output, weights)`; a designed head's W_Q and W_K make a pattern) get small grids of plain
numbers: the student's weights and the expected ones, rows = queries, columns = keys. Only
public cases get them (the caller decides), and only when the student's weights have the
expected shape; weights that are nan or inf are kept as they are (the reports mark those
cells: they are often the bug). Grids are cut to MAX_SIDE rows and columns and MAX_GRIDS heads.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..course.functions import ReturnKind
from ..course.model import CompareKind, Problem
from .checks import as_array
from .results import WeightGrid

__all__ = ["MAX_SIDE", "MAX_GRIDS", "weight_grids", "target_pattern"]

MAX_SIDE = 8    # rows and columns shown of one grid
MAX_GRIDS = 4   # heads shown of a multi-head answer


def target_pattern(pattern: str | None, seq_len: int) -> np.ndarray:
    """The ideal weights of a designed head: all on the previous position (query 0 has only
    itself) or all on position 0 (the sink)."""
    target = np.zeros((seq_len, seq_len))
    columns = np.maximum(np.arange(seq_len) - 1, 0) if pattern == "previous" else np.zeros(seq_len, dtype=int)
    target[np.arange(seq_len), columns] = 1.0
    return target


def _rows(a: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(round(float(x), 3) for x in row[:MAX_SIDE]) for row in a[:MAX_SIDE])


def _pairs(got: np.ndarray, expected: np.ndarray) -> tuple[WeightGrid, ...]:
    if got.shape != expected.shape or got.ndim < 2:
        return ()
    shape = (int(expected.shape[-2]), int(expected.shape[-1]))
    if got.ndim == 2:
        return (WeightGrid("", _rows(got), _rows(expected), shape),)
    got, expected = got.reshape(-1, *shape), expected.reshape(-1, *shape)  # (heads, n, m); a batch folds in
    label = "head" if len(got) <= 16 else "slice"
    return tuple(WeightGrid(f"{label} {k + 1}", _rows(g), _rows(e), shape)  # heads numbered from 1, as in the lesson
                 for k, (g, e) in enumerate(zip(got[:MAX_GRIDS], expected[:MAX_GRIDS])))


def weight_grids(problem: Problem, expected: Any, got: Any) -> tuple[WeightGrid, ...]:
    """The grids of one answer (empty when the problem returns no weights or the answer's
    weights cannot be drawn). Never raises: a picture is never worth a lost result."""
    fn = problem.function
    try:
        if fn.returns is ReturnKind.ARRAY_PAIR and "weights" in fn.outputs:
            if not isinstance(got, (tuple, list)) or len(got) != len(fn.outputs):
                return ()
            k = fn.outputs.index("weights")
            arr = as_array(got[k])
            return () if arr is None else _pairs(arr, np.asarray(expected[k], dtype=np.float64))
        if fn.returns is ReturnKind.HEAD and problem.compare.kind is CompareKind.HEAD_PATTERN:
            from .head_pattern import head_weights
            seq_len = int(expected)
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                return ()
            mats = [as_array(m) for m in got]
            if any(m is None or m.shape != (seq_len, seq_len) for m in mats):
                return ()
            with np.errstate(all="ignore"):
                weights = head_weights(seq_len, *mats)
            return _pairs(weights, target_pattern(problem.compare.pattern, seq_len))
    except Exception:  # an odd answer: no picture, the verdict still says what is wrong
        return ()
    return ()
