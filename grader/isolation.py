"""Who student code runs as, and how the grader cleans up after it.

As root (Gradescope, most CI containers) each session claims a fresh unprivileged uid/gid that
owns nothing on the machine. The student process starts as root only to load Python and numpy,
then switches to that uid for good (in `_worker.py`) before it imports the submission. The grader
first removes "others" access from the folders it must keep private, so the student uid cannot
read the reference, the hidden cases or the solutions. After the session every process of that
uid is killed and every file it left in a world-writable folder is deleted.

Without root, student code runs as the grader's own user. Its processes are found by their
ancestry (the grader and the worker are child subreapers, so double-forked daemons stay in the
tree) and by a random marker in their environment, then killed; nothing else is isolated.
See "Security model" in README.md.
"""
from __future__ import annotations

import ctypes
import functools
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .errors import InternalError

__all__ = ["Isolation", "PACKAGE", "SANDBOX_IDS", "SHARED_DIRS", "private_paths", "processes", "protect"]

SANDBOX_IDS = range(61000, 65000)   # uid = gid of a session's student user; unused on the machine
SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where any user may create files
MARKER = "MHA_SANDBOX"              # environment variable carrying the session's marker
PACKAGE = Path(__file__).resolve().parent
KILL_SECONDS = 5.0
_PR_SET_CHILD_SUBREAPER = 36


def private_paths(assignment_root: Path) -> tuple[Path, ...]:
    """Folders student code must not read: the grader package (with the reference), the
    assignment (hidden cases), and the `solutions/` and `.git/` beside it."""
    root = Path(assignment_root).resolve()
    return (PACKAGE, root, root.parent / "solutions", root.parent / ".git")


def protect(paths: Iterable[Path]) -> None:
    """Remove "others" access (o-rwx) from each existing folder; the student uid is an "other"."""
    for path in paths:
        path = Path(path)
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue
        if path.resolve() == Path(path.resolve().anchor):
            raise InternalError(f"{path}: refusing to make the file system root private")
        if mode & 0o007:
            try:
                os.chmod(path, mode & ~0o007)
            except OSError as exc:
                raise InternalError(f"{path}: cannot remove access by other users ({exc.strerror}); "
                                    "student code could read it") from exc


@dataclass(frozen=True)
class Proc:
    """One line of the process table."""

    pid: int
    ppid: int
    uids: tuple[int, ...]  # real, effective, saved, file-system
    state: str             # R, S, D, T, t, Z, X...

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


Select = Callable[[dict[int, Proc]], set[int]]  # picks a session's pids from a process table


def processes() -> dict[int, Proc]:
    """Every process on the machine, from /proc (processes that vanish while read are skipped)."""
    table: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:  # not Linux: only the worker's process group is killed (README, "Security model")
        return table
    for name in names:
        if name.isdigit():
            proc = _status(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _status(pid: int) -> Proc | None:
    """State, parent and uids from /proc/PID/status (the fields come in this order, Name first)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            data = handle.read(1024)
        state = ppid = None
        for line in data.split(b"\n")[1:]:  # skip Name: student code chooses it
            if line.startswith(b"State:"):
                state = line.split()[1].decode()
            elif line.startswith(b"PPid:"):
                ppid = int(line.split()[1])
            elif line.startswith(b"Uid:"):
                return Proc(pid, ppid, tuple(int(u) for u in line.split()[1:]), state) if ppid is not None else None
    except (OSError, ValueError, IndexError):
        pass
    return None


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def _tree(table: dict[int, Proc], roots: Iterable[int]) -> set[int]:
    """`roots` (those still in the table) and all their descendants."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(), [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_until_gone(select: Select) -> set[int]:
    """SIGKILL the selected processes until a scan finds none alive; returns every pid killed."""
    me, killed = os.getpid(), set()
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        table = processes()
        alive = {pid for pid in select(table) if pid != me and pid in table and table[pid].alive}
        if not alive or time.monotonic() > deadline:
            return killed
        _signal_all(alive, signal.SIGKILL)
        killed |= alive
        time.sleep(0.002)


def _freeze(select: Select) -> set[int]:
    """SIGSTOP the selected processes until all are stopped; returns them."""
    me = os.getpid()
    for _ in range(100):
        table = processes()
        running = {pid for pid in select(table) - {me} if table[pid].state not in ("T", "t", "Z", "X")}
        if not running:
            break
        _signal_all(running, signal.SIGSTOP)
        time.sleep(0.001)
    return select(processes()) - {me}


def _including(select: Select, pids: set[int]) -> Select:
    return lambda table: select(table) | (pids & table.keys())


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of killed processes that ended up as our children (we are a subreaper)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children instead of init's (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _known_id(number: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(number)
            return True
        except KeyError:
            pass
    return False


def _claim_id() -> tuple[int, socket.socket]:
    """A uid (= gid) from SANDBOX_IDS that no account, process or concurrent session uses.

    The claim is an abstract unix socket named after the uid: no file, released when the grader
    exits, and a second grader on the machine cannot bind the same name.
    """
    for _ in range(200):
        number = SANDBOX_IDS[secrets.randbelow(len(SANDBOX_IDS))]
        if _known_id(number):
            continue
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            lock.bind(f"\0mha-sandbox-{number}")
        except OSError:
            lock.close()
            continue
        if any(number in proc.uids for proc in processes().values()):
            lock.close()
            continue
        return number, lock
    raise InternalError(f"no free uid for student code in {SANDBOX_IDS.start}-{SANDBOX_IDS.stop - 1}")


@functools.lru_cache(maxsize=None)
def _writable_dirs(roots: tuple[str, ...], budget: int = 100_000) -> tuple[str, ...]:
    """World-writable folders that any user can reach under `roots`.

    Found once per process (a walk of /tmp can take a fifth of a second): in a long-running
    grader, a world-writable folder that someone else creates later is not swept.
    """
    found, todo = [], list(roots)
    while todo and budget > 0:
        path = todo.pop()
        budget -= 1
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISDIR(mode) or not mode & stat.S_IXOTH:
            continue  # not a folder, or one other users cannot enter
        if mode & stat.S_IWOTH:
            found.append(path)
        try:
            with os.scandir(path) as entries:
                todo.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return tuple(found)


def _sweep(uid: int, folders: Iterable[str]) -> None:
    """Delete what `uid` created in `folders`: its files, links, sockets, and whole folders."""
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _user_tasks(uid: int) -> int:
    """Processes and threads of `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for proc in processes().values():
        if proc.uids[0] == uid:
            try:
                with open(f"/proc/{proc.pid}/status", "rb") as handle:
                    total += next((int(line.split()[1]) for line in handle if line.startswith(b"Threads:")), 1)
            except (OSError, ValueError, IndexError):
                total += 1
    return total


class Isolation:
    """One session's student identity, and the clean-up of everything it started or wrote."""

    def __init__(self, separate_user: bool | None = None, private: Iterable[Path] = ()):
        root = os.geteuid() == 0
        self.separate_user = root if separate_user is None else separate_user
        if self.separate_user and not root:
            raise InternalError("running student code as a separate user needs root")
        self.marker = secrets.token_hex(12)
        self.uid: int | None = None
        self.gid: int | None = None
        self._lock: socket.socket | None = None
        become_subreaper()
        if self.separate_user:
            protect((PACKAGE, *private))
            self.uid, self._lock = _claim_id()
            self.gid = self.uid

    def env(self) -> dict[str, str]:
        return {MARKER: self.marker}

    def worker_args(self) -> list[str]:
        """Arguments telling `_worker.py` which uid/gid to switch to (none without root)."""
        return ["--user", str(self.uid), str(self.gid)] if self.separate_user else []

    def process_limit(self, processes: int) -> int:
        """RLIMIT_NPROC for the student: per uid, so exact for a fresh uid, approximate otherwise."""
        return processes if self.separate_user else _user_tasks(os.getuid()) + processes

    def prepare(self, folder: Path) -> Path:
        """Give the student read access to `folder` (worker and submission), and a home inside it.

        As root: `folder` and its files are root-owned and readable by the student's group only,
        so student code cannot change the worker or the submission between problems; the home
        is the student's own (mode 0700).
        """
        home = folder / "home"
        home.mkdir(mode=0o700)
        if self.separate_user:
            for path in folder.iterdir():
                if path.is_file():
                    os.chown(path, 0, self.gid)
                    os.chmod(path, 0o640)
            os.chown(folder, 0, self.gid)
            os.chmod(folder, 0o750)
            os.chown(home, self.uid, self.gid)
        return home

    def _select(self, worker: int | None) -> Select:
        """Which processes belong to this session (zombies included): `worker` and its descendants,
        and, as root, every process of the student uid; without root, every process carrying the
        session's marker, and their descendants."""
        roots = {worker} if worker else set()
        if self.separate_user:
            uid = self.uid
            return lambda table: {p.pid for p in table.values() if uid in p.uids} | _tree(table, roots)
        me, marker = os.getuid(), f"{MARKER}={self.marker}".encode()

        def select(table: dict[int, Proc]) -> set[int]:
            marked = {p.pid for p in table.values() if p.uids[0] == me and p.alive and _has_marker(p.pid, marker)}
            return _tree(table, marked | roots)
        return select

    def others_running(self, worker: int) -> bool:
        """Whether any process of the session other than `worker` is alive (children, daemons)."""
        table = processes()
        return any(pid != worker and table[pid].alive for pid in self._select(worker)(table))

    def kill_all(self, worker: int | None = None) -> None:
        """Kill every process of the session (`worker` and its descendants included), and reap
        those that end up as our children (we are a subreaper), exited orphans included.

        Without root the session's processes are first frozen with SIGSTOP, so none can fork or
        leave the tree while it is being killed.
        """
        select = self._select(worker)
        members = select(processes())
        if not self.separate_user:
            frozen = _freeze(select)
            _signal_all(frozen, signal.SIGKILL)
            members |= frozen
            select = _including(select, frozen)
        members |= _kill_until_gone(select) | select(processes())
        _reap(members - {worker, os.getpid()})

    def close(self) -> None:
        """Kill what is left, delete the student's files in world-writable folders, release the uid."""
        self.kill_all()
        if self.separate_user:
            roots = tuple(dict.fromkeys((*SHARED_DIRS, tempfile.gettempdir())))
            _sweep(self.uid, _writable_dirs(roots))
        if self._lock is not None:
            self._lock.close()
            self._lock = None
