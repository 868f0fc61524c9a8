"""Run student code in a separate, limited process and collect plain-data answers.

One worker process per submission imports the student's file and runs one problem at a time.
If a problem exceeds its time limit, the process dies, or it leaves other processes running,
every process of the session is killed (see `isolation`) and a fresh worker serves the
remaining problems, so one infinite loop costs one problem. Each worker has a home of its own,
deleted when it is retired (and, in namespaces, its own /tmp and network namespace): nothing a
worker saw (a hidden case's inputs) is left for a later one to report. Workers are forked from
a zygote that has numpy loaded (see `spawn`). Answers travel on a dedicated pipe; the student's stdout
and stderr are drained into bounded buffers and never parsed.

A session may answer for some of the submission's functions (`StandIns`, the cascade's re-run in
grading/cascade.py): the worker binds their names to stand-ins that send a `call` event with the
arguments as plain data; the grader decodes them, checks them against CALL bounds, computes the
answer and writes it back on the worker's stdin. Only the answer crosses, never the code.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InternalError
from ..paths import remove_tree
from ..records import record
from .codec import ALLOWED_DTYPES, ANSWER, DecodeError, Opaque, decode_value, encode_arg, read_event
from .isolation import Isolation
from .limits import Limits
from .runs import CaseRun, LoadFailure, RunStatus, StudentError
from .spawn import pipe, reap, start_student
from .student_text import one_line

MAX_MESSAGE = ANSWER.bytes  # bytes in one answer line (codec.ANSWER bounds the rest)

# What a stand-in's call may ask the grader to compute on (StandIns): a few arguments, small arrays
# (no dimension above CALL_DIM, CALL_ELEMENTS values in all) and integers of modest size, so an
# answer computed in the grader's own process costs little time and memory whatever is sent.
CALL_ARGS = 8
CALL_ELEMENTS = 1 << 14
CALL_DIM = 256
CALL_INT = 1 << 16


@record
class StandIns:
    """Functions of the submission the grader answers for: `names`, bound to stand-ins in the
    student process, and `answer(name, args, kwargs, deadline)`, given the decoded, bounded
    arguments and the problem's deadline, which returns the answer as `plain` JSON (or raises
    CallRefused)."""

    names: tuple[str, ...]
    answer: Callable[[str, list, dict, float], Any]


class CallRefused(ValueError):
    """A stand-in's call the grader does not answer (unknown name, arguments out of bounds...)."""


def _bounded(value: Any, budget: list[int], depth: int = 0) -> Any:
    """`value` (decoded plain data) if it is within the CALL bounds, counting its values against
    `budget`; CallRefused otherwise."""
    if depth > 8:
        raise CallRefused("arguments nested too deeply")
    if isinstance(value, np.ndarray):
        if value.ndim > 8 or any(n > CALL_DIM for n in value.shape):
            raise CallRefused(f"an array of shape {tuple(value.shape)[:9]} (at most {CALL_DIM} along any axis)")
        budget[0] -= value.size
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        budget[0] -= 1
    elif isinstance(value, int):
        if abs(value) > CALL_INT:
            raise CallRefused(f"an integer beyond {CALL_INT}")
        budget[0] -= 1
    elif isinstance(value, str):
        budget[0] -= 1 + len(value) // 8
    elif isinstance(value, (list, tuple)):
        budget[0] -= 1
        for item in value:
            _bounded(item, budget, depth + 1)
    elif isinstance(value, Opaque):
        raise CallRefused(f"a {value.type_name} object, which cannot be passed on as plain data")
    else:
        raise CallRefused(f"a {type(value).__name__}, which cannot be passed on as plain data")
    if budget[0] < 0:
        raise CallRefused(f"arguments larger than {CALL_ELEMENTS} values in all")
    return value


def plain(value: Any, depth: int = 0) -> Any:
    """Arrays, numbers, strings and sequences of them as JSON (case inputs' form, sequences tagged):
    what `from_plain` and the worker's `decode_reply` read; CallRefused for anything else."""
    if depth > 8:
        raise CallRefused("an answer nested too deeply")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise CallRefused(f"an answer of dtype {value.dtype}")
        return encode_arg(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [plain(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[plain(k, depth + 1), plain(v, depth + 1)] for k, v in value.items()]}
    raise CallRefused(f"an answer of type {type(value).__name__}")


def from_plain(data: Any, depth: int = 0) -> Any:
    """The value `plain` wrote (arrays of the codec's dtypes only); DecodeError for anything else."""
    if depth > 8:
        raise DecodeError("nested too deeply")
    if isinstance(data, dict):
        if "nd" in data:
            dtype, shape, raw = data.get("dtype"), data.get("shape"), data.get("nd")
            if dtype not in ALLOWED_DTYPES or not isinstance(shape, list) or not isinstance(raw, str):
                raise DecodeError("bad array")
            try:
                return np.frombuffer(base64.b64decode(raw, validate=True), dtype=dtype).reshape(shape).copy()
            except (ValueError, TypeError, binascii.Error):
                raise DecodeError("bad array") from None
        for tag, kind in (("list", list), ("tuple", tuple)):
            if isinstance(data.get(tag), list):
                return kind(from_plain(x, depth + 1) for x in data[tag])
        if isinstance(data.get("dict"), list):
            return {from_plain(k, depth + 1): from_plain(v, depth + 1) for k, v in data["dict"]}
        raise DecodeError("unknown value")
    return data


def answer_call(stand_ins: StandIns | None, event: dict, deadline: float) -> bytes:
    """The line to write back to the student process for its `call` event: {"reply": id, "ok":
    true, "value": ...}, or "ok": false with a fixed sentence (never what the reference raised)."""
    call = event.get("call")
    call = call if isinstance(call, int) and not isinstance(call, bool) else None
    name = event.get("function")
    try:
        if stand_ins is None or not isinstance(name, str) or name not in stand_ins.names:
            raise CallRefused("no such function is answered by the grader")
        args, pairs = event.get("args"), event.get("kwargs", [])
        if not isinstance(args, list) or not isinstance(pairs, list) or len(args) + len(pairs) > CALL_ARGS:
            raise CallRefused(f"at most {CALL_ARGS} arguments")
        try:
            values = [decode_value(a) for a in args]
            keywords = {}
            for pair in pairs:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                        and pair[0].isidentifier() and len(pair[0]) <= 40):
                    raise CallRefused("a keyword argument without a plain name")
                keywords[pair[0]] = decode_value(pair[1])
        except (DecodeError, RecursionError):
            raise CallRefused("arguments that could not be read") from None
        budget = [CALL_ELEMENTS]
        _bounded(values, budget)
        _bounded(list(keywords.values()), budget)
        line = json.dumps({"reply": call, "ok": True, "value": stand_ins.answer(name, values, keywords, deadline)})
        if len(line) > MAX_MESSAGE:
            raise CallRefused("an answer too large to send")
    except CallRefused as exc:
        line = json.dumps({"reply": call, "ok": False, "message": str(exc)[:200]})
    return line.encode() + b"\n"


@dataclass
class _Stream:
    limit: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def mark(self) -> tuple[int, int]:
        return len(self.data), self.total

    def since(self, mark: tuple[int, int]) -> str:
        """What was written after `mark`, as far as it was kept, with a note of what was not."""
        kept = self.data[mark[0]:]
        text = kept.decode("utf-8", "replace")
        dropped = self.total - mark[1] - len(kept)
        return text + (f"\n[... {dropped} more bytes not shown]" if dropped else "")


class Worker:
    """One student process: import once, then run problems until killed or closed."""

    def __init__(self, submission: Path, limits: Limits, home: Path, isolation: Isolation, deadline: float):
        self.limits = limits
        self.isolation = isolation
        self.stdout = _Stream(limits.output_bytes)
        self.stderr = _Stream(limits.output_bytes)
        self.ready = False  # set once the worker has started and dropped privileges
        read_fd, write_fd = pipe()
        self._results = os.fdopen(read_fd, "rb", buffering=0)
        rlimits = limits.rlimits(isolation.process_limit(limits.processes))
        isolation.starting()
        try:
            self.proc = start_student(submission, rlimits, home, isolation.user, isolation.env(), write_fd, deadline,
                                      isolation.jail())
        except BaseException:
            self._results.close()
            raise
        finally:
            os.close(write_fd)
        self._buffer = b""  # answers read but not yet taken, from self._taken on
        self._taken = 0
        self._pending = bytearray()  # requests not yet taken by the student's stdin pipe
        self._broken = False         # that pipe is closed: the process is gone
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._results, selectors.EVENT_READ, "results")
        self._sel.register(self.proc.stdout, selectors.EVENT_READ, self.stdout)
        self._sel.register(self.proc.stderr, selectors.EVENT_READ, self.stderr)

    def next_event(self, deadline: float) -> dict | None:
        """The next answer, or None on timeout; {'event': 'exited'} if the process is gone."""
        while True:
            newline = self._buffer.find(b"\n", self._taken)
            if newline >= 0:  # (the rest stays where it is: a chunk of many answers is not copied for each)
                line, self._taken = self._buffer[self._taken:newline], newline + 1
                return read_event(line)  # checked within codec.ANSWER before it is parsed
            self._buffer, self._taken = self._buffer[self._taken:], 0
            if len(self._buffer) > MAX_MESSAGE:
                return {"event": "garbled", "why": f"an answer larger than {MAX_MESSAGE >> 20} MiB"}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._sel.get_map():
                return {"event": "exited"}
            for key, _ in self._sel.select(timeout=remaining):
                if key.data == "stdin":
                    self._flush()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if key.data == "results":
                    if not chunk:
                        self._sel.unregister(key.fileobj)
                        return {"event": "exited"}
                    self._buffer += chunk
                elif chunk:
                    key.data.feed(chunk)
                else:
                    self._sel.unregister(key.fileobj)

    def drain(self, seconds: float = 0.2) -> None:
        """Collect output already written to stdout/stderr (it may trail the last answer).

        Bounded in time: a child process of the student's may still be writing.
        """
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready = [key for key, _ in self._sel.select(timeout=0) if key.data not in ("results", "stdin")]
            if not ready:
                return
            for key in ready:
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    key.data.feed(chunk)
                else:
                    self._sel.unregister(key.fileobj)

    def send(self, *parts: bytes | memoryview) -> bool:
        """Queue a message (the concatenation of `parts`) for the student's stdin and write what
        the pipe takes now, never waiting: student code may shrink the pipe or stop reading. The
        rest is written while answers are awaited (`next_event`), so no write outlasts a deadline.
        False once the pipe is closed (the process is gone)."""
        if self._broken:
            return False
        for part in parts:
            self._pending += part
        return self._flush()

    def _flush(self) -> bool:
        fd = self.proc.stdin.fileno()
        while self._pending:
            try:
                written = os.write(fd, self._pending)  # the pipe is non-blocking (spawn.start_student)
            except BlockingIOError:
                break
            except OSError:
                self._broken = True
                self._pending.clear()
                break
            del self._pending[:written]
        watched = "stdin" in (key.data for key in self._sel.get_map().values())
        if self._pending and not watched:
            self._sel.register(fd, selectors.EVENT_WRITE, "stdin")
        elif watched and not self._pending:
            self._sel.unregister(fd)
        return not self._broken

    def others_running(self) -> bool:
        """Whether any other process of the session runs (Isolation.others_running)."""
        return self.isolation.others_running(self.proc.pid, self.isolation.pid_space_only(self.proc))

    def refused(self) -> str | None:
        """Why the process never started, if the zygote said so (or never answered): a forked
        process's spawn is answered while the grader goes on (spawn.ForkedProcess)."""
        started = getattr(self.proc, "started", None)
        try:
            if started is not None:
                started()
        except InternalError as exc:
            return str(exc)
        return None

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the process stopped answering"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            hint = " (likely the memory limit)" if -code in (signal.SIGKILL, signal.SIGSEGV) else ""
            return f"the process was killed by {name}{hint}"
        return f"the process exited with code {code}"

    def stop(self) -> None:
        """As root, SIGKILL the process and its descendants now, without waiting for them: `close`
        then waits, scans and reaps as ever, and their exit overlaps what the grader does meanwhile."""
        if self.proc.returncode is None and self.isolation.separate_user:
            self.isolation.kill_tree(self.proc.pid, seconds=0.0)

    def kill(self) -> None:
        """Kill the worker and every other process of the session; output already sent stays readable."""
        live = self.proc.returncode is None  # not reaped yet, so its pid is still its own (and its group's)
        if live and self.isolation.separate_user:
            # as root every process of the session is found by its uid: kill the worker's tree at
            # once, then kill_all's scan finds what is left, usually nothing
            self.isolation.kill_tree(self.proc.pid)
        if self.isolation.pid_space_only(self.proc):
            # process 1 of its own process-id space, where every process of the session ran: once
            # it is reaped, the kernel has killed every other one (no scan of /proc is needed)
            if reap(self.proc):
                self.isolation.emptied()
                return
            live = False  # released all the same: its pid is no longer its own
        self.isolation.kill_all(self.proc.pid if live else None)
        if live:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # a backstop: kill_all found the group already
            except OSError:
                pass
        self.proc.kill()
        reap(self.proc)

    def close(self) -> None:
        self.kill()
        self._sel.close()
        for stream in (self._results, self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


@record
class ProblemRun:
    """The student's answers for one problem's cases (in request order)."""

    cases: tuple[CaseRun, ...]
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0            # of the problem's time limit, spent (measured by the grader)
    rest: CaseRun | None = None     # what any further case of the problem gets, if it cannot run now


PREFETCH_BYTES = 256 << 10  # a larger next request is sent when its turn comes (pipes hold 1 MiB)


@dataclass
class _Ahead:
    """A request sent before its turn: the next problem's, to the worker still on this one."""

    worker: Worker
    function: str
    args: Sequence[Sequence[Any]]
    seq: int
    started: float = 0.0                          # when the worker could start on it
    marks: tuple = ((0, 0), (0, 0))               # where its output begins in the worker's streams


class Session:
    """Runs one submission's problems, one worker at a time, within the submission budget.

    `submission`: the submission's text (bytes, as the grader read it), or a file holding it;
    either way student code runs from a copy in the session's own folder.
    `private`: folders student code must not read (made private when running as root).
    `separate_user`: run student code as a fresh uid (default: exactly when the grader is root).
    `stand_ins`: functions of the submission the grader answers for (see the module's docstring).
    Create, use and close a session in one thread (a worker started directly, off Linux, dies
    with the thread that started it).
    """

    def __init__(self, submission: Path | bytes, limits: Limits | None = None, *, private: Sequence[Path] = (),
                 separate_user: bool | None = None, stand_ins: StandIns | None = None):
        self.limits = limits or Limits()
        self.stand_ins = stand_ins
        self._closed = False
        self.start = time.monotonic()
        self.deadline = self.start + self.limits.submission_seconds
        self.isolation = Isolation(separate_user, private)
        self._tmp = Path(tempfile.mkdtemp(prefix="mha-run-"))
        self._worker: Worker | None = None
        self._ahead: _Ahead | None = None
        self._seq = 0
        self._started = 0  # student processes started (each with a home of its own)
        self._home: Path | None = None
        self._start_by = self.deadline
        self.load_failure: LoadFailure | None = None
        try:
            self.source = self._tmp / "attention.py"
            if isinstance(submission, bytes):  # its text, read by the grader (no student path is read again)
                with open(self.source, "xb") as handle:
                    handle.write(submission)
            else:
                shutil.copyfile(submission, self.source)
            self.isolation.prepare(self._tmp)
            self._spawn()  # start early: the submission's import overlaps the grader's own work
        except BaseException:
            self.close()
            raise

    def _spawn(self) -> Worker:
        # Starting the process is the grader's own work (no student code runs until it says
        # "ready"): it has a deadline of its own, and the time it takes is given back to the
        # submission's budget, so a busy machine never turns into a student's timeout.
        began = time.monotonic()
        self._start_by = began + max(self.limits.start_seconds, self.limits.load_seconds)
        self._started += 1
        self._home = self.isolation.new_home(self._tmp, self._started)  # nothing of an earlier process in it
        self._worker = Worker(self.source, self.limits, self._home, self.isolation, self._start_by)
        self.deadline += time.monotonic() - began
        self._loaded = False
        return self._worker

    def _ensure_loaded(self) -> bool:
        if self.load_failure is not None:
            return False
        worker = self._worker if self._worker is not None else self._spawn()
        if self._loaded:
            return True
        event = None
        if not worker.ready:
            began = time.monotonic()
            event = worker.next_event(self._start_by)
            self.deadline += time.monotonic() - began
        if event is not None and event.get("event") == "ready" and not worker.ready:
            worker.ready = True
            self.isolation.started(worker.proc)  # how it runs (the zygote's reply is in by now)
            event = None
        if worker.ready:
            event = worker.next_event(min(self.deadline, time.monotonic() + self.limits.load_seconds))
        if not worker.ready:  # no student code has run yet: the grader's environment is at fault
            refused = worker.refused()
            if refused is not None:
                self._retire()
                raise InternalError(refused)
            problem = "did not start in time" if event is None else worker.exit_description()
            worker.drain()
            said = worker.stderr.data.decode("utf-8", "replace").strip().splitlines()[-1:]
            self._retire()
            raise InternalError(f"the student process could not start ({problem})"
                                + (f": {said[0][:300]}" if said else ""))
        if event is not None and event.get("event") == "loaded":
            self._loaded = True
            return True
        if event is None:
            self.load_failure = LoadFailure(one_line("timeout"), one_line("time limit"))
        elif event.get("event") == "load_error" and self._started > 1:
            # the submission imported in the session's first process: what a later one says
            # when it fails can only come from what an earlier process saw (a hidden input)
            self.load_failure = LoadFailure(one_line("crashed"), one_line(
                "the submission imported in its first process but failed to import again in a fresh one "
                "(what it said is not shown)"))
        elif event.get("event") == "load_error":
            line, column = (_number(event.get(key)) for key in ("line", "column"))
            self.load_failure = LoadFailure(one_line(event.get("kind", "Error"), 60),
                                            one_line(self._scrub(one_line(event.get("message", ""), 500))), line, column)
        else:
            self.load_failure = LoadFailure(one_line("crashed"), one_line(worker.exit_description()))
        self._retire()
        return False

    def stop(self) -> None:
        """Nothing more runs in this session: its student process is killed now (Worker.stop), and
        cleaned up by `close` as ever."""
        if self._worker is not None:
            self._worker.stop()

    def _retire(self) -> None:
        self._ahead = None  # a request sent ahead to this worker dies with it: it is sent again
        if self._worker is not None:
            try:
                self._worker.close()
            finally:
                self._worker = None
                if self._home is not None:
                    home, self._home = self._home, None
                    self.isolation.ended(home)

    def _request(self, worker: Worker, function: str, args: Sequence[Sequence[Any]]) -> int | None:
        """Send a request; its sequence number, or None if the worker is gone."""
        self._seq += 1  # answers to an earlier request (a forked copy of the worker...) are ignored
        stand_ins = b', "stand_ins": %s' % json.dumps(list(self.stand_ins.names)).encode() if self.stand_ins else b""
        cases = _encoded_cases(args)
        header = b'{"seq": %d, "function": %s%s, "bytes": %d, "cases": %s}\n' % (
            self._seq, json.dumps(function).encode(), stand_ins, cases.size, cases.text)
        return self._seq if worker.send(header, *cases.data) else None

    def run(self, function: str, args: Sequence[Sequence[Any]], seconds: float,
            then: tuple[str, Sequence[Sequence[Any]]] | None = None) -> ProblemRun:
        """Run `function` on each argument list; never raises for anything the student does.

        `then`: the next problem's (function, argument lists), sent at once so the worker starts
        on it while this problem is judged; its own `run` call then only collects the answers.
        Its time limit counts from the end of this problem."""
        if time.monotonic() >= self.deadline:
            self._retire()
            spent = CaseRun(RunStatus.TIMEOUT, detail="the submission's total time limit ran out")
            return ProblemRun(tuple(spent for _ in args), rest=spent)
        if not self._ensure_loaded() or self._worker is None:  # loaded: its worker is running
            return ProblemRun(tuple(CaseRun(RunStatus.LOAD_FAILED) for _ in args), rest=CaseRun(RunStatus.LOAD_FAILED))
        worker = self._worker
        ahead, self._ahead = self._ahead, None
        seq: int | None
        if (ahead is not None and ahead.worker is worker and ahead.function == function
                and len(ahead.args) == len(args) and all(a is b for a, b in zip(ahead.args, args))):
            seq, started, marks = ahead.seq, ahead.started or time.monotonic(), ahead.marks
        else:
            marks = worker.stdout.mark(), worker.stderr.mark()
            seq, started = self._request(worker, function, args), time.monotonic()
        if then is not None and seq is not None and _encoded_cases(then[1]).size <= PREFETCH_BYTES:
            next_seq = self._request(worker, *then)
            if next_seq is not None:
                self._ahead = _Ahead(worker, then[0], then[1], next_seq)
        results: dict[int, CaseRun] = {}
        deadline = min(self.deadline, started + seconds)
        stop: CaseRun | None = None
        wrote = True  # unless the worker says otherwise, what it printed so far is this problem's
        if seq is None:
            stop = CaseRun(RunStatus.CRASHED, detail=worker.exit_description())
        while stop is None:
            event = worker.next_event(deadline)
            if event is None:
                stop = CaseRun(RunStatus.TIMEOUT, detail=f"time limit of {seconds:g} s for this problem")
                if deadline >= self.deadline:
                    stop = CaseRun(RunStatus.TIMEOUT, detail="the submission's total time limit ran out")
                break
            kind = event.get("event")
            if kind == "call":  # a stand-in waits for the grader's answer (StandIns)
                worker.send(answer_call(self.stand_ins, event, deadline))
                continue
            if kind in ("done", "no_function", "case") and event.get("seq") != seq:
                continue
            if kind == "done":
                wrote = event.get("wrote") is not False
                break
            if kind == "no_function":
                stop = CaseRun(RunStatus.NO_FUNCTION)
                wrote = False
                break
            if kind == "case" and isinstance(event.get("id"), int) and 0 <= event["id"] < len(args):
                results[event["id"]] = _case_run(event)
                continue
            if kind == "exited":
                stop = CaseRun(RunStatus.CRASHED, detail=worker.exit_description())
            else:
                why = f" ({event['why']})" if isinstance(event.get("why"), str) else ""
                stop = CaseRun(RunStatus.CRASHED, detail=f"the process sent an unreadable answer{why}")
        finished = time.monotonic()
        failed = stop is not None and stop.status is not RunStatus.NO_FUNCTION
        if failed:
            worker.kill()  # every process of the session stops writing before its output is read
        if self._ahead is not None and not failed and not wrote:
            stdout = stderr = ""  # it printed nothing: what arrives now is the next problem's
            self._ahead.marks = marks
        else:
            worker.drain()
            stdout, stderr = worker.stdout.since(marks[0]), worker.stderr.since(marks[1])
            if self._ahead is not None:
                self._ahead.marks = worker.stdout.mark(), worker.stderr.mark()
            if wrote and not failed:
                worker.send(b'{"go": true}\n')  # it waits for this before the next problem
        if self._ahead is not None:
            self._ahead.started = finished
        if failed or worker.proc.returncode is not None or worker.others_running():
            self._retire()  # a fresh process, with no leftovers, serves the next problem
        runs = []
        rest = None if stop is None else stop if stop.status is RunStatus.NO_FUNCTION else CaseRun(
            stop.status, detail="not run: an earlier case of this problem did not finish")
        for i in range(len(args)):
            if i in results:
                runs.append(results[i])
            elif stop is None:
                runs.append(CaseRun(RunStatus.CRASHED, detail="no answer for this case"))
            else:  # the case that was running when it stopped, then the ones never reached
                runs.append(stop)
                stop = rest
        return ProblemRun(tuple(self._scrub_run(r) for r in runs), stdout=self._scrub(stdout),
                          stderr=self._scrub(stderr), seconds=finished - started, rest=rest)

    def _scrub(self, text: str) -> str:
        """Student text without this session's temporary folder, so the same code reports the same bytes."""
        return text.replace(f"{self._tmp}/", "").replace(str(self._tmp), ".")

    def _scrub_run(self, run: CaseRun) -> CaseRun:
        if run.error is None and not run.detail:
            return run
        error = run.error and replace(run.error, message=one_line(self._scrub(run.error.message)))
        return replace(run, error=error, detail=self._scrub(run.detail))

    def begin(self) -> None:
        """Start the submission's budget, and the wait for its process to start, now: for a session
        started early (grade.early_session), whose process started while the grader read the cases."""
        shift = time.monotonic() - self.start
        self.start += shift
        self.deadline += shift
        self._start_by += shift

    def close(self) -> None:
        """Kill every process of the session, delete its files, release its uid (once: closing
        again does nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            try:
                self._retire()
            finally:
                self.isolation.close()
        finally:
            remove_tree(self._tmp)  # however deep the student's folders go, whatever their modes

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@record
class _Encoded:
    """The cases of a request as sent: `text`, their JSON, in which each input array is
    {"nd": [offset, length], "shape": [...], "dtype": ...}, naming its bytes (native byte order, C
    order) in the request's binary part, `data` (`size` bytes, sent right after the JSON line)."""

    text: bytes
    data: tuple[bytes | memoryview, ...]
    size: int


_ENCODED: OrderedDict[tuple[int, ...], tuple[Sequence[Sequence[Any]], _Encoded]] = OrderedDict()
_ENCODED_LOCK = threading.Lock()


def _number(value: Any) -> int | None:
    """A line or column number from the worker's event (an int or digits), else None."""
    text = str(value) if isinstance(value, (int, str)) else ""
    return int(text) if text.isdigit() and len(text) < 10 else None  # never a 400-digit "line"


def _encoded_cases(args: Sequence[Sequence[Any]]) -> _Encoded:
    """The cases of a request (see _Encoded). Memoized by the identity of the argument lists, which
    the memo keeps alive (so an id cannot be reused while its entry is kept): in a batch on one
    seed, every submission is sent the very same prepared inputs."""
    key = tuple(id(case) for case in args)
    with _ENCODED_LOCK:
        known = _ENCODED.get(key)
        if known is not None and all(a is b for a, b in zip(known[0], args)):
            _ENCODED.move_to_end(key)
            return known[1]
    data: list[bytes | memoryview] = []
    size = [0]
    text = b"[%s]" % b", ".join(
        b'{"id": %d, "args": [%s]}' % (i, b", ".join(_encoded_arg(a, data, size) for a in case))
        for i, case in enumerate(args))
    encoded = _Encoded(text, tuple(data), size[0])
    with _ENCODED_LOCK:
        _ENCODED[key] = (list(args), encoded)
        while len(_ENCODED) > 64:
            _ENCODED.popitem(last=False)
    return encoded


_LITERALS = {True: b"true", False: b"false", None: b"null"}
_DTYPE_NAMES: dict[np.dtype, tuple[np.dtype, bytes]] = {}  # dtype -> (its native byte order, that one's name)


def _encoded_arg(value: Any, data: list[bytes | memoryview], size: list[int]) -> bytes:
    """One input's JSON; an array's bytes go to `data` (`size[0]` bytes so far), in native byte
    order and C order: from the array's own memory when it is that already (no copy), and each
    dtype's name looked up once (numpy works it out on every call)."""
    kind = value.__class__
    if kind is int:  # most inputs that are no array: sizes, counts, seeds
        return b"%d" % value
    if kind is bool or value is None:
        return _LITERALS[value]
    if not isinstance(value, np.ndarray):
        return json.dumps(encode_arg(value)).encode()
    known = _DTYPE_NAMES.get(value.dtype)
    if known is None:
        native_type = value.dtype.newbyteorder("=")
        known = _DTYPE_NAMES[value.dtype] = (native_type, native_type.name.encode())
    native_type, name = known
    native = value.astype(native_type, order="C", copy=False)
    raw = native.data.cast("B") if native.flags.c_contiguous and native.size else native.tobytes()
    offset = size[0]
    data.append(raw)
    size[0] += len(raw)
    return b'{"nd": [%d, %d], "shape": [%s], "dtype": "%s"}' % (
        offset, len(raw), b", ".join(b"%d" % side for side in native.shape), name)


def _case_run(event: dict) -> CaseRun:
    raw_seconds = event.get("seconds")
    seconds = float(raw_seconds) if isinstance(raw_seconds, (int, float)) else 0.0
    if event.get("ok") is True:
        try:
            return CaseRun(RunStatus.RETURNED, value=decode_value(event.get("value")), seconds=seconds)
        except (DecodeError, RecursionError) as exc:
            return CaseRun(RunStatus.BAD_RESULT, detail=f"the returned value could not be read ({exc})")
    error = event.get("error")
    if not isinstance(error, dict):
        return CaseRun(RunStatus.BAD_RESULT, detail="the process sent an unreadable answer")
    raw_mro = error.get("mro")
    mro = raw_mro if isinstance(raw_mro, list) else []
    where = error.get("where")
    err = StudentError(type=one_line(error.get("type"), 80), bases=tuple(one_line(m, 80) for m in mro[:20]),
                       message=one_line(error.get("message", ""), 500), where=one_line(where, 40) if where else None)
    if err.type == "BadResult":
        return CaseRun(RunStatus.BAD_RESULT, error=err, detail=err.message, seconds=seconds)
    return CaseRun(RunStatus.RAISED, error=err, seconds=seconds)
