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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .errors import InternalError

__all__ = ["Isolation", "PACKAGE", "SANDBOX_IDS", "SHARED_DIRS", "private_paths", "processes", "protect"]

SANDBOX_IDS = range(61000, 65000)   # uid = gid of a session's student user; unused on the machine
SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where any user may create files
MARKER = "MHA_SANDBOX"              # environment variable carrying the session's marker
MARKER_LENGTH = 24                  # characters of a marker (hex)
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
    """State, parent and uids from /proc/PID/status (after the Name line: student code chooses it)."""
    try:
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY)
        try:
            data = os.read(fd, 1024)
        finally:
            os.close(fd)
        fields = []
        at = data.index(b"\n")
        for key in (b"\nState:", b"\nPPid:", b"\nUid:"):
            at = data.index(key, at) + len(key)
            fields.append(data[at:data.index(b"\n", at)].split())
        state, ppid, uids = fields
        return Proc(pid, int(ppid[0]), tuple(int(u) for u in uids), state[0].decode())
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    proc = _status(pid)
    return proc is not None and proc.alive


_CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _descendants(pid: int) -> set[int]:
    """`pid` and all its descendants, from /proc/PID/task/TID/children: a few small reads."""
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:  # gone
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children", "rb") as handle:
                    todo.extend(int(child) for child in handle.read().split())
            except (OSError, ValueError):
                continue
    return found


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


def _kill_until_gone(select: Select, table: dict[int, Proc] | None = None) -> tuple[set[int], dict[int, Proc]]:
    """SIGKILL the selected processes until a scan finds none alive (the first scan: `table`, if
    given); returns every pid killed and the last scan."""
    me, killed = os.getpid(), set()
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        table = processes() if table is None else table
        alive = {pid for pid in select(table) if pid != me and pid in table and table[pid].alive}
        if not alive or time.monotonic() > deadline:
            return killed, table
        _signal_all(alive, signal.SIGKILL)
        killed |= alive
        time.sleep(0.002)
        table = None


def _freeze(select: Select, table: dict[int, Proc]) -> set[int]:
    """SIGSTOP the selected processes until all are stopped (the first scan: `table`); returns them."""
    me = os.getpid()
    for _ in range(100):
        running = {pid for pid in select(table) - {me} if table[pid].state not in ("T", "t", "Z", "X")}
        if not running:
            break
        _signal_all(running, signal.SIGSTOP)
        time.sleep(0.001)
        table = processes()
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


_walk_lock = threading.Lock()
_walk: threading.Thread | None = None


def _shared_folders() -> tuple[str, ...]:
    """Where any user may create files: SHARED_DIRS, the temporary folder, and every
    world-writable folder below them (walked once per process)."""
    with _walk_lock:
        return _writable_dirs(tuple(dict.fromkeys((*SHARED_DIRS, tempfile.gettempdir()))))


def _walk_soon() -> None:
    """Start the walk of `_shared_folders` in the background, once per process, so the first
    session's clean-up does not wait for it."""
    global _walk
    if _walk is None:
        _walk = threading.Thread(target=_shared_folders, name="mha-shared-folders", daemon=True)
        _walk.start()


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
        self.marker = secrets.token_hex(MARKER_LENGTH // 2)
        self.uid: int | None = None
        self.gid: int | None = None
        self._lock: socket.socket | None = None
        become_subreaper()
        if self.separate_user:
            protect((PACKAGE, *private))
            self.uid, self._lock = _claim_id()
            self.gid = self.uid
            _walk_soon()

    def env(self) -> dict[str, str]:
        return {MARKER: self.marker}

    @property
    def user(self) -> tuple[int, int] | None:
        """The uid and gid student code switches to (None without root)."""
        return (self.uid, self.gid) if self.separate_user else None

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
        """Whether any process of the session other than `worker` is alive (children, daemons).

        While the worker lives, every process student code starts stays below it (the worker is
        a child subreaper: orphans come back to it, double-forked daemons included), so its
        descendants are read from /proc/PID/task/TID/children instead of scanning every process.
        `kill_all` and `close` still scan every process."""
        if _CHILDREN_FILES and _alive(worker):
            return any(_alive(pid) for pid in _descendants(worker) - {worker})
        table = processes()
        return any(pid != worker and table[pid].alive for pid in self._select(worker)(table))

    def kill_all(self, worker: int | None = None) -> None:
        """Kill every process of the session (`worker` and its descendants included), and reap
        those that end up as our children (we are a subreaper), exited orphans included.

        Without root the session's processes are first frozen with SIGSTOP, so none can fork or
        leave the tree while it is being killed.
        """
        select = self._select(worker)
        table: dict[int, Proc] | None = processes()
        members = select(table)
        if not self.separate_user:
            frozen = _freeze(select, table)
            _signal_all(frozen, signal.SIGKILL)
            members |= frozen
            select, table = _including(select, frozen), None
        killed, table = _kill_until_gone(select, table)
        members |= killed | select(table)
        _reap(members - {worker, os.getpid()})

    def close(self) -> None:
        """Kill what is left, delete the student's files in world-writable folders, release the uid."""
        self.kill_all()
        if self.separate_user:
            _sweep(self.uid, _shared_folders())
        if self._lock is not None:
            self._lock.close()
            self._lock = None
