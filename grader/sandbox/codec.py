"""The wire format between the grader and the student process, grader side.

Inputs go out as plain JSON (arrays as the base64 of their bytes, with shape and dtype).
Answers come back as tagged plain data made in the student process: numbers, strings, lists,
and arrays as the base64 of their bytes in native order (bool arrays: lists of true/false);
`decode_value` checks every field strictly and builds only None, bool, int, float, str, list,
tuple, dict, ndarray (of an allowed numeric dtype, its size checked against its shape) or
`Opaque`. Nothing is unpickled or evaluated.
"""
from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

ALLOWED_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "longdouble", "float128"}
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
MAX_DEPTH = 16
MAX_ELEMENTS = 1 << 21


def clean_text(value: object, limit: int) -> str:
    """Student-made text, at most `limit` characters, that any UTF-8 report can hold.

    JSON can carry lone surrogates (\\ud800) that no encoder accepts; they become escapes.
    """
    return str(value)[:limit].encode("utf-8", "backslashreplace").decode("utf-8")


class DecodeError(ValueError):
    """The student process sent something that is not a well-formed answer."""


@dataclass(frozen=True)
class Opaque:
    """A returned value the grader cannot compare (an object, a string of the wrong kind...)."""

    type_name: str

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
    return float(v)


def _int(v: Any) -> int:
    if not isinstance(v, str) or len(v) > 400:
        raise DecodeError("bad int")
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
        return clean_text(data["v"], 200)
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
        return Opaque(name[:80] if isinstance(name, str) else "unknown")
    raise DecodeError(f"unknown tag {tag[:20]!r}")


def _array(data: dict) -> np.ndarray:
    dtype, shape, flat = data.get("dtype"), data.get("shape"), data.get("v")
    if dtype not in ALLOWED_DTYPES:
        raise DecodeError(f"unsupported dtype {str(dtype)[:20]!r}")
    if (not isinstance(shape, list) or len(shape) > 32
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in shape)):
        raise DecodeError("bad shape")
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
    except (OverflowError, ValueError) as exc:
        raise DecodeError(f"bad array: {exc}") from None


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
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
