"""The student-side process: imports a submission and runs its functions on case inputs.

Run as a script (`python -I _worker.py SUBMISSION RESULT_FD`), never imported by the grader,
so it imports nothing of the `grader` package: the reference, the problems and the expected
values never enter this process. Requests arrive as JSON lines on stdin; each answer is one
JSON line on RESULT_FD. Return values are turned into plain tagged data here (numbers,
nested lists, type names), so the grader never touches an object the student made.
"""
import importlib.util
import json
import math
import os
import sys
import time
import traceback

import numpy as np

# Bound at start-up, before student code can monkeypatch the modules they come from.
_dumps, _loads, _write, _monotonic = json.dumps, json.loads, os.write, time.perf_counter
_ndarray, _asarray, _isfinite = np.ndarray, np.asarray, np.isfinite
_readline = sys.stdin.buffer.readline
_exit = os._exit

MAX_ITEMS = 1 << 20       # elements in one returned container or array
MAX_DEPTH = 12
MAX_TEXT = 200


def _float(x):
    f = float.__float__(float(x))
    return f if math.isfinite(f) else ("nan" if f != f else ("inf" if f > 0 else "-inf"))


def encode(x, depth=0):
    """Plain, tagged data for a returned value; never calls student code except __array__."""
    if depth > MAX_DEPTH:
        return {"t": "object", "type": "too deeply nested"}
    kind = type(x)
    if x is None:
        return {"t": "none"}
    if kind is bool or kind is np.bool_:
        return {"t": "bool", "v": bool(x)}
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return {"t": "int", "v": str(int.__int__(x) if isinstance(x, int) else int(x)),
                "type": kind.__name__}
    if isinstance(x, (float, np.floating)):
        return {"t": "float", "v": _float(x), "type": kind.__name__}
    if isinstance(x, str):
        return {"t": "str", "v": str.__str__(x)[:MAX_TEXT]}
    if isinstance(x, (list, tuple)):
        items = list.__iter__(x) if isinstance(x, list) else tuple.__iter__(x)
        seq = []
        for i, item in enumerate(items):
            if i >= MAX_ITEMS:
                return {"t": "object", "type": "list too long"}
            seq.append(encode(item, depth + 1))
        return {"t": "list" if isinstance(x, list) else "tuple", "v": seq, "type": kind.__name__}
    if isinstance(x, dict):
        pairs = [[encode(k, depth + 1), encode(dict.__getitem__(x, k), depth + 1)]
                 for k in list(dict.__iter__(x))[:1000]]
        return {"t": "dict", "v": pairs, "type": kind.__name__}
    if isinstance(x, _ndarray) or hasattr(kind, "__array__"):
        arr = _asarray(x)  # may raise: reported as the case's error
        if not isinstance(arr, _ndarray):
            return {"t": "object", "type": kind.__name__}
        arr = _ndarray.view(arr, _ndarray)  # drop any subclass and its overrides
        if arr.dtype.kind not in "biuf":
            return {"t": "object", "type": f"{kind.__name__} of dtype {arr.dtype}"}
        if arr.size > MAX_ITEMS:
            return {"t": "object", "type": f"array too large ({arr.size} elements)"}
        flat = _ndarray.tolist(arr.ravel())
        if arr.dtype.kind == "f" and not bool(_isfinite(arr).all()):
            flat = [_float(v) for v in flat]
        return {"t": "array", "dtype": arr.dtype.name, "shape": list(arr.shape), "v": flat,
                "type": kind.__name__}
    return {"t": "object", "type": kind.__name__}


def decode_arg(a):
    """Case inputs arrive as plain JSON; arrays as {"nd": flat, "shape": [...], "dtype": ...}."""
    if isinstance(a, dict):
        return np.array(a["nd"], dtype=a["dtype"]).reshape(a["shape"])
    return a


def _where(tb):
    frames = [f for f in traceback.extract_tb(tb) if f.filename == SUBMISSION]
    return f"line {frames[-1].lineno}" if frames else None


def _error(exc):
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:500] if not isinstance(exc, SystemExit) else f"exit code {exc.code!r}"[:200],
            "where": _where(exc.__traceback__)}


def send(message):
    data = (_dumps(message, allow_nan=False) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[_write(RESULT_FD, view):]


def load(path):
    spec = importlib.util.spec_from_file_location("attention", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        send({"event": "load_error", "kind": "syntax", "message": f"{exc.msg}", "line": exc.lineno})
        return None
    except BaseException as exc:  # ImportError, SystemExit, KeyboardInterrupt, anything
        send({"event": "load_error", "kind": type(exc).__name__, "message": _error(exc)["message"],
              "line": (_where(exc.__traceback__) or "").replace("line ", "") or None})
        return None
    send({"event": "loaded"})
    return module


def run(module, request):
    fn = getattr(module, request["function"], None)
    if not callable(fn):
        send({"event": "no_function"})
        return
    for case in request["cases"]:
        args = [decode_arg(a) for a in case["args"]]
        start = _monotonic()
        try:
            value = fn(*args)
        except BaseException as exc:  # student code may raise anything, SystemExit included
            message = {"event": "case", "id": case["id"], "ok": False, "error": _error(exc)}
        else:
            seconds = _monotonic() - start
            try:
                message = {"event": "case", "id": case["id"], "ok": True, "value": encode(value)}
            except BaseException as exc:  # __array__ or __int__ that raise, and the like
                error = _error(exc)
                error["type"] = "BadResult"
                error["message"] = f"the returned value could not be read: {type(exc).__name__}: {error['message']}"
                message = {"event": "case", "id": case["id"], "ok": False, "error": error}
            start = _monotonic() - seconds
        message["seconds"] = round(_monotonic() - start, 6)
        try:
            send(message)
        except (TypeError, ValueError) as exc:  # e.g. an unencodable result
            send({"event": "case", "id": case["id"], "ok": False,
                  "error": {"type": "BadResult", "mro": ["BadResult"], "message": str(exc)[:200], "where": None}})
    send({"event": "done"})


if __name__ == "__main__":
    SUBMISSION = os.path.abspath(sys.argv[1])
    RESULT_FD = int(sys.argv[2])
    os.set_inheritable(RESULT_FD, False)
    sys.path.insert(0, os.path.dirname(SUBMISSION))
    module = load(SUBMISSION)
    if module is None:
        _exit(0)
    while True:
        line = _readline()
        if not line:
            break
        run(module, _loads(line))
    _exit(0)
