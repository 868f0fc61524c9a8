"""A student's own mistake found behind a broken helper: a failing function that calls the
student's own failing functions is graded again, in the sandbox like any student run, with the
course's reference answering in their place.

The course's code never enters the student process. In the re-run each helper's name in the
student's module is bound to a stand-in (sandbox/worker.py) that sends the arguments it is
given, as plain data, to the grader. The grader checks them against fixed bounds
(sandbox/session.py) and has the course's reference answer them in a `ReferenceServer`: a
process of its own, started for the re-run, with a memory limit and the problem's deadline, so a
call that would take the course's code (trusted, but not written for any size a student sends)
too long or too far costs that call, never the grader. Only the answer goes back. So student code
that looks at its helper (its `__code__`, its source, its globals) finds the worker's stand-in,
never course code.

Student code can tell it is being re-run, and choose how it behaves there. So the re-run is
sent the public cases only: no hidden input enters it, and what it reports (diagnosis.py: "passes
every public case", "still fails 2 of 4 public cases", a named mistake) is about public cases
alone, never a verdict or a count over hidden ones. Its score is never used and what it
prints is never shown.

Cost: only a problem that failed AND calls a failing graded function the student has started
(not every one a stub) is run again, once per set of helpers replaced, within what is left of
the submission's time budget.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..course.model import Problem
from ..sandbox.session import MAX_MESSAGE, CallRefused, Limits, from_plain, plain
from .diagnosis import failing_callees
from .results import ProblemResult

__all__ = ["ReferenceServer", "helper_references", "grade_behind_helpers"]

_MIN_SECONDS = 2.0  # a re-run with less of the submission's budget left is not started


def helper_references(code: Path | None, names: Sequence[str]) -> dict[str, Callable] | None:
    """The course's reference of each of `names` (the functions the grader answers for in a re-run);
    None when the course has no code (the student bundle) or lacks one of them."""
    if code is None:
        return None
    from ..course.code import course_function
    found = {}
    for name in names:
        fn = course_function(code, name)
        if fn is None:
            return None
        found[name] = fn
    return found


def grade_behind_helpers(problems: Sequence[Problem], results: Sequence[ProblemResult], source: str | None,
                         submission: bytes, cases: Callable[[Problem], list], limits: Limits, start: float,
                         run: Callable[..., tuple[ProblemResult, ...] | None]) -> dict[str, ProblemResult]:
    """Each failing problem that calls the student's failing functions, graded again on its public
    cases with the course's reference answering for those functions: problem id -> that run's
    result. `run(submission, problems, cases, limits, server)` grades in a fresh sandbox session
    whose student process calls the grader for the functions `server` (a ReferenceServer) answers;
    None when it could not load."""
    behind = failing_callees(problems, results, source)
    by_function = {p.function.name: p for p in problems}
    result_of = {p.function.name: r for p, r in zip(problems, results) if r.id == p.id}
    groups: dict[tuple[str, ...], list[Problem]] = {}
    for problem in problems:
        helpers = behind.get(problem.id)
        # helpers not started yet (every one a stub) leave nothing to tell: the pointer says to write them
        if helpers and not all(result_of[h].not_implemented for h in helpers if h in result_of) \
                and any(not c.hidden for c in problem.cases):
            groups.setdefault(tuple(helpers), []).append(problem)

    def public(problem: Problem) -> list:
        return [c for c in cases(problem) if not c.case.hidden]

    found: dict[str, ProblemResult] = {}
    for names, group in groups.items():
        left = limits.submission_seconds - (time.monotonic() - start)
        code = {by_function[h].code for h in names}
        where = code.pop() if len(code) == 1 else None
        if where is None or helper_references(where, names) is None or left < _MIN_SECONDS:
            continue
        with ReferenceServer(where, names, limits) as server:
            again = run(submission, group, public, replace(limits, submission_seconds=left), server)
        if again is not None:
            found.update((r.id, r) for r in again)
    return found


def answer(references: Mapping[str, Callable], name: str, args: list, kwargs: dict):
    """The course reference's answer for a stand-in's call (the arguments already decoded and bounded)."""
    import warnings

    import numpy as np
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return references[name](*args, **kwargs)


class ReferenceServer:
    """The course's reference of `names`, answering a re-run's stand-ins from a process of its own
    (`python -I -m grader.grading.cascade CODE NAME...`), started at the first call. It runs as the
    grader's user, with the student process's memory limit; a call it does not answer by the
    problem's deadline stops it, and every later call of the re-run is refused."""

    def __init__(self, code: Path, names: Sequence[str], limits: Limits):
        self.code, self.names, self.limits = Path(code), tuple(names), limits
        self._proc: subprocess.Popen | None = None
        self._broken = False

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-I", "-m", __name__, str(self.code), *self.names],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                cwd=self.code.parent, env={"PATH": os.environ.get("PATH", ""),
                                                           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        try:
            import resource
            memory = self.limits.memory_bytes
            resource.prlimit(proc.pid, resource.RLIMIT_AS, (memory, memory))
        except (ImportError, AttributeError, OSError, ValueError):
            pass  # off Linux: the deadline alone bounds it
        return proc

    def __call__(self, name: str, args: list, kwargs: dict, deadline: float):
        """The answer, as `plain` JSON, to `name(*args, **kwargs)`; CallRefused when there is none."""
        if self._broken or name not in self.names:
            raise CallRefused(f"the course's {name} cannot answer now")
        if self._proc is None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        line = json.dumps({"name": name, "args": plain(args), "kwargs": plain(kwargs)}).encode() + b"\n"
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
            reply = self._read_line(proc, deadline)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            self.close()
            self._broken = True
            raise CallRefused(f"the course's {name} did not answer in time")
        try:
            message = json.loads(reply)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("ok") is not True or "value" not in message:
            raise CallRefused(f"the course's {name} could not answer these arguments")
        return message["value"]

    @staticmethod
    def _read_line(proc: subprocess.Popen, deadline: float) -> bytes | None:
        assert proc.stdout is not None
        data = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not data.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or len(data) > MAX_MESSAGE or not selector.select(timeout=left):
                    return None
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    return None
                data += chunk
        return data

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            self._proc = None

    def __enter__(self) -> ReferenceServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(code: str, names: Sequence[str]) -> None:
    """The ReferenceServer's process: one JSON line in ({name, args, kwargs} as `plain` wrote
    them), one out ({ok, value}). What the course's code prints goes to stderr, off the protocol."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    references = helper_references(Path(code), names) or {}
    for line in sys.stdin:
        try:
            message = json.loads(line)
            args, kwargs = from_plain(message["args"]), from_plain(message["kwargs"])
            reply = {"ok": True, "value": plain(answer(references, message["name"], list(args), dict(kwargs)))}
        except Exception:  # the reference refused these arguments: the call fails, its reason stays here
            reply = {"ok": False}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
