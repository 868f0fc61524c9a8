"""The wire format (grader/sandbox/codec.py and the student side, grader/sandbox/worker.py): an input array
travels as its bytes after the request's JSON line, an answer's as the base64 of its bytes, and both come
back exactly, or not at all."""
from __future__ import annotations

import base64
import importlib.util
import json
import sys

import numpy as np
import pytest

from grader.sandbox.codec import ANSWER, DecodeError, decode_value, encode_arg, loads_bounded, read_event

from .conftest import ROOT


@pytest.fixture(scope="module")
def worker():
    """worker.py loaded as a module (its start-up only runs as a script)."""
    spec = importlib.util.spec_from_file_location("mha_worker_under_test", ROOT / "grader" / "sandbox" / "worker.py")
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, ["_worker.py"]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


def wire(data):
    return json.loads(json.dumps(data, allow_nan=False))


class TestArraysBackAndForth:
    @pytest.mark.parametrize("array", [
        np.arange(6.0).reshape(2, 3),
        np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324]),
        np.array([1, -2], dtype=">i4"),                          # big-endian: read in native order
        np.arange(12.0).reshape(3, 4)[:, ::2],                  # not contiguous
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.array(2.5),                                          # zero-dimensional
        np.zeros((0, 3)),
        np.array([1.5], dtype=np.float32),
        np.array([[True, False]]),
        np.array([1, 0, 2], dtype=np.uint8).view(bool),          # odd bool bytes: read as bools
    ], ids=["matrix", "specials", "big-endian", "strided", "fortran", "0-d", "empty", "float32", "bool", "odd-bool"])
    def test_a_returned_array_comes_back_exactly(self, worker, array):
        """Values (nan, -0.0 and subnormals included), shape and dtype survive the round trip."""
        back = decode_value(wire(worker.encode(array)))
        assert back.shape == array.shape and back.dtype == array.dtype.newbyteorder("=")
        assert np.array_equal(back, array, equal_nan=True)
        assert np.array_equal(np.signbit(back), np.signbit(array)) if back.dtype.kind == "f" else True
        assert back.flags.writeable

    @pytest.mark.parametrize("array", [np.arange(6.0).reshape(2, 3), np.array([[True, False]]), np.array([3, 4])])
    def test_an_input_arrives_exactly_and_writable(self, worker, array):
        """Inputs reach student code equal, and writable (a student may change an input)."""
        got = worker.decode_arg(wire(encode_arg(array)))
        assert got.dtype == array.dtype and np.array_equal(got, array)
        got[...] = 0
        assert array.any()  # the grader's copy is untouched


class TestStrictDecoding:
    @pytest.mark.parametrize("data, message", [
        ({"dtype": "float64", "shape": [2], "b64": base64.b64encode(b"x" * 8).decode()}, "does not match its shape"),
        ({"dtype": "float64", "shape": [1], "b64": "!!!!!!!!!!!!"}, "bad array data"),
        ({"dtype": "float64", "shape": [1], "b64": 5}, "does not match its shape"),
        ({"dtype": "bool", "shape": [1], "b64": "AQ=="}, "does not match its shape"),
        ({"dtype": "object", "shape": [1], "b64": "AAAAAAAAAAA="}, "unsupported dtype"),
        ({"dtype": "float64", "shape": [1 << 30], "b64": ""}, "bad shape"),
        ({"dtype": "float64", "shape": [0, 10 ** 39], "b64": ""}, "bad shape"),  # zero bytes, a shape numpy refuses
        ({"dtype": "float64", "shape": [0, 10 ** 39], "v": []}, "bad shape"),
        ({"dtype": "float64", "shape": [0] * 33, "b64": ""}, "bad shape"),
        ({"dtype": "float64", "shape": [2], "v": [1.0, True]}, "bad float"),
        ({"dtype": "float64", "shape": [1], "v": [10 ** 400]}, "bad array"),
        ({"dtype": "int64", "shape": [1], "v": [1.0]}, "bad int array"),
        ({"dtype": "bool", "shape": [2], "v": [1, 0]}, "bad bool array"),
    ], ids=["short", "not-base64", "not-text", "bool-bytes", "object", "huge", "zero-bytes-huge-side",
            "zero-values-huge-side", "too-many-sides", "bool-in-floats", "huge-int",
            "float-in-ints", "ints-as-bools"])
    def test_malformed_arrays_are_refused(self, data, message):
        """Whatever a student process writes on the pipe, a bad array is a DecodeError, never a crash."""
        with pytest.raises(DecodeError, match=message):
            decode_value({"t": "array", **data})

    def test_lists_of_numbers_are_still_read(self):
        """The list form (bool arrays, and specials as strings) decodes as before."""
        got = decode_value({"t": "array", "dtype": "float64", "shape": [3], "v": [1, 2.5, "nan"]})
        assert np.array_equal(got, [1.0, 2.5, np.nan], equal_nan=True)


class TestAnswerLines:
    """A line from the student process is read as UTF-8 JSON, its integers bounded, by one decoder
    made once per bound (codec._decoder); anything else is a garbled answer, never an exception."""

    def test_a_line_reads_as_before_and_long_integers_stay_text(self):
        event = read_event(b'{"event": "case", "id": 3, "big": %s, "text": "\xc3\xa9"}' % (b"9" * 60))
        assert event["id"] == 3 and event["text"] == "\u00e9"
        assert isinstance(event["big"], str) and event["big"] == "9" * 60
        assert read_event(b'{"event": "done", "n": -12}') == {"event": "done", "n": -12}
        assert read_event(b'\xef\xbb\xbf{"event": "done"}') == {"event": "done"}  # a UTF-8 BOM, as json.loads reads it
        assert loads_bounded('\ufeff{"cells": []}', ANSWER) == {"cells": []}  # a notebook's text that starts with one

    @pytest.mark.parametrize("line", [
        '{"event": "done"}'.encode("utf-16"), b'{"event": "\xff\xfe"}', b'{"event": ', b"[1, 2]", b"",
    ], ids=["utf-16", "not-utf-8", "cut-short", "not-an-object", "empty"])
    def test_anything_else_is_a_garbled_answer(self, line):
        event = read_event(line)
        assert event["event"] == "garbled" and event["why"]


@pytest.mark.parametrize("array", [
    np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3).T, np.asfortranarray(np.ones((3, 2), np.float32)),
    np.zeros((0, 3)), np.array(3.5), np.arange(5, dtype=">i4"), np.arange(8, dtype=np.float32)[::2],
    np.array([True, False]), np.zeros((2, 0, 2), dtype=np.int8), np.array([1 + 2j]), np.arange(4, dtype="<u2"),
], ids=["c", "transposed", "fortran", "empty", "0-d", "big-endian", "strided", "bool", "empty-3d", "complex", "uint16"])
def test_an_input_array_arrives_exactly_from_the_requests_binary_part(worker, array):
    """session._encoded_cases puts an input array's bytes in the request's binary part (from its own
    memory when it can) and names them in the JSON; the worker reads back the very values, dtype
    (in native byte order) and shape, writable, whatever the array's order, strides or byte order,
    as encode_arg's base64 form (a stand-in's reply) gives them."""
    from grader.sandbox.session import _encoded_cases
    other = np.arange(3.0)
    encoded = _encoded_cases([[other, 7, array], [array, None]])
    data = memoryview(b"".join(encoded.data))
    assert len(data) == encoded.size == other.nbytes + 2 * array.nbytes
    cases = wire(json.loads(encoded.text))
    assert [len(case["args"]) for case in cases] == [3, 2] and cases[0]["args"][1] == 7 and cases[1]["args"][1] is None
    for got in (worker.decode_arg(cases[0]["args"][2], data), worker.decode_arg(cases[1]["args"][0], data),
                worker.decode_arg(wire(encode_arg(array)))):
        assert got.dtype == array.dtype.newbyteorder("=") and got.shape == array.shape
        assert np.array_equal(got, array) and got.flags.writeable
    assert np.array_equal(worker.decode_arg(cases[0]["args"][0], data), other)


@pytest.mark.parametrize("value", [0, -1, 7, 2 ** 70, -(2 ** 70), True, False, None, 0.5, float("-0.0"),
                                   np.int64(-3), np.uint8(200), np.bool_(True), np.float64(1.5)],
                         ids=lambda v: f"{type(v).__name__}({v!r})")
def test_an_input_that_is_no_array_is_written_as_encode_arg_gives_it(worker, value):
    """Plain inputs (ints, bools and None written directly, the rest through encode_arg) read back
    in the student process as the very value json gives for encode_arg's form."""
    from grader.sandbox.session import _encoded_cases
    encoded = _encoded_cases([[value]])
    got = wire(json.loads(encoded.text))[0]["args"][0]
    expected = wire(json.loads(json.dumps([encode_arg(value)])))[0]
    assert got == expected and type(got) is type(expected)
    assert worker.decode_arg(got, memoryview(b"")) == expected
