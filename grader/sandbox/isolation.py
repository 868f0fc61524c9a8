"""Who student code runs as, and how the grader cleans up after it.

As root (Gradescope, most CI containers) each session claims a fresh unprivileged uid/gid that
owns nothing on the machine. The student process is forked from a zygote that loaded Python and
numpy as root (see `spawn`), and switches to that uid for good (in `worker.py`) before it
imports the submission. The grader
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
import json
import os
import pwd
import select
import signal
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from . import proctable
from ..errors import InternalError
from ..paths import PACKAGE, remove_tree
from .proctable import Proc, processes
from .spawn import MARKER, MARKER_LENGTH

__all__ = ["Isolation", "PACKAGE", "SANDBOX_IDS", "SHARED_DIRS", "private_paths", "processes", "protect"]

SANDBOX_IDS = range(61000, 65000)   # uid = gid of a session's student user; unused on the machine
SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where any user may create files
KILL_SECONDS = 5.0
_PR_SET_CHILD_SUBREAPER = 36


def private_paths(assignment_root: Path) -> tuple[Path, ...]:
    """Folders student code must not read: the grader package (with the reference), the
    assignment (hidden cases), and the `solutions/` and `.git/` beside it."""
    root = Path(assignment_root).resolve()
    return (PACKAGE, root, root.parent / "solutions", root.parent / ".git")


_protected: set[Path] = set()  # folders made private by this process (the change persists)


def protect(paths: Iterable[Path]) -> None:
    """Remove "others" access (o-rwx) from each existing folder; the student uid is an "other".
    Each folder once per process: a batch does not check them again for every submission."""
    for path in paths:
        path = Path(path)
        if path in _protected:
            continue
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
        _protected.add(path)


Select = Callable[[dict[int, Proc]], set[int]]  # picks a session's pids from a process table


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_until_gone(select: Select, table: dict[int, Proc] | None = None) -> tuple[set[int], dict[int, Proc], bool]:
    """SIGKILL the selected processes until a scan finds none alive (the first scan: `table`, if
    given); returns every pid killed, the last scan, and whether none was left alive."""
    me, killed = os.getpid(), set()
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        table = processes() if table is None else table
        alive = {pid for pid in select(table) if pid != me and pid in table and table[pid].alive}
        if not alive or time.monotonic() > deadline:
            return killed, table, not alive
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
        number = SANDBOX_IDS[int.from_bytes(os.urandom(8), 'big') % len(SANDBOX_IDS)]  # (secrets costs 7 ms to import)
        if _known_id(number):
            continue
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            lock.bind(f"\0mha-sandbox-{number}")
        except OSError:
            lock.close()
            continue
        if number in _uids_in_use():
            lock.close()
            continue
        return number, lock
    raise InternalError(f"no free uid for student code in {SANDBOX_IDS.start}-{SANDBOX_IDS.stop - 1}")


_USED_MAX_AGE = 1.0  # seconds a scan of the uids in use is reused for
_used: tuple[float, frozenset[int]] = (float("-inf"), frozenset())


def _uids_in_use() -> frozenset[int]:
    """Every uid a process has, from a scan at most _USED_MAX_AGE old (one scan serves the
    sessions of a batch that start within it). An older scan is as good as a new one here: a
    process only gets a uid of SANDBOX_IDS from a process that already had it, so was in the
    scan, or from root, that is a grader, which first claims the uid (the socket above); the
    uids are no account's (README, "Security model")."""
    global _used
    taken, uids = _used
    if time.monotonic() - taken > _USED_MAX_AGE:
        taken = time.monotonic()
        uids = frozenset(uid for proc in processes().values() for uid in proc.uids)
        _used = (taken, uids)
    return uids


_walk_lock = threading.Lock()
_walk: threading.Thread | None = None


def _shared_folders() -> tuple[str, ...]:
    """Where any user may create files: SHARED_DIRS, the temporary folder, and every
    world-writable folder below them (walked once per process, see `_recent_walk`)."""
    with _walk_lock:
        return _writable_dirs(tuple(dict.fromkeys((*SHARED_DIRS, tempfile.gettempdir()))))


def _walk_soon() -> None:
    """Start the walk of `_shared_folders` in the background, once per process, so the first
    session's clean-up does not wait for it."""
    global _walk
    if _walk is None:
        _walk = threading.Thread(target=_shared_folders, name="mha-shared-folders", daemon=True)
        _walk.start()


WALK_MAX_AGE = 600.0  # seconds a walk of the shared folders, kept on disk, is used by later runs


def _recent_walk(roots: tuple[str, ...]) -> tuple[str, ...] | None:
    """The world-writable folders a walk of `roots` found in the last WALK_MAX_AGE seconds, as
    kept in the grader's cache folder (mode 0700): a walk of a crowded /tmp takes a tenth of a
    second, too much for every cold grade."""
    from ..paths import cache_dir
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = json.loads((folder / "shared-folders.json").read_text())
        fresh = 0 <= time.time() - float(data["walked"]) < WALK_MAX_AGE
        if fresh and data["roots"] == list(roots) and all(isinstance(f, str) for f in data["folders"]):
            return tuple(data["folders"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep_walk(roots: tuple[str, ...], folders: tuple[str, ...]) -> None:
    from ..paths import cache_dir, write_private
    folder = cache_dir()
    if folder is None:
        return
    try:
        write_private(folder / "shared-folders.json",
                      json.dumps({"walked": time.time(), "roots": list(roots), "folders": list(folders)}))
    except OSError:
        pass


@functools.lru_cache(maxsize=None)
def _writable_dirs(roots: tuple[str, ...], budget: int = 100_000) -> tuple[str, ...]:
    """World-writable folders that any user can reach under `roots`.

    Found once per process, or taken from a walk of the last ten minutes (a walk of /tmp can
    take a fifth of a second): a world-writable folder that someone else creates later is not
    swept until the next walk.
    """
    recent = _recent_walk(roots)
    if recent is not None:
        return recent
    found = _find_writable(roots, budget)
    _keep_walk(roots, found)
    return found


def _find_writable(roots: tuple[str, ...], budget: int) -> tuple[str, ...]:
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
                    remove_tree(Path(entry.path))  # however deep: shutil.rmtree recurses
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


class Isolation:
    """One session's student identity, and the clean-up of everything it started or wrote."""

    def __init__(self, separate_user: bool | None = None, private: Iterable[Path] = ()):
        root = os.geteuid() == 0
        self.separate_user = root if separate_user is None else separate_user
        if self.separate_user and not root:
            raise InternalError("running student code as a separate user needs root")
        self.marker = os.urandom(MARKER_LENGTH // 2).hex()
        self.uid: int | None = None
        self.gid: int | None = None
        self._lock: socket.socket | None = None
        self._quiet = False  # a scan found nothing of the session alive, and nothing started since
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

    def starting(self) -> None:
        """A student process is about to start: `close` has to look for the session's processes."""
        self._quiet = False

    def process_limit(self, processes: int) -> int:
        """RLIMIT_NPROC for the student: per uid, so exact for a fresh uid, approximate otherwise."""
        return processes if self.separate_user else proctable.user_tasks(os.getuid()) + processes

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
            return lambda table: {p.pid for p in table.values() if uid in p.uids} | proctable.tree(table, roots)
        me, marker = os.getuid(), f"{MARKER}={self.marker}".encode()

        def select(table: dict[int, Proc]) -> set[int]:
            marked = {p.pid for p in table.values()
                      if p.uids[0] == me and p.alive and proctable.has_marker(p.pid, marker)}
            return proctable.tree(table, marked | roots)
        return select

    def others_running(self, worker: int) -> bool:
        """Whether any process of the session other than `worker` is alive (children, daemons).

        While the worker lives, every process student code starts stays below it (the worker is
        a child subreaper: orphans come back to it, double-forked daemons included). So when its
        /proc children files list no child at all, nothing else runs, and when they list a live
        child, something does: both without scanning every process. Otherwise (only exited
        children listed, which may hide others) every process is scanned."""
        if proctable.CHILDREN_FILES and proctable.alive(worker):
            children = proctable.children(worker)
            if children == []:
                return False
            if children and any(proctable.alive(pid) for pid in children):
                return True
        table = processes()
        return any(pid != worker and table[pid].alive for pid in self._select(worker)(table))

    def kill_tree(self, worker: int, seconds: float = 1.0) -> None:
        """SIGKILL `worker` and its descendants at once (found from /proc children files), then wait
        up to `seconds` for `worker` to exit, without reaping it (its pid stays its own). As root,
        `kill_all` then finds any process of the uid left, wherever it is in the process tree."""
        try:
            exited = os.pidfd_open(worker)  # before the signal: surely this process
        except (OSError, AttributeError):
            exited = None
        _signal_all(proctable.descendants(worker) if proctable.CHILDREN_FILES else {worker}, signal.SIGKILL)
        if exited is not None:
            try:
                select.select([exited], [], [], seconds)
            finally:
                os.close(exited)

    def kill_all(self, worker: int | None = None) -> bool:
        """Kill every process of the session (`worker` and its descendants included), and reap
        those that end up as our children (we are a subreaper), exited orphans included. Returns
        whether none is left alive (False only if some survived KILL_SECONDS of SIGKILL).

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
        killed, table, gone = _kill_until_gone(select, table)
        members |= killed | select(table)
        _reap(members - {worker, os.getpid()})
        self._quiet = gone
        return gone

    def close(self) -> None:
        """Kill what is left, delete the student's files in world-writable folders, release the uid."""
        if not self._quiet:
            self.kill_all()
        if self.separate_user:
            _sweep(self.uid, _shared_folders())
        if self._lock is not None:
            self._lock.close()
            self._lock = None
