"""The student-side process: imports a submission and runs its functions on case inputs.

Two ways in, both run as a script and never imported by the grader, so this process imports nothing
of the `grader` package: the reference, the problems and the expected values never enter it.

- `python -I worker.py SUBMISSION RESULT_FD LIMITS [--user UID GID]`: one student process.
- `python -I -S worker.py --zygote CONTROL_FD [LIBRARY ...]`: a fork server, started without the
  site module (processing its .pth files would slow every start), so it is told where the installed packages
  are (the LIBRARY folders, put on sys.path first thing). It imports numpy and the preloaded
  modules once, never runs student code, and forks one student process per request from the
  grader (a JSON message with the pipes attached, on a unix socket). It reaps a child only
  once the grader has released it, so a pid the grader may still signal is never reused.

Start-up of a student process, before any student code, is the same either way: set the resource
limits, (as root) enter its namespaces (jail.py) and switch to the student's uid/gid for good,
install the system-call filter (seccomp.py), then say "ready". Requests arrive on stdin, each a JSON line followed
by its input arrays' bytes (no base64 to decode); each answer is one JSON line on RESULT_FD.
Return values are turned into plain tagged data here (numbers, nested lists, type names), so the
grader never touches an object the student made.

A request may name `stand_ins`: functions of the submission the grader answers for (the cascade's
re-run, grading/cascade.py). Each name is bound in the student's module to a stand-in that sends
its arguments as a "call" event (the same plain data as an answer) and waits on stdin for the
grader's reply: the answer, as case inputs travel, or a refusal, raised as RuntimeError. No code
of the course ever enters this process.
"""
import sys

if sys.argv[1:2] == ["--zygote"]:  # started with -S: the installed packages are where the grader says
    sys.path.extend(path for path in sys.argv[3:] if path not in sys.path)

import base64
import builtins
import gc
import importlib
import importlib.util
import json
import math
import os
import select
import signal
import socket
import time
import traceback

import numpy as np

# Bound at start-up, before student code can monkeypatch the modules they come from. Student
# code runs in this process and can still undo anything here: that only spoils its own answers,
# which are compared in the grader's process.
_dumps, _loads, _write, _monotonic = json.dumps, json.loads, os.write, time.perf_counter
_strict_dumps = json.JSONEncoder(allow_nan=False).encode  # made once: json.dumps(allow_nan=False) makes one per call
_ndarray, _asarray, _frombuffer = np.ndarray, np.asarray, np.frombuffer
_b64encode, _b64decode = base64.b64encode, base64.b64decode
_np_bool, _np_integer, _np_floating, _finite = np.bool_, np.integer, np.floating, math.isfinite
_readline, _read = sys.stdin.buffer.readline, sys.stdin.buffer.read
_exit = os._exit
globals().update({name: getattr(builtins, name) for name in (
    "isinstance", "type", "float", "int", "str", "list", "tuple", "dict", "bool", "hasattr", "enumerate",
    "len", "round", "callable", "getattr")})

# Loaded by the zygote while it waits, so children skip their imports. Any other module of the
# installation imports too, as the student's uid, even from an installation that uid cannot
# reach by its path (under /root...): see confine.import_through and jail.py. One module loads
# per step, and a request waits for the step under way: the longest, numpy.random (about 12 ms,
# OpenSSL included), comes last, after the modules a first request finds loaded.
PRELOAD = ("numpy.fft", "__future__", "bisect", "cmath", "collections", "collections.abc",
           "copy", "dataclasses", "decimal", "enum", "fractions", "functools", "heapq", "itertools", "numbers",
           "operator", "random", "re", "statistics", "string", "textwrap", "typing", "warnings", "numpy.random")


def _sibling(name):
    """A module beside this file, loaded by its path: run as a script with -I, this process has no
    grader package on sys.path (and student code must not find one)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location(f"_mha_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_confine = _sibling("confine")
_jail = _sibling("jail")
_seccomp = _sibling("seccomp")
set_limits, become, prctl, check_room, mark, Counted = (_confine.set_limits, _confine.become, _confine.prctl,
                                                        _confine.check_room, _confine.mark, _confine.Counted)

MAX_ITEMS = 1 << 20       # elements in one returned container or array
MAX_DEPTH = 12
MAX_TEXT = 200


def _float(x):
    f = float.__float__(float(x))
    return f if _finite(f) else ("nan" if f != f else ("inf" if f > 0 else "-inf"))


_NATIVE: dict = {}  # a returned array's dtype -> (that dtype in native byte order, its name)


def encode(x, depth=0):
    """Plain, tagged data for a returned value; never calls student code except __array__."""
    if depth > MAX_DEPTH:
        return {"t": "object", "type": "too deeply nested"}
    kind = type(x)
    if x is None:
        return {"t": "none"}
    if kind is bool or kind is _np_bool:
        return {"t": "bool", "v": bool(x)}
    if isinstance(x, (int, _np_integer)) and not isinstance(x, bool):
        return {"t": "int", "v": str(int.__int__(x) if isinstance(x, int) else int(x)),
                "type": kind.__name__}
    if isinstance(x, (float, _np_floating)):
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
        if arr.dtype.kind == "b":  # as JSON true/false: whatever bytes a bool array holds
            return {"t": "array", "dtype": "bool", "shape": list(arr.shape), "v": _ndarray.tolist(arr.ravel()),
                    "type": kind.__name__}
        native_type = _NATIVE.get(arr.dtype)
        if native_type is None:  # each dtype's native form and name worked out once (numpy does it on every call)
            native_type = _NATIVE[arr.dtype] = (arr.dtype.newbyteorder("="), arr.dtype.newbyteorder("=").name)
        native = _ndarray.astype(arr, native_type[0], order="C", copy=False)  # read in native order
        return {"t": "array", "dtype": native_type[1], "shape": list(native.shape),
                "b64": _b64encode(_ndarray.tobytes(native)).decode("ascii"), "type": kind.__name__}
    return {"t": "object", "type": kind.__name__}


def decode_arg(a, data=None):
    """Case inputs arrive as plain JSON; an array as {"nd": [offset, length] of its bytes in the
    request's binary part `data`, "shape": [...], "dtype": ...} (a stand-in's reply: "nd" is the
    base64 of the bytes). Copied into a bytearray: the student may change an input."""
    if isinstance(a, dict):
        raw = a["nd"]
        if isinstance(raw, list):
            buffer = bytearray(data[raw[0]:raw[0] + raw[1]])
        else:
            buffer = bytearray(_b64decode(raw))
        return _frombuffer(buffer, dtype=a["dtype"]).reshape(a["shape"])
    return a


def decode_reply(a):
    """A stand-in's answer from the grader: case inputs' JSON, with {"list"|"tuple"|"dict": ...} around sequences."""
    if isinstance(a, dict):
        if "nd" in a:
            return decode_arg(a)
        if "tuple" in a:
            return tuple(decode_reply(x) for x in a["tuple"])
        if "list" in a:
            return [decode_reply(x) for x in a["list"]]
        if "dict" in a:
            return {decode_reply(k): decode_reply(v) for k, v in a["dict"]}
    return a


_queued: list = []  # messages read from stdin while a stand-in waited for its reply: serve() takes them first
_current = [None, 0]  # the request being answered (its seq), and the stand-ins' calls made so far


def _read_message():
    """The next message on stdin (None once it is closed): a JSON line, and for a request the
    `bytes` of its binary part right after it, kept as the message's "data"."""
    line = _readline()
    if not line:
        return None
    message = _loads(line)
    size = message.get("bytes") if type(message) is dict else None
    if type(size) is int and size > 0:
        data = _read(size)
        if len(data) != size:
            return None
        message["data"] = memoryview(data)
    return message


def _next_message():
    """The next message from the grader (None once stdin is closed)."""
    if _queued:
        return _queued.pop(0)
    return _read_message()


def _stand_in(name):
    """A function that asks the grader for `name`'s answer on its arguments (see the module's docstring)."""
    def stand_in(*args, **kwargs):
        _current[1] += 1
        call = _current[1]
        send({"event": "call", "seq": _current[0], "call": call, "function": name,
              "args": [encode(a) for a in args], "kwargs": [[str(k), encode(v)] for k, v in kwargs.items()]})
        while True:
            message = _read_message()
            if message is None:
                _exit(0)
            if isinstance(message, dict) and message.get("reply") == call:
                break
            _queued.append(message)
        if message.get("ok") is True:
            return decode_reply(message.get("value"))
        raise RuntimeError(f"{name}: {str(message.get('message', 'no answer'))[:200]}")
    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


def _where(tb):
    frames = [f for f in traceback.extract_tb(tb) if f.filename == SUBMISSION]
    return f"line {frames[-1].lineno}" if frames else None


def _error(exc):
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:500] if not isinstance(exc, SystemExit) else f"exit code {exc.code!r}"[:200],
            "where": _where(exc.__traceback__)}


def send(message):
    data = (_strict_dumps(message) + "\n").encode()
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
        send({"event": "load_error", "kind": "syntax", "message": f"{exc.msg}", "line": exc.lineno,
              "column": exc.offset})
        return None
    except BaseException as exc:  # ImportError, SystemExit, KeyboardInterrupt, anything
        send({"event": "load_error", "kind": type(exc).__name__, "message": _error(exc)["message"],
              "line": (_where(exc.__traceback__) or "").replace("line ", "") or None})
        return None
    send({"event": "loaded"})
    return module


def _writes():
    return sum(getattr(stream, "writes", 0) for stream in (sys.stdout, sys.stderr))


def run(module, request):
    """Answer one request: one "case" event per case, then "done" saying whether the problem
    printed (through sys.stdout or sys.stderr); returns that."""
    seq = request.get("seq")
    _current[0] = seq
    for name in request.get("stand_ins") or ():
        if isinstance(name, str) and name != request["function"]:
            vars(module)[name] = _stand_in(name)
    fn = getattr(module, request["function"], None)
    if not callable(fn):
        send({"event": "no_function", "seq": seq})
        return False
    writes = _writes()
    data = request.get("data")
    for case in request["cases"]:
        args = [decode_arg(a, data) for a in case["args"]]
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
        message["seq"] = seq
        try:
            send(message)
        except (TypeError, ValueError) as exc:  # e.g. an unencodable result
            send({"event": "case", "id": case["id"], "ok": False, "seq": seq,
                  "error": {"type": "BadResult", "mro": ["BadResult"], "message": str(exc)[:200], "where": None}})
    wrote = _writes() != writes
    send({"event": "done", "seq": seq, "wrote": wrote})
    return wrote


class NoGrader:
    """Refuses `import grader` in student code. A speed bump, not a wall: student code can remove
    it. The wall, as root, is that the student's uid cannot read the grader's files at all."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "grader":
            raise ImportError("student code cannot import the grader package", name=name)
        return None


class Unreadable:
    """Last on sys.meta_path when running as the student's uid: a standard module that was not
    preloaded and that this uid cannot read gets a message saying so, not just "No module"."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in sys.stdlib_module_names:
            raise ModuleNotFoundError(f"module {name!r} is not available to student code here (the grader's "
                                      "Python installation cannot be read by the student's user)", name=name)
        return None


def enter(spec, user, parent, jailed=False):
    """Everything between start-up and importing the submission: limits, the uid switch (as
    root), clean-up hooks. Any failure here is the grader's, not the student's. `jailed`: the
    process is in its namespaces already (see `child`)."""
    separate_user = user is not None
    set_limits(spec, strict=separate_user)
    check_room(spec)
    if separate_user:
        # outside namespaces, the import folders are reached through descriptors (in them, by their paths)
        opened = {} if jailed else _confine.open_import_folders()
        if not jailed:  # in namespaces the installation is in the student's file system: they import when used
            for name in PRELOAD:
                importlib.import_module(name)
        _confine.new_session_keyring()
        become(*user)
        _confine.import_through(opened)
        sys.meta_path.append(Unreadable())
    else:
        prctl(_confine.PR_SET_DUMPABLE, 1)  # as a directly started worker is: the grader reads its environment
    prctl(_confine.PR_SET_CHILD_SUBREAPER, 1)  # orphans of student code stay in our tree, daemons included
    prctl(_confine.PR_SET_PDEATHSIG, signal.SIGKILL)  # after the switch, which clears it
    if not jailed and os.getppid() != parent:  # the grader (or the fork server) is already gone
        _exit(1)
    # (in its own process-id space the parent is outside, so getppid() is 0: the fork server set
    # the parent-death signal at the fork, and kills its children when the grader goes)
    os.umask(0o077)
    sys.meta_path.insert(0, NoGrader())
    with open(SUBMISSION, "rb"):  # readable now, or the grader's set-up is at fault
        pass
    _seccomp.install()  # last: the set-up above may need calls it denies (seccomp.py)


def serve():
    """Say ready, import the submission, then answer requests until stdin closes; never returns.

    The grader may send the next request before this one is answered, so no time is lost
    between problems. A problem that printed is followed by a wait for {"go": true}, sent once
    the grader has collected that output: what the next problem prints is then its own."""
    sys.stdout, sys.stderr = Counted(sys.stdout), Counted(sys.stderr)
    send({"event": "ready"})
    sys.path.insert(0, os.path.dirname(SUBMISSION))
    module = load(SUBMISSION)
    if module is None:
        _exit(0)
    while True:
        request = _next_message()
        if request is None:
            break
        if request.get("go"):
            continue
        if run(module, request):
            held = []  # requests that came while waiting for "go"
            while True:
                message = _next_message()
                if message is None:
                    _exit(0)
                if message.get("go"):
                    break
                held.append(message)
            _queued[:0] = held
    _exit(0)


def could_not_start(exc):
    sys.stderr.write(f"mha worker: could not start: {type(exc).__name__}: {exc}\n")
    sys.stderr.flush()
    _exit(70)


# ---------------------------------------------------------------- the fork server

def child(request, fds, zygote, control, jail):
    """The forked student process (jailed if `jail`: the descriptors of its network namespace and
    of its root's mount namespace): the set-up `python worker.py` does."""
    global SUBMISSION, RESULT_FD
    jailed = jail is not None
    try:
        if jailed:  # before every descriptor but its own pipes is closed
            prctl(_confine.PR_SET_PDEATHSIG, signal.SIGKILL)  # until the uid switch; set again after it
            _jail.join_network(jail[0])
            _jail.enter(jail[1], os.path.dirname(request["submission"]), request["jail"]["tmp_bytes"])
        os.setsid()  # its own session and process group, as start_new_session gives
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.detach()
        stdin, stdout, stderr, RESULT_FD = fds
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.closerange(3, RESULT_FD)  # nothing of the zygote's (its socket, its pipes) stays open
        os.closerange(RESULT_FD + 1, os.sysconf("SC_OPEN_MAX"))
        os.set_inheritable(RESULT_FD, False)
        os.umask(0o077)
        os.chdir(request["home"])
        env = {str(k): str(v) for k, v in request["env"].items()}
        for name, value in env.items():
            mark(name, value)
        os.environ.clear()
        os.environ.update(env)
        if "tempfile" in sys.modules:
            sys.modules["tempfile"].tempdir = None
        if "numpy.random" in sys.modules:  # (if not, it is seeded afresh when this process imports it)
            np.random.seed()  # not the zygote's state, shared by every child
        SUBMISSION = os.path.abspath(request["submission"])
        user = request.get("user")
        enter(request["limits"], (int(user[0]), int(user[1])) if user else None, zygote, jailed)
    except Exception as exc:  # reported by the grader as its own failure
        could_not_start(exc)
    serve()


def exit_status(info):
    """A waitid result as Popen.returncode: the exit code, or minus the signal."""
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


class Child:
    """A student process this zygote forked, from its fork until it is reaped.

    The grader signals it by its pid, so that pid must stay this process's until the grader
    lets go of it: a child is reaped only once it has exited *and* the grader has released it."""

    __slots__ = ("pid", "status", "released")

    def __init__(self, pid):
        self.pid = pid
        self.status = None     # its exit status once it has exited (as Popen.returncode)
        self.released = False  # the grader no longer signals it


class Zygote:
    """The fork server: reads the grader's requests on its socket and answers each with one
    handler (HANDLERS); between requests it does its idle work (`idle`) and reports each child's exit.

    Messages from the grader (JSON, with descriptors attached to "spawn"):
      {"op": "spawn", "id", "submission", "home", "limits", "user", "env", "jail"} + 4 pipes
          -> {"id", "pid", "jailed", "why"} or {"id", "error"}
      {"op": "prepare", "jail", "folder"}  (as root, once)  -> {"prepared", "why"} when built
      {"op": "clear_keys", "id", "uid", "gid"}              -> {"id", "cleared"}
      {"op": "release", "pid"}                              (no reply)
    and, unasked, {"pid", "status"} when a child exits. The end of the socket ends the zygote and
    every child. Only the grader holds the other end: a child closes this socket before it starts,
    and talks to the grader alone, on its own pipes."""

    def __init__(self, control_fd):
        self.control = socket.socket(fileno=control_fd)
        self.me = os.getpid()
        self.children = {}  # pid -> Child
        self.jail_state = None  # (whether namespaces work here, why not), found at the first request for them
        self.networks = _jail.Networks()  # a fresh one for each jailed student process (jail.join_network)
        self.roots = _jail.Roots(_confine.library_folders())  # the student's file system, copied for each (jail.enter)
        self.ahead = None  # a "prepare" message: build that root while no request waits (spawn.ForkServer.prepare)
        self.preload = [name for name in PRELOAD if name not in sys.modules]
        self.wake_read, wake_write = os.pipe()  # SIGCHLD writes here: a child (or an orphan) has exited
        os.set_blocking(self.wake_read, False)
        os.set_blocking(wake_write, False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(wake_write)

    def serve(self):
        """Answer the grader until it closes the socket; never returns."""
        while True:
            ready, _, _ = select.select([self.control, self.wake_read], [], [], 0 if self.has_idle_work() else 1.0)
            if not ready and self.idle():
                continue
            if self.wake_read in ready:
                self.on_child_signal()
            if self.control in ready:
                self.on_message()
            self.collect()

    # ------------------------------------------------ idle work, one step at a time

    def _stocking(self):
        return self.jail_state is not None and self.jail_state[0] and self.networks.short()

    def has_idle_work(self):
        return bool(self.preload or self.ahead or self._stocking())

    def idle(self):
        """One step of idle work, in order of need; whether there was any. The next jailed
        student's network namespace, then the root `prepare` asked for, then a preloaded module."""
        if self._stocking():
            self.networks.stock()
        elif self.ahead:
            self.build_ahead()
        elif self.preload:
            importlib.import_module(self.preload.pop(0))
            if not self.preload:
                gc.collect()
                gc.freeze()
        else:
            return False
        return True

    def build_ahead(self):
        """Build the root `prepare` asked for and check that namespaces work; kept only if they do
        (else the first request for them tries again). Tells the grader either way."""
        ahead, self.ahead = self.ahead, None
        jail = ahead["jail"]
        works = _jail.probe(self.roots, ahead["folder"], jail["hidden"], jail["tmp_bytes"], OWN_PID_SPACE)
        if works[0]:
            self.jail_state = works
        self.send({"prepared": works[0], "why": works[1]})

    # ------------------------------------------------ messages

    def send(self, message):
        self.control.send(_dumps(message).encode())

    def on_child_signal(self):
        """SIGCHLD: empty the wake-up pipe, kill and reap what student processes left behind."""
        while True:
            try:
                if not os.read(self.wake_read, 512):
                    break
            except BlockingIOError:
                break
        _confine.kill_orphans(self.children)

    def on_message(self):
        """One message from the grader, to its handler; the descriptors it came with are closed
        afterwards (a child has its own copies). The end of the socket: the grader is gone, so are
        its student processes."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, 1 << 16, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            for pid in self.children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _exit(0)
        message = _loads(data)
        handler = self.HANDLERS.get(message.get("op"))
        if handler is not None:
            handler(self, message, fds)
        for fd in fds:
            os.close(fd)

    def spawn(self, message, fds):
        """Fork a student process on the four pipes attached (stdin, stdout, stderr, results): in
        namespaces if asked for (as root) and they work here. Replies with its pid, or why not."""
        pid, error = -1, "expected 4 file descriptors"
        jailed = False
        jail = message.get("jail") if message.get("user") else None
        if jail:
            if self.jail_state is None:  # not prepared ahead (or that failed): find out now
                self.jail_state = _jail.probe(self.roots, os.path.dirname(message["submission"]),
                                              jail["hidden"], jail["tmp_bytes"], OWN_PID_SPACE)
                self.ahead = None
            jailed = self.jail_state[0]
        network, ready = None, len(fds) == 4
        if ready and jailed:
            try:
                root = self.roots.get(os.path.dirname(message["submission"]), jail["hidden"])
                network = self.networks.take()
            except OSError as exc:
                ready, error = False, f"cannot make the student's namespaces: {exc}"
        if ready:
            try:
                if jailed:
                    _jail.enter_new_pid_space()
                try:
                    pid = os.fork()
                finally:
                    if jailed and pid != 0:
                        _jail.leave_pid_space(OWN_PID_SPACE)
            except OSError as exc:
                error = f"cannot fork: {exc}"
        if pid == 0:
            try:
                child(message, fds, self.me, self.control, (network, root) if jailed else None)
            finally:
                _exit(70)
        if pid > 0:
            self.children[pid] = Child(pid)
        if network is not None:
            self.networks.lend(pid, network)
        if pid > 0:
            why = "" if self.jail_state is None else self.jail_state[1]
            self.send({"id": message.get("id"), "pid": pid, "jailed": jailed, "why": why})
        else:
            self.send({"id": message.get("id"), "error": error})

    def prepare(self, message, fds):
        """Build the student's file system while no request waits (as root, before namespaces were tried)."""
        if os.geteuid() == 0 and self.jail_state is None:
            self.ahead = message

    def clear_keys(self, message, fds):
        """Empty a sandbox uid's kernel keyrings (confine.clear_keys_as); replies whether that worked."""
        done = _confine.clear_keys_as(int(message["uid"]), int(message["gid"]))
        self.send({"id": message.get("id"), "cleared": done})

    def release(self, message, fds):
        """The grader lets go of a child: it is reaped once it has exited."""
        known = self.children.get(message.get("pid"))
        if known is not None:
            known.released = True

    HANDLERS = {"spawn": spawn, "prepare": prepare, "clear_keys": clear_keys, "release": release}

    # ------------------------------------------------ children's exits

    def collect(self):
        """Tell the grader of each child that has exited (left a zombie, so its pid stays ours);
        reap those the grader has released."""
        for pid, known in list(self.children.items()):
            if known.status is None:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is not None:
                    known.status = exit_status(info)
                    self.networks.exited(pid)  # process 1 of its process-id space: all in there have exited
                    self.send({"pid": pid, "status": known.status})
            if known.status is not None and known.released:
                os.waitpid(pid, 0)
                del self.children[pid]


def zygote(control_fd):
    """Fork a student process per request until the grader closes the socket; run no student code.

    Ready once numpy is loaded: the modules of PRELOAD load one by one while no request waits. A
    child forked before they all have loads the rest itself before it drops privileges, or, in
    namespaces, where the installation is in its own file system, when its code imports them.
    numpy.random comes last: a cold `mha grade` asks for its student process about when the zygote
    is ready and does not wait for numpy.random's 12 ms. Nothing is collected before the freeze (a
    collection would only tidy the imports' garbage, 5 ms)."""
    global OWN_PID_SPACE
    prctl(_confine.PR_SET_DUMPABLE, 0)  # a student process of the same user cannot trace or read it
    prctl(_confine.PR_SET_CHILD_SUBREAPER, 1)  # what a student process leaves when it exits comes here (confine.kill_orphans)
    try:
        OWN_PID_SPACE = os.open("/proc/self/ns/pid", os.O_RDONLY)  # close-on-exec; closed in children
    except OSError:
        OWN_PID_SPACE = -1
    gc.freeze()  # the collector never walks (so never copies) the zygote's objects in a child
    Zygote(control_fd).serve()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        zygote(int(sys.argv[2]))
    SUBMISSION = os.path.abspath(sys.argv[1])
    RESULT_FD = int(sys.argv[2])
    os.set_inheritable(RESULT_FD, False)
    try:
        user = (int(sys.argv[5]), int(sys.argv[6])) if sys.argv[4:5] == ["--user"] else None
        enter(sys.argv[3], user, os.getppid())
    except Exception as exc:  # reported by the grader as its own failure
        could_not_start(exc)
    serve()
