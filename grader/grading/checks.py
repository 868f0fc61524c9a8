"""Comparisons of a student's answer with the expected one: cheapest check first, no I/O.

Each check returns a Verdict: whether it passed, the kind of failure (safe to show for hidden
cases) and a detail with expected versus got (shown for public cases only).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..course.model import CompareKind, Comparison
from ..records import record
from ..sandbox.codec import Opaque
from .results import RETURNED_NONE

__all__ = ["Verdict", "check", "check_form", "describe", "as_array", "FORM_FAILURES", "RETURNED_NONE", "wrong_form"]

# the kinds of failure a check finds before looking at any value: the answer is not of the
# form the case expects (a tuple of two arrays of the case's shape, a dict with given keys)
FORM_FAILURES = ("wrong type", "wrong shape", "missing key")


def wrong_form(kind: str) -> bool:
    """Whether a failure kind ("wrong shape", "W_Q: wrong shape", "head 0: W_Q: wrong type")
    says the answer is not of the expected form."""
    return kind == RETURNED_NONE or kind.rsplit(": ", 1)[-1] in FORM_FAILURES


@record
class Verdict:
    passed: bool
    kind: str = ""     # e.g. "wrong shape"; never contains expected values
    detail: str = ""   # expected vs got; public cases only

    @classmethod
    def ok(cls) -> Verdict:
        return _OK if cls is Verdict else cls(True)  # immutable: one is enough


_OK = Verdict(True)


def describe(value: Any) -> str:
    """A short, safe description of a student's value."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, Opaque):
        return f"an object of type {value.type_name}"
    if value is None:
        return "None"
    if isinstance(value, bool):
        return f"the bool {value}"
    if isinstance(value, (int, float)):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of length {len(value)}"
    return type(value).__name__


def as_array(value: Any) -> np.ndarray | None:
    """A float64 array from an ndarray, a (nested) list/tuple of numbers, or a number."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float64) if value.dtype.kind in "iuf" else None
    if isinstance(value, bool) or isinstance(value, (str, dict, Opaque)) or value is None:
        return None
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    return arr


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _index(idx: Sequence[Any]) -> str:  # Python or numpy integers
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def compare_arrays(expected: np.ndarray, got: Any, rtol: float, atol: float) -> Verdict:
    arr = as_array(got)
    if arr is None:
        return Verdict(False, "wrong type", f"expected an array of shape {expected.shape}, got {describe(got)}")
    if arr.shape != expected.shape:
        return Verdict(False, "wrong shape", f"expected shape {expected.shape}, got shape {arr.shape}")
    with np.errstate(all="ignore"):  # the usual case, decided without np.isclose's overhead: all finite and close
        if (np.abs(arr - expected) <= atol + rtol * np.abs(expected)).all():
            return Verdict.ok()
    bad = ~np.isfinite(arr) & np.isfinite(expected)
    if bad.any():
        idx = np.unravel_index(int(np.argmax(bad)), arr.shape) if arr.ndim else ()
        return Verdict(False, "not finite",
                       f"{int(bad.sum())} element(s) are nan or inf, first at {_index(idx)}: got {arr[idx]}, "
                       f"expected {_fmt(expected[idx])}")
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(arr, expected, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            return Verdict.ok()
        excess = np.where(close, -np.inf, np.abs(arr - expected) - (atol + rtol * np.abs(expected)))
    idx = np.unravel_index(int(np.argmax(excess)), arr.shape) if arr.ndim else ()
    where = f" at {_index(idx)}" if arr.ndim else ""
    return Verdict(False, "wrong values",
                   f"{int((~close).sum())} of {close.size} element(s) differ; worst{where}: "
                   f"got {_fmt(arr[idx])}, expected {_fmt(expected[idx])}")


def _check_allclose(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str]) -> Verdict:
    if not parts:
        return compare_arrays(np.asarray(expected, dtype=np.float64), got, cmp.rtol, cmp.atol)
    if not isinstance(got, (tuple, list)) or len(got) != len(parts):
        return Verdict(False, "wrong type",
                       f"expected a tuple ({', '.join(parts)}), got {describe(got)}")
    verdicts = [compare_arrays(np.asarray(exp, dtype=np.float64), value, cmp.rtol, cmp.atol)
                for exp, value in zip(expected, got)]
    wrong = [k for k, v in enumerate(verdicts) if not v.passed]
    if not wrong:
        return Verdict.ok()
    name, verdict = parts[wrong[0]], verdicts[wrong[0]]
    right = [parts[k] for k in range(len(parts)) if k not in wrong]
    # e.g. the weights right and the output wrong: the mistake is in what comes after the weights
    also = f" ({' and '.join(right)} right)" if right else ""
    return Verdict(False, f"{name}: {verdict.kind}", f"{name}: {verdict.detail}{also}")


def as_int(value: Any) -> int | None:
    """An int from an int, a numpy integer (decoded as int) or an integral float."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        return int(value)
    return None


def _check_equal(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str]) -> Verdict:
    number = as_int(got)
    if number is None:
        return Verdict(False, "wrong type", f"expected an int, got {describe(got)}")
    if number != int(expected):
        return Verdict(False, "wrong value", f"got {number}, expected {int(expected)}")
    return Verdict.ok()


def as_shape(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        sizes = [as_int(v) for v in value]
        known = [s for s in sizes if s is not None]
        if len(known) == len(sizes):
            return tuple(known)
    return None


def _check_shapes(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str]) -> Verdict:
    if not isinstance(got, dict):
        return Verdict(False, "wrong type", f"expected a dict with keys {', '.join(expected)}, got {describe(got)}")
    for key, shape in expected.items():
        if key not in got:
            return Verdict(False, "missing key", f"the dict has no key {key!r}")
        observed = as_shape(got[key])
        if observed is None:
            return Verdict(False, f"{key}: wrong type", f"{key}: expected a tuple of ints, got {describe(got[key])}")
        if observed != tuple(shape):
            # the expected shape is the answer itself: it is never shown, even for a public case
            return Verdict(False, f"{key}: wrong shape",
                           f"{key}: got {observed}, which is not the shape of {key} in this layer; "
                           f"name every axis (batch, heads, queries, keys, width) and check each")
    return Verdict.ok()


def _check_head(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str]) -> Verdict:
    """`expected` is seq_len; the weights are computed by the reference from the student's matrices."""
    from .head_pattern import head_weights

    seq_len = int(expected)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return Verdict(False, "wrong type", f"expected a tuple (W_Q, W_K), got {describe(got)}")
    mats = []
    for name, value in zip(("W_Q", "W_K"), got):
        arr = as_array(value)
        if arr is None or arr.shape != (seq_len, seq_len):
            shown = describe(value) if arr is None else f"shape {arr.shape}"
            return Verdict(False, f"{name}: wrong shape", f"{name}: expected shape ({seq_len}, {seq_len}), got {shown}")
        if not np.isfinite(arr).all():
            return Verdict(False, f"{name}: not finite", f"{name} contains nan or inf")
        mats.append(arr)
    with np.errstate(all="ignore"):
        weights = head_weights(seq_len, *mats)
    if not np.isfinite(weights).all():
        return Verdict(False, "not finite", "the attention weights these matrices give contain nan")
    target = (np.arange(seq_len) - 1) if cmp.pattern == "previous" else np.zeros(seq_len, dtype=int)
    rows = range(1, seq_len) if cmp.pattern == "previous" else range(seq_len)
    for i in rows:
        got_weight = weights[i, target[i]]
        if got_weight < cmp.min_weight:
            row = np.array2string(weights[i, : i + 1], precision=2, suppress_small=True, separator=", ")
            others = np.delete(weights[i, : i + 1], target[i])
            best = int(np.argmax(weights[i, : i + 1]))
            if others.size and got_weight > others.max() + 1e-6:
                kind, why = "pattern too weak", f"position {target[i]} gets the most weight, but too little"
            elif others.size and got_weight >= others.max() - 1e-6:
                kind, why = "no position preferred", f"position {target[i]} gets no more weight than the others"
            else:
                kind, why = "weight on the wrong position", f"position {best} gets more weight than position {target[i]}"
            return Verdict(False, kind,
                           f"query {i} puts {got_weight:.3f} on position {target[i]} (needs >= {cmp.min_weight:g}): "
                           f"{why}; its attention row over positions 0..{i} is {row}")
    return Verdict.ok()


_CHECKS: dict[CompareKind, Callable[[Comparison, Any, Any, Sequence[str]], Verdict]] = {
    CompareKind.ALLCLOSE: _check_allclose,
    CompareKind.EQUAL: _check_equal,
    CompareKind.SHAPES: _check_shapes,
    CompareKind.HEAD_PATTERN: _check_head,
}


def check(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str] = ()) -> Verdict:
    """Compare `got` (decoded plain data) with `expected` (computed by the reference)."""
    if got is None:
        return Verdict(False, RETURNED_NONE, "the function returned None: does it end with `return` and the answer?")
    return _CHECKS[cmp.kind](cmp, expected, got, parts)


def check_form(cmp: Comparison, form: dict, got: Any, parts: Sequence[str] = ()) -> Verdict:
    """Whether `got` has the `form` (seed_cases.form_of) of an answer whose value is not known
    here (a withheld case of the student bundle): its type and the shape of each array, the
    keys of a dict of shapes and that each holds a tuple of ints; never a value. The failures
    are those `check` finds first, worded alike."""
    if got is None:
        return Verdict(False, RETURNED_NONE, "the function returned None: does it end with `return` and the answer?")
    if cmp.kind is CompareKind.EQUAL and as_int(got) is None:
        return Verdict(False, "wrong type", f"expected an int, got {describe(got)}")
    if cmp.kind is CompareKind.SHAPES:
        keys = form.get("keys", ())
        if not isinstance(got, dict):
            return Verdict(False, "wrong type", f"expected a dict with keys {', '.join(keys)}, got {describe(got)}")
        for key in keys:
            if key not in got:
                return Verdict(False, "missing key", f"the dict has no key {key!r}")
            if as_shape(got[key]) is None:
                return Verdict(False, f"{key}: wrong type", f"{key}: expected a tuple of ints, got {describe(got[key])}")
    if cmp.kind is CompareKind.ALLCLOSE:
        shapes = [tuple(s) for s in form.get("arrays", ())]
        if parts and (not isinstance(got, (tuple, list)) or len(got) != len(parts)):
            return Verdict(False, "wrong type", f"expected a tuple ({', '.join(parts)}), got {describe(got)}")
        for name, shape, value in zip(parts or ("",), shapes, got if parts else (got,)):
            arr, said = as_array(value), f"{name}: " if name else ""
            if arr is None:
                return Verdict(False, f"{said}wrong type", f"{said}expected an array of shape {shape}, got {describe(value)}")
            if arr.shape != shape:
                return Verdict(False, f"{said}wrong shape", f"{said}expected shape {shape}, got shape {arr.shape}")
    return Verdict.ok()


# --- a designed two-head layer (two_head_layer): head 0 previous-token, head 1 sink ----------

PAIR_TARGETS = (("head 1 (previous-token)", "previous"), ("head 2 (sink)", "sink"))  # numbered as in the lesson


def _check_head_pair(cmp: Comparison, expected: Any, got: Any, parts: Sequence[str]) -> Verdict:
    """`expected` is seq_len; the matrices are (seq_len, 2*seq_len) and each head's block of
    columns is judged as a designed head of its own (its own softmax, scaled by its own width)."""
    seq_len = int(expected)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return Verdict(False, "wrong type", f"expected a tuple (W_Q, W_K), got {describe(got)}")
    arrays = [as_array(value) for value in got]
    for name, value, arr in zip(("W_Q", "W_K"), got, arrays):
        if arr is None or arr.shape != (seq_len, 2 * seq_len):
            shown = describe(value) if arr is None else f"shape {arr.shape}"
            return Verdict(False, f"{name}: wrong shape", f"{name}: expected shape ({seq_len}, {2 * seq_len}), got {shown}")
    w_q, w_k = arrays[0], arrays[1]
    assert w_q is not None and w_k is not None  # both checked above
    for head, (label, pattern) in enumerate(PAIR_TARGETS):
        block = slice(head * seq_len, (head + 1) * seq_len)
        verdict = _check_head(replace(cmp, pattern=pattern), seq_len, (w_q[:, block], w_k[:, block]), parts)
        if not verdict.passed:
            return Verdict(False, f"head {head + 1}: {verdict.kind}", f"{label}: {verdict.detail}")
    return Verdict.ok()


_CHECKS[CompareKind.HEAD_PAIR] = _check_head_pair
