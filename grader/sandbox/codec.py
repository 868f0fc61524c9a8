"""The wire format between the grader and the student process, grader side.

Inputs go out as plain JSON (arrays as the base64 of their bytes, with shape and dtype).
Answers come back as tagged plain data made in the student process: numbers, strings, lists,
and arrays as the base64 of their bytes in native order (bool arrays: lists of true/false);
`decode_value` checks every field strictly and builds only None, bool, int, float, str, list,
tuple, dict, ndarray (of an allowed numeric dtype, its size checked against its shape) or
`Opaque`. Nothing is unpickled or evaluated.

Every line the student process sends is checked by `loads_bounded` before any object is built:
its size, how many values it holds, how deeply they nest and how many digits an integer has
(see `Bounds`); a line out of bounds is refused whole, so what a student sends cannot make the
grader recurse, run out of memory or fail. The largest legitimate answer of the shipped
problems is a few kilobytes (an (n, d) float64 array as base64); `ANSWER` allows far more: a
float64 array of about 390,000 numbers, or a nested list of 65,000 numbers.
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records import record
from .student_text import StudentText, one_line, student_text

ALLOWED_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "longdouble", "float128"}
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
MAX_DEPTH = 16
MAX_ELEMENTS = 1 << 21
MAX_DIGITS = 40  # of an integer: int64 has 19; Python's int() refuses 4300 and is slow well before


@record
class Bounds:
    """What one piece of student-made JSON may hold, checked on its bytes before it is parsed."""

    bytes: int
    nodes: int        # values of any kind (an over-estimate: every ',', ':', '[' and '{' counts one)
    depth: int        # nesting of arrays and objects
    digits: int = MAX_DIGITS


# one answer line from the student process: its event, and a returned value as tagged data
# (a float is {"t": "float", "v": 1.5, "type": "float"}: 4 values, so 2**18 values hold a list of
# 65,000 numbers); every memory figure stays in tens of MB, whatever the line holds
ANSWER = Bounds(bytes=4 << 20, nodes=1 << 18, depth=64)


class DecodeError(ValueError):
    """The student process sent something that is not a well-formed answer."""


class _LongNumber(str):
    """An integer written with more digits than allowed: kept as text, never converted."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def _counts(data: bytes) -> tuple[int, int]:
    """(values, opening brackets) of JSON text, structure outside strings only."""
    values = data.count(b",") + data.count(b":") + 1
    opened = data.count(b"[") + data.count(b"{")
    return values + opened, opened


def _depth_within(brackets: bytes, depth: int) -> bool:
    """Whether brackets (only `[]{}` left) nest at most about `depth` deep: each pass removes
    every innermost pair, so `depth` passes empty anything nested up to `depth` (and nothing
    nested deeper than 2 * `depth`)."""
    for _ in range(depth):
        if not brackets:
            return True
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(brackets):
            return False  # unbalanced: not JSON anyway
        brackets = shorter
    return not brackets


def loads_bounded(data: bytes | str, bounds: Bounds, what: str = "the data") -> Any:
    """JSON text parsed only if it is within `bounds` (checked on the text, before any object is
    built); an integer with too many digits becomes its text (a `_LongNumber`), so no number
    conversion can fail or take long. Raises DecodeError saying which bound was passed."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > bounds.bytes:
        raise DecodeError(f"{what} is too large ({len(raw):,} bytes; at most {bounds.bytes:,})")
    nodes, opened = _counts(raw)
    structure = raw
    if nodes > bounds.nodes or opened > bounds.depth:  # count again without the strings' text
        structure = _STRING.sub(b'""', raw)
        nodes, opened = _counts(structure)
    if nodes > bounds.nodes:
        raise DecodeError(f"{what} holds too many values (more than {bounds.nodes:,})")
    if opened > bounds.depth and not _depth_within(structure.translate(None, _NOT_BRACKETS), bounds.depth):
        raise DecodeError(f"{what} is nested too deeply (more than {bounds.depth} levels)")

    try:
        text = raw.decode("utf-8", "surrogatepass")
        return _decoder(bounds.digits).decode(text[1:] if text.startswith("\ufeff") else text)  # a BOM, as json.loads skips it
    except RecursionError:  # only past the bounds, which are far below the recursion limit
        raise DecodeError(f"{what} is nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError included: JSON from the student process is UTF-8
        raise DecodeError(f"{what} is not valid JSON ({str(exc)[:80]})") from None


_DECODERS: dict[int, json.JSONDecoder] = {}


def _decoder(digits: int) -> json.JSONDecoder:
    """A JSON decoder whose integers of more than `digits` digits stay text (made once per bound:
    json.loads with a hook makes a decoder for every line)."""
    known = _DECODERS.get(digits)
    if known is None:
        def integer(text: str) -> int | str:
            return int(text) if len(text.lstrip("-")) <= digits else _LongNumber(text)
        known = _DECODERS[digits] = json.JSONDecoder(parse_int=integer)
    return known


def read_event(line: bytes, bounds: Bounds = ANSWER) -> dict:
    """One line from the student process as an event dict; {"event": "garbled", "why": ...} for
    a line that is out of bounds, not JSON, or not an object."""
    try:
        event = loads_bounded(line, bounds, "the answer")
    except DecodeError as exc:
        return {"event": "garbled", "why": str(exc)}
    return event if isinstance(event, dict) else {"event": "garbled", "why": "the answer is not an object"}


@dataclass(frozen=True)
class Opaque:
    """A returned value the grader cannot compare (an object, a string of the wrong kind...)."""

    type_name: StudentText

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def encode_arg(value: Any) -> Any:
    """One case input as plain JSON for the student process."""
    if isinstance(value, np.ndarray):
        native = value.astype(value.dtype.newbyteorder("="), order="C", copy=False)
        return {"nd": base64.b64encode(native.tobytes()).decode("ascii"), "shape": list(native.shape),
                "dtype": native.dtype.name}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if value is None or isinstance(value, float):
        return value
    raise TypeError(f"cannot send {type(value).__name__} to the student process")


def _float(v: Any) -> float:
    if isinstance(v, str):
        if v not in _FLOATS:
            raise DecodeError(f"bad float {v[:20]!r}")
        return _FLOATS[v]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DecodeError("bad float")
    try:
        return float(v)
    except OverflowError:  # an integer of up to MAX_DIGITS digits always fits; kept for safety
        raise DecodeError("bad float") from None


def _int(v: Any) -> int:
    if not isinstance(v, str) or len(v.lstrip("-")) > MAX_DIGITS:
        raise DecodeError(f"an integer with more than {MAX_DIGITS} digits" if isinstance(v, str) else "bad int")
    try:
        return int(v, 10)
    except ValueError:
        raise DecodeError("bad int") from None


def decode_value(data: Any, depth: int = 0) -> Any:
    """Rebuild a returned value from tagged data; raises DecodeError on anything unexpected."""
    if depth > MAX_DEPTH:
        raise DecodeError("value nested too deeply")
    if not isinstance(data, dict) or not isinstance(data.get("t"), str):
        raise DecodeError("value without a tag")
    tag = data["t"]
    if tag == "none":
        return None
    if tag == "bool":
        if not isinstance(data.get("v"), bool):
            raise DecodeError("bad bool")
        return data["v"]
    if tag == "int":
        return _int(data.get("v"))
    if tag == "float":
        return _float(data.get("v"))
    if tag == "str":
        if not isinstance(data.get("v"), str):
            raise DecodeError("bad str")
        return student_text(data["v"], 200, lines=True)
    if tag in ("list", "tuple"):
        items = data.get("v")
        if not isinstance(items, list) or len(items) > MAX_ELEMENTS:
            raise DecodeError("bad sequence")
        seq = [decode_value(item, depth + 1) for item in items]
        return seq if tag == "list" else tuple(seq)
    if tag == "dict":
        pairs = data.get("v")
        if not isinstance(pairs, list):
            raise DecodeError("bad dict")
        out = {}
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2:
                raise DecodeError("bad dict item")
            key = decode_value(pair[0], depth + 1)
            if not isinstance(key, (str, int, float, bool, type(None), tuple)):
                key = repr(key)
            out[key] = decode_value(pair[1], depth + 1)
        return out
    if tag == "array":
        return _array(data)
    if tag == "object":
        name = data.get("type")
        return Opaque(one_line(name if isinstance(name, str) else "unknown", 80))
    raise DecodeError(f"unknown tag {tag[:20]!r}")


def _array(data: dict) -> np.ndarray:
    dtype, shape, flat = data.get("dtype"), data.get("shape"), data.get("v")
    if dtype not in ALLOWED_DTYPES:
        raise DecodeError(f"unsupported dtype {str(dtype)[:20]!r}")
    if (not isinstance(shape, list) or len(shape) > 32
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_ELEMENTS for s in shape)):
        raise DecodeError("bad shape")  # a side beyond MAX_ELEMENTS: numpy refuses some ([0, 10**39])
    np_dtype = np.dtype(dtype)
    if "b64" in data:
        return _raw_array(data["b64"], np_dtype, shape)
    if not isinstance(flat, list) or len(flat) != math.prod(shape) or len(flat) > MAX_ELEMENTS:
        raise DecodeError("array data does not match its shape")
    kinds = set(map(type, flat))  # JSON gives exactly these types: no subclasses to look through
    if np_dtype.kind == "f":
        values = flat if kinds <= {float, int} else [_float(v) for v in flat]  # "nan", "inf", "-inf"
    elif np_dtype.kind == "b":
        if not kinds <= {bool}:
            raise DecodeError("bad bool array")
        values = flat
    else:
        if not kinds <= {int}:
            raise DecodeError("bad int array")
        values = flat
    try:
        return np.array(values, dtype=np_dtype).reshape(shape)
    except (OverflowError, ValueError, TypeError, MemoryError) as exc:
        raise DecodeError(f"bad array: {str(exc)[:80]}") from None


def _raw_array(text: Any, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    """A numeric array from the base64 of its bytes: exactly as many bytes as its shape needs."""
    size = math.prod(shape)
    if dtype.kind not in "iuf" or size > MAX_ELEMENTS or not isinstance(text, str) \
            or len(text) != 4 * math.ceil(size * dtype.itemsize / 3):
        raise DecodeError("array data does not match its shape")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError("bad array data") from None
    if len(raw) != size * dtype.itemsize:
        raise DecodeError("array data does not match its shape")
    try:
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except (ValueError, TypeError, MemoryError) as exc:  # a shape numpy refuses, whatever its size
        raise DecodeError(f"bad array: {str(exc)[:80]}") from None
