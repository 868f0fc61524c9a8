"""How student processes start: forked from a zygote with Python and numpy loaded (Linux), or
as a fresh `python -I worker.py` (elsewhere).

Starting Python and importing numpy is most of what a fresh student process costs, and it
was paid once per submission and again after every timeout or crash. The zygote is the
worker script run with `--zygote`: it imports numpy and the preloaded standard modules and
nothing of the grader (no reference, no problems, no expected values, no submission), never
runs student code, and forks one student process per request. Each child then starts as a
directly started worker does: its own session and process group, fresh pipes, only its own
file descriptors, its session's folder and environment, the resource limits, the switch to
the student's uid (as root), and only then the submission. So every submission, and every
problem after a timeout, still gets a process of its own; it only skips the imports.

The zygote runs as the grader's user and talks to the grader only over a unix socket pair. It
exits (and its children die, by their parent-death signal) as soon as the grader closes the
socket or dies. It is not dumpable, so without root a student process cannot trace it or read
its memory (it can signal it, as it can signal the grader: docs/security.md). One
zygote serves every session of a grader process (threads included); a dead one is replaced at
the next start.
"""
from __future__ import annotations

import atexit
import fcntl
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol, cast

from ..errors import InternalError
from ..paths import PACKAGE, cache_dir, remove_tree
from . import zygote_start
from .zygote_start import MARKER, MARKER_LENGTH, student_env

__all__ = ["MARKER", "MARKER_LENGTH", "WORKER", "ForkServer", "StudentProcess", "adopt_spare", "fork_server", "pipe", "prestart",
           "prestart_spares", "reap", "reap_spares", "start_student", "stop_fork_server", "student_env", "use_spare"]

WORKER = Path(zygote_start.WORKER)
FORK_SERVER = sys.platform == "linux" and hasattr(socket, "send_fds")  # else: one Python per student process


class StudentProcess(Protocol):
    """What the sandbox needs of a student process (a subprocess.Popen is one)."""

    @property
    def pid(self) -> int: ...

    stdin: IO[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]

    @property
    def returncode(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class ForkedProcess:
    """A student process forked by the zygote: Popen's surface, with the exit status from the zygote.

    It is asked for (`ForkServer.request`) and this object made at once: the grader goes on with its
    work while the zygote (still loading numpy, on a cold start) forks it. Its pid and how it runs
    (`jailed`, `why`) are read from the zygote's reply when first needed (`started`), waiting for
    it until `deadline`; a spawn the zygote refused raises InternalError then, as it would have."""

    def __init__(self, server: ForkServer, request: int, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes],
                 deadline: float):
        self.server = server
        self._request: int | None = request  # until the reply is read
        self._deadline = deadline
        self._pid: int | None = None
        self._jailed, self._why = False, ""
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._code: int | None = None  # set once waited for
        self._released = False         # then the zygote may reap it
        self._reaped = False           # and it was seen reaped (`release`)

    def started(self) -> bool:
        """Whether the zygote forked it (its reply read, waited for if need be); InternalError if it
        said why not, or did not answer by the deadline."""
        if self._request is not None:
            request, self._request = self._request, None
            reply = self.server.reply(request, self._deadline)  # (raises if the zygote refused)
            self._pid = int(reply["pid"])
            self._jailed, self._why = bool(reply.get("jailed")), str(reply.get("why", ""))
        return self._pid is not None

    def _known(self) -> bool:
        """`started`, without raising: False if it never was."""
        try:
            return self.started()
        except InternalError:
            return False

    def ran_jailed(self) -> bool:
        """Whether it was forked, in namespaces (process 1 of its own process-id space); never raises."""
        return self._known() and self._jailed

    @property
    def pid(self) -> int:
        self.started()
        return cast(int, self._pid)

    @property
    def jailed(self) -> bool:
        """It runs in namespaces (jail.py)."""
        self.started()
        return self._jailed

    @property
    def why(self) -> str:
        """Why not, if namespaces were asked for."""
        self.started()
        return self._why

    @property
    def returncode(self) -> int | None:
        """The exit status once known; once released unawaited, that of the SIGKILL it was given."""
        if self._code is None and (self._released or not self._known()):
            return -signal.SIGKILL
        return self._code if self._code is not None else self.server.status(cast(int, self._pid))

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; then the zygote reaps the process (its pid is no longer ours)."""
        if self._code is None and (self._released or not self._known()):
            return -signal.SIGKILL
        if self._code is None:
            code = self.server.wait(cast(int, self._pid), timeout)
            if code is None:
                raise subprocess.TimeoutExpired(f"student process {self.pid}", timeout or 0)
            self._code = code
            self.release()
        return self._code

    def release(self, seconds: float = 1.0) -> bool:
        """Let the zygote reap the process, and wait (up to `seconds`) until it has: a zombie is a
        process left behind too. The grader does not signal it again (its pid may be reused).
        Whether it was seen reaped (now or at an earlier call)."""
        if self._released or not self._known():
            return self._reaped
        self._released = True
        try:
            handle = os.pidfd_open(self.pid)  # before the release: surely this process
        except (OSError, AttributeError):
            handle = None
        self.server.release(self.pid)
        if handle is None:
            return False
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if not self.server.alive:  # orphaned by the zygote, it came to us (a subreaper)
                    try:
                        os.waitpid(self.pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
                try:
                    signal.pidfd_send_signal(handle, 0)
                except ProcessLookupError:  # reaped (a zombie still takes signal 0)
                    self._reaped = True
                    return True
                except OSError:
                    return False
                time.sleep(0.0002)
            return False
        finally:
            os.close(handle)

    def kill(self) -> None:
        if not self._released and self._known():  # reaped only once released: the pid is still this process
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


class _Started:
    """Popen's surface for the zygote `zygote_start` started: a child of this process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._waited(os.WNOHANG)

    def _waited(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: as Popen says then
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            return cast(int, self._waited(0))
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout)
            time.sleep(0.001)
        return cast(int, self.returncode)

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


class ForkServer:
    """The zygote process and the grader's end of its socket."""

    def __init__(self, read: bool = True, early: tuple[int, int, int] | None = None) -> None:
        """`read`: start reading the zygote's messages now (a spare: once a grader process adopts it).
        `early`: a zygote zygote_start started (its pid, our end of its socket, its stderr file)."""
        if early is not None:
            pid, fd, errors = early
            self.proc: subprocess.Popen | _Started = _Started(pid)
            self._errors = os.fdopen(errors, "w+b")
            ours = socket.socket(fileno=fd)
        else:
            ours = self._start()
        self._sock = ours
        self._send_lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: dict[int, dict] = {}   # spawn request id -> {"pid": ...} or {"error": ...}
        self._status: dict[int, int] = {}     # pid -> exit status (Popen's returncode)
        self._released: set[int] = set()     # released before their exit status came
        self._closed = False
        self._ids = itertools.count(1)
        self.spawned = 0  # student processes forked so far
        self.prepared: tuple[bool, str] | None = None  # what came of `prepare`: namespaces work, or why not
        self._ahead: Path | None = None  # the folder `prepare` lends the zygote until then
        self._asked = False  # `prepare` was called (once is enough)
        self._parent = os.getpid()  # the zygote's parent: the one process that can wait for it
        if read:
            self._start_reading()

    def _start(self) -> socket.socket:
        """Start the zygote (Popen); our end of its socket."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._errors = tempfile.TemporaryFile()
        try:
            argv, env = zygote_start.command(theirs.fileno())
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._errors,
                pass_fds=(theirs.fileno(),), cwd="/", env=env, start_new_session=True, close_fds=True)
        except OSError as exc:
            ours.close()
            self._errors.close()
            raise InternalError(f"cannot start the student process: {exc}") from exc
        finally:
            theirs.close()
        return ours

    def _start_reading(self) -> None:
        threading.Thread(target=self._read, name="mha-fork-server", daemon=True).start()

    def _adopted(self) -> None:
        """In a grader process forked from the one that started this zygote (see `prestart_spares`):
        it serves this process from now on. Its state is fresh here (no thread of the parent
        survives a fork), so the locks are made anew, and the zygote's messages are read here."""
        self._send_lock = threading.Lock()
        self._changed = threading.Condition()
        self._start_reading()

    @property
    def alive(self) -> bool:
        if os.getpid() != self._parent:  # adopted: only its parent can wait for it; its end closes the socket
            return not self._closed
        return not self._closed and self.proc.poll() is None

    def _read(self) -> None:
        """Replies and exit statuses from the zygote, until it closes the socket."""
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._closed = True
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if "id" in message:
                    self._replies[message["id"]] = message
                elif "pid" in message and message["pid"] in self._released:
                    self._released.discard(message["pid"])  # nobody waits for it
                elif "pid" in message:
                    self._status[message["pid"]] = int(message["status"])
                elif "prepared" in message:
                    self._drop_ahead()
                    self.prepared = (bool(message["prepared"]), str(message.get("why", "")))
                self._changed.notify_all()

    def _send(self, message: dict, fds: tuple[int, ...] = ()) -> bool:
        try:
            with self._send_lock:
                socket.send_fds(self._sock, [json.dumps(message).encode()], list(fds))
            return True
        except OSError:
            return False

    def request(self, request: dict, fds: tuple[int, int, int, int]) -> int:
        """Ask for a student process with these pipes (stdin, stdout, stderr, results); the request's
        id, for `reply`."""
        rid = next(self._ids)
        if not self._send({"id": rid, "op": "spawn", **request}, fds):
            raise InternalError(f"the student process could not start (the fork server stopped{self._said()})")
        return rid

    def reply(self, rid: int, deadline: float) -> dict:
        """The zygote's reply to spawn request `rid`: its pid, whether it runs in namespaces and, if
        they were asked for and do not work here, why; InternalError if it could not start."""
        reply = self._reply(rid, True, deadline)
        if "error" in reply:
            raise InternalError(f"the student process could not start ({reply['error']})")
        self.spawned += 1
        return reply

    def prepare(self, jail: dict) -> None:
        """Let the zygote build the student's file system and check that namespaces work while it
        waits for its first request (else that request waits for it): `jail` as `start_student`
        takes it, for session folders made where this process makes them, with an empty folder
        made there for it (a session folder would be) and deleted here afterwards. What came of it
        is in `prepared` once done; if it failed, the first request for namespaces tries again."""
        with self._changed:
            if self._asked:
                return
            self._asked = True
        try:
            folder = Path(tempfile.mkdtemp(prefix="mha-run-"))
        except OSError:
            return
        with self._changed:
            self._ahead = folder
        self._send({"op": "prepare", "jail": jail, "folder": str(folder)})

    def _drop_ahead(self) -> None:
        with self._changed:
            folder, self._ahead = self._ahead, None
        if folder is not None:
            remove_tree(folder)

    def clear_keys(self, uid: int, gid: int, deadline: float) -> bool:
        """Empty the per-uid kernel keyrings of a sandbox uid (see confine.clear_user_keyrings)."""
        return bool(self._ask({"op": "clear_keys", "uid": uid, "gid": gid}, (), deadline).get("cleared"))

    def _ask(self, request: dict, fds: tuple[int, ...], deadline: float) -> dict:
        rid = next(self._ids)
        return self._reply(rid, self._send({"id": rid, **request}, fds), deadline)

    def _reply(self, rid: int, sent: bool, deadline: float) -> dict:
        with self._changed:
            while sent and rid not in self._replies and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InternalError("the student process could not start (did not start in time)")
                self._changed.wait(remaining)
            reply = self._replies.pop(rid, None)
        if reply is None:
            raise InternalError(f"the student process could not start (the fork server stopped{self._said()})")
        return reply

    def _said(self) -> str:
        """The last line the zygote wrote to stderr, if any."""
        try:
            self._errors.seek(0)
            lines = self._errors.read(1 << 16).decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return f": {lines[-1][:300]}" if lines else ""

    def status(self, pid: int) -> int | None:
        with self._changed:
            return self._status.get(pid, -signal.SIGKILL if self._closed else None)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The exit status of `pid`, or None if it is still running after `timeout` seconds. If the
        zygote died, its children died of SIGKILL (their parent-death signal)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._status and not self._closed:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)
            if pid in self._status:
                return self._status[pid]
        try:  # orphaned by the zygote, it came to us (a subreaper): collect it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return -signal.SIGKILL

    def release(self, pid: int) -> None:
        """Let the zygote reap `pid` once it has exited; the grader no longer signals it."""
        with self._changed:
            if self._status.pop(pid, None) is None:
                self._released.add(pid)  # its exit status, when it comes, is dropped
        self._send({"op": "release", "pid": pid})

    def close(self, reap: bool = True) -> None:
        """Stop the zygote; children still running die with it (their parent-death signal).
        `reap`: wait for it to be gone (not when this process ends at once: launch._leave)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the reader; the zygote sees the end
        except OSError:
            pass
        self._sock.close()
        if os.getpid() == self._parent:
            self.proc.kill()
            if reap:
                self.proc.wait()
        else:  # adopted: its parent (the batch's process) reaps it, after this process, so the pid is still its own
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self._errors.close()
        self._drop_ahead()

    def hand_over(self) -> None:
        """In the process that started this spare, once a grader process has adopted it: this
        process's end of the socket is closed (the zygote sees its grader's end, and only that),
        and its folder lent to `prepare` is the adopter's to delete; the zygote is reaped by
        `reap_spares`."""
        self._sock.close()
        self._errors.close()


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer:
    """This grader process's zygote: the spare it was forked to adopt, or one started (or replaced,
    if it died) on first use."""
    global _server, _adopt
    with _server_lock:
        if _server is None and isinstance(_adopt, ForkServer):
            adopted, _adopt = _adopt, None
            adopted._adopted()
            atexit.register(_stop)
            _server = adopted
        if _server is None or not _server.alive:
            if _server is None:
                atexit.register(_stop)
            else:
                _server.close()
            _server = ForkServer(early=zygote_start.take())
        return _server


def stop_fork_server(reap: bool = True) -> None:
    """Stop this process's zygote now (at exit it stops by itself; a forked process must call this).
    Without `reap`, its end is not waited for (for a process about to end itself)."""
    _stop(reap)


def _stop(reap: bool = True) -> None:
    global _server, _adopt
    zygote_start.discard()  # started by the launcher, never needed
    with _server_lock:
        if isinstance(_adopt, ForkServer):  # a spare this process was forked to adopt, and never used
            _adopt.close(reap)
            _adopt = None
        if _server is not None:
            _server.close(reap)
            _server = None


def _forget() -> None:
    """In a forked copy of the grader: the zygote is the parent's; this process starts its own, or
    adopts the spare the parent is forking it for (`adopt_spare`). Its copies of the other spares'
    sockets are closed: each zygote must see its own grader's end of the socket, and only that."""
    global _server, _server_lock, _adopt, _spares
    _server, _server_lock = None, threading.Lock()
    adopting, _adopt = _adopt, None
    spares, _spares = _spares, []
    for index, spare in enumerate(spares):
        if index == adopting:
            _adopt = spare
        else:
            spare._sock.close()


_spares: list[ForkServer] = []      # zygotes started ahead for the grader processes this process forks
_handed: list[ForkServer] = []      # spares handed over to grader processes: reaped by reap_spares
_adopt: ForkServer | int | None = None  # the spare the next fork adopts (its index until then)


def prestart_spares(count: int) -> None:
    """Start `count` zygotes now, for the grader processes this process will fork (`adopt_spare`):
    Python and numpy load while the course loads, instead of after each grader process starts.
    As root, each also builds the student's file system ahead (ForkServer.prepare). Never raises:
    a zygote that cannot start is started again by the grader process that needs it."""
    if not FORK_SERVER:
        return
    if not _spares and not _handed:
        atexit.register(reap_spares)  # (a command that fails before grading leaves none running)
    jail = jail_spec()
    for _ in range(count):
        try:
            spare = ForkServer(read=False)
        except InternalError:
            return
        if jail is not None:
            spare.prepare(jail)
        _spares.append(spare)


def adopt_spare(index: int | None) -> None:
    """Say which spare (by its index) the next forked process adopts as its own zygote; with None,
    once that process is forked: this process hands the spare over (closes its end of the socket)."""
    global _adopt
    if index is not None:
        _adopt = index
        return
    adopting, _adopt = _adopt, None
    if isinstance(adopting, int) and adopting < len(_spares):
        _spares[adopting].hand_over()
        _handed.append(_spares[adopting])


def use_spare(index: int) -> None:
    """In the process that started the spares: spare `index` becomes this process's own zygote
    (grading in threads here), if it has none yet."""
    global _server
    with _server_lock:
        if _server is None and index < len(_spares) and _spares[index] not in _handed:
            spare = _spares[index]  # (kept in the list: reap_spares leaves it to _stop, at exit)
            spare._start_reading()
            atexit.register(_stop)
            _server = spare


def reap_spares(seconds: float = 5.0) -> None:
    """In the process that started the spares, once its grader processes are done: stop the
    spares nobody adopted, and wait for the handed-over ones to end (their graders closed their
    sockets; one still there after `seconds` is killed)."""
    global _spares, _handed
    spares, handed = _spares, _handed
    _spares, _handed = [], []
    for spare in spares:
        if spare not in handed and spare is not _server:
            spare.close()
    end = time.monotonic() + seconds
    for spare in handed:
        try:
            spare.proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            spare.proc.kill()
            spare.proc.wait()


os.register_at_fork(after_in_child=_forget)


def prestart() -> None:
    """Start the zygote now, so Python and numpy load while the grader does its own imports.

    As root, it also builds the student's file system ahead (see ForkServer.prepare). Never
    raises: a zygote that cannot start is reported when a student process is needed."""
    if FORK_SERVER:
        try:
            server = fork_server()
        except InternalError:
            return
        jail = jail_spec()
        if jail is not None:
            server.prepare(jail)


def reap(proc: StudentProcess) -> bool:
    """Collect a killed student process: the zygote reaps a forked one (without its exit status
    coming back here), the grader a directly started one. Whether it was seen reaped."""
    if isinstance(proc, ForkedProcess):
        return proc.release()
    proc.wait()
    return True


NAMESPACES_ENV = "MHA_NAMESPACES"  # "off": as root, run student code without namespaces (the fallback)
TMP_BYTES = 128 << 20             # the tmpfs holding a jailed student's /tmp (/var/tmp and /dev/shm lead there)


def namespaces_wanted() -> bool:
    return os.environ.get(NAMESPACES_ENV, "").strip().lower() not in ("off", "0", "no", "false")


def jail_spec(private: Sequence[Path] = ()) -> dict | None:
    """What the fork server needs to run a student process in namespaces (see `start_student`),
    as root unless MHA_NAMESPACES=off; else None. `private`: folders to hide besides the grader
    package and its cache."""
    if os.geteuid() != 0 or not namespaces_wanted():
        return None
    cache = cache_dir()
    return {"tmp_bytes": TMP_BYTES, "hidden": [str(p) for p in (PACKAGE, *private, *((cache,) if cache else ()))]}


def pipe() -> tuple[int, int]:
    """os.pipe() with a 1 MiB buffer where the system allows, so a request or an answer rarely
    waits for the other side to read."""
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (OSError, AttributeError):
        pass
    return read, write


def start_student(submission: Path, rlimits: str, home: Path, user: tuple[int, int] | None,
                  env: dict[str, str], results_fd: int, deadline: float, jail: dict | None = None) -> StudentProcess:
    """A student process for `submission`, writing answers on `results_fd` (the caller closes its copy).
    `jail`: run it in namespaces (as root, with the fork server, where the kernel allows them; see
    jail.py): {"hidden": folders to hide, "tmp_bytes": the size of its /tmp}."""
    env = student_env(str(home), env)
    if not FORK_SERVER:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-u", "-B", str(WORKER), str(submission), str(results_fd), rlimits,
                 *(["--user", str(user[0]), str(user[1])] if user else [])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                pass_fds=(results_fd,), cwd=home, env=env, start_new_session=True, umask=0o077, close_fds=True)
        except OSError as exc:
            raise InternalError(f"cannot start the student process: {exc}") from exc
        student = cast(StudentProcess, proc)  # stdin, stdout and stderr are pipes (PIPE above), never None
        os.set_blocking(student.stdin.fileno(), False)
        return student
    server = fork_server()
    stdin, stdout, stderr = pipe(), os.pipe(), os.pipe()
    try:
        request = {"submission": str(submission), "home": str(home), "limits": rlimits,
                   "user": list(user) if user else None, "env": env, "jail": jail}
        rid = server.request(request, (stdin[0], stdout[1], stderr[1], results_fd))
    except BaseException:
        for fd in (*stdin, *stdout, *stderr):
            os.close(fd)
        raise
    for fd in (stdin[0], stdout[1], stderr[1]):  # the zygote has them now
        os.close(fd)
    os.set_blocking(stdin[1], False)  # requests are written as the pipe takes them (session.Worker.send)
    return ForkedProcess(server, rid, os.fdopen(stdin[1], "wb", buffering=0),
                         os.fdopen(stdout[0], "rb", buffering=0), os.fdopen(stderr[0], "rb", buffering=0), deadline)
