"""Who student code runs as, and how the grader cleans up after it.

As root (Gradescope, most CI containers) each session claims a fresh unprivileged uid/gid that
owns nothing on the machine (a lock on a file in a root-only folder, CLAIMS). The student
process is forked from a zygote that loaded Python and numpy as root (see `spawn`), enters its
namespaces where the kernel allows them (`jail.py`; MHA_NAMESPACES=off: never), and switches to
that uid for good (in `worker.py`) before it imports the submission. The grader first removes
"others" access from the folders it must keep private, so the student uid cannot read the
reference, the hidden cases or the solutions. After each student process its home is deleted
(and, outside namespaces, what the uid left in world-writable folders: `sweep`); after the
session every process of that uid is killed, every file it left in a world-writable folder is
deleted, and its kernel keyrings are emptied if it owns any key. A uid whose keyrings cannot be
emptied (the student took away the permission) is retired, never drawn again; no clean-up
failure becomes the student's grade.

Without root, student code runs as the grader's own user. Its processes are found by their
ancestry (the grader and the worker are child subreapers, so double-forked daemons stay in the
tree) and by a random marker in their environment, then killed; nothing else is isolated.
See docs/security.md.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import grp
import os
import pwd
import random
import select
import signal
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import InternalError
from ..paths import PACKAGE, remove_tree
from . import proctable
from .proctable import Proc, processes
from .spawn import MARKER, MARKER_LENGTH, NAMESPACES_ENV, jail_spec, namespaces_wanted
from .sweep import SHARED_DIRS, shared_folders, sweep, walk_soon

__all__ = ["Isolation", "PACKAGE", "SANDBOX_IDS", "SHARED_DIRS", "private_paths", "processes", "protect"]

SANDBOX_IDS = range(61000, 65000)   # uid = gid of a session's student user; unused on the machine
KILL_SECONDS = 5.0
_PR_SET_CHILD_SUBREAPER = 36


def checkout() -> Path | None:
    """The source checkout the grader runs from (its tests hold complete solutions), or None
    when the package is installed (in site-packages)."""
    top = PACKAGE.parent
    if (top / "pyproject.toml").is_file() and "-packages" not in top.name:
        return top
    return None


def private_paths(course_root: Path) -> tuple[Path, ...]:
    """Folders student code must not read: the grader package (with the reference), the
    assignment (hidden cases), the `solutions/` and `.git/` beside it, and the grader's source
    checkout if it runs from one."""
    root = Path(course_root).resolve()
    top = checkout()
    return (PACKAGE, root, root.parent / "solutions", root.parent / ".git", *((top,) if top else ()))


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
    me, killed = os.getpid(), set[int]()
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


CLAIMS = ("/run/mha-sandbox", "/var/lib/mha-sandbox")  # where uids are claimed: folders only root may write


@functools.cache
def _claims_folder() -> int:
    """A descriptor of the folder of uid claims: root's own (mode 0700), in a parent that only
    root may write, so no student process can create, hold or replace a claim."""
    for path in CLAIMS:
        try:
            parent = os.lstat(os.path.dirname(path))
            if parent.st_uid != 0 or parent.st_mode & 0o022 or not stat.S_ISDIR(parent.st_mode):
                continue
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            info = os.fstat(fd)
            if info.st_uid == 0 and not info.st_mode & 0o077:
                return fd
            os.close(fd)
        except OSError:
            continue
    raise InternalError(f"cannot keep uid claims in {' or '.join(CLAIMS)} (a root-only folder is needed)")


def _claim_id() -> tuple[int, int]:
    """A uid (= gid) from SANDBOX_IDS that no account, process or concurrent session uses.

    The claim is an exclusive lock (flock) on a file named after the uid, in a folder only root
    can write (CLAIMS): released when the grader exits, held by one grader at a time, and out of
    reach of student code. Returns the uid and the locked file's descriptor.
    """
    folder = _claims_folder()
    draw = random.SystemRandom()  # the system's randomness: no seed another grader could share
    for _ in range(200):
        number = draw.choice(SANDBOX_IDS)
        if _known_id(number) or _retired(number):
            continue
        lock = os.open(str(number), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        if number in _uids_in_use():
            os.close(lock)
            continue
        return number, lock
    raise InternalError(f"no free uid for student code in {SANDBOX_IDS.start}-{SANDBOX_IDS.stop - 1}")


def _retired(number: int) -> bool:
    """Whether `number` was retired (see `_retire_id`) and still owns kernel keys."""
    try:
        os.stat(f"{number}{RETIRED}", dir_fd=_claims_folder(), follow_symlinks=False)
    except FileNotFoundError:
        return False
    if number in key_users():
        return True
    try:
        os.unlink(f"{number}{RETIRED}", dir_fd=_claims_folder())  # its keys are gone: usable again
    except OSError:
        pass
    return False


_USED_MAX_AGE = 1.0  # seconds a scan of the uids in use is reused for
_used: tuple[float, frozenset[int]] = (float("-inf"), frozenset())


def _uids_in_use() -> frozenset[int]:
    """Every uid a process has, from a scan at most _USED_MAX_AGE old (one scan serves the
    sessions of a batch that start within it). An older scan is as good as a new one here: a
    process only gets a uid of SANDBOX_IDS from a process that already had it, so was in the
    scan, or from root, that is a grader, which first claims the uid (the socket above); the
    uids are no account's (docs/security.md)."""
    global _used
    taken, uids = _used
    if time.monotonic() - taken > _USED_MAX_AGE:
        taken = time.monotonic()
        uids = frozenset(uid for proc in processes().values() for uid in proc.uids)
        _used = (taken, uids)
    return uids


MODES = {
    "namespaces": "root, with namespaces: a fresh uid in its own file system, network, IPC and process-id space",
    "uid": "root, without namespaces: a fresh uid (namespaces {why})",
    "same user": "not root: student code runs as the grader's own user and could change its scores",
}


def key_users() -> set[int]:
    """The uids that own kernel keys now (/proc/key-users; empty where it cannot be read)."""
    try:
        with open("/proc/key-users", "rb") as handle:
            return {int(line.split(b":")[0]) for line in handle.read(1 << 20).splitlines() if b":" in line}
    except (OSError, ValueError):
        return set()


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
        self.private = tuple(Path(p) for p in private)
        self.mode = "uid" if self.separate_user else "same user"  # how the last student process ran
        self.why = "were not tried"  # why namespaces are not used, in mode "uid"
        self._lock: int | None = None
        self._quiet = False  # a scan found nothing of the session alive, and nothing started since
        self._outside = False  # a student process of the session ran outside namespaces (it saw /tmp...)
        become_subreaper()
        if self.separate_user:
            protect((PACKAGE, *self.private))
            self.uid, self._lock = _claim_id()
            self.gid = self.uid

    def jail(self) -> dict | None:
        """What the fork server needs to run a student process of the session in namespaces (as
        root, unless MHA_NAMESPACES=off), or None."""
        return jail_spec(self.private) if self.separate_user else None

    def started(self, proc: object) -> None:
        """Note how a student process of the session runs (see MODES)."""
        if self.separate_user:
            self.mode = "namespaces" if getattr(proc, "jailed", False) else "uid"
            if self.mode == "uid" and not self._outside:
                walk_soon()  # its uid may write to the shared folders, swept once it has ended
            self._outside = self._outside or self.mode == "uid"
            if not namespaces_wanted():
                self.why = f"are off: {NAMESPACES_ENV}=off"
            elif self.mode == "uid":
                why = getattr(proc, "why", "") or "need the fork server (Linux)"
                self.why = f"do not work here: {why}"

    def describe(self) -> str:
        return MODES[self.mode].format(why=self.why)

    def env(self) -> dict[str, str]:
        return {MARKER: self.marker}

    @property
    def user(self) -> tuple[int, int] | None:
        """The uid and gid student code switches to (None without root)."""
        if not self.separate_user or self.uid is None or self.gid is None:  # both claimed with a separate user
            return None
        return self.uid, self.gid

    def starting(self) -> None:
        """A student process is about to start: `close` has to look for the session's processes."""
        self._quiet = False

    def process_limit(self, processes: int) -> int:
        """RLIMIT_NPROC for the student: per uid, so exact for a fresh uid, approximate otherwise."""
        return processes if self.separate_user else proctable.user_tasks(os.getuid()) + processes

    def prepare(self, folder: Path) -> None:
        """Give the student read access to `folder` (worker and submission).

        As root: `folder` and its files are root-owned and readable by the student's group only,
        so student code cannot change the worker or the submission between problems, nor write
        anything there (its homes are made by `new_home`).
        """
        if (ids := self.user) is not None:
            for path in folder.iterdir():
                if path.is_file():
                    os.chown(path, 0, ids[1])
                    os.chmod(path, 0o640)
            os.chown(folder, 0, ids[1])
            os.chmod(folder, 0o750)

    def new_home(self, folder: Path, number: int) -> Path:
        """A fresh, empty home in `folder` for one student process (the student's own, mode 0700):
        nothing an earlier process of the session wrote is in it (see `ended`)."""
        home = folder / f"home-{number}"
        home.mkdir(mode=0o700)
        if (ids := self.user) is not None:
            os.chown(home, *ids)
        return home

    def ended(self, home: Path) -> None:
        """A student process of the session has been killed: delete its home, and (as root
        outside namespaces) what its uid wrote in the shared folders, so the next process of the
        session starts with nothing an earlier one left (hidden inputs it saw...). In namespaces
        its /tmp was a tmpfs of its own, gone with it. Without root the student runs as the
        grader's user: files it wrote elsewhere cannot be told apart (docs/security.md)."""
        if not self._quiet:
            self.kill_all()
        remove_tree(home)
        if (ids := self.user) is not None and self._outside:
            sweep(ids[0], shared_folders())

    def pid_space_only(self, proc: object) -> bool:
        """Whether `proc` ran in namespaces as process 1 of its own process-id space and every
        student process of the session did too (`started`): no process of the session can live
        outside those spaces, so when `proc` has been reaped, none is left (the kernel killed
        every process of its space when it ended, and the earlier ones were emptied alike)."""
        ran_jailed = getattr(proc, "ran_jailed", None)  # (a forked process: a Popen never runs jailed)
        return self.separate_user and not self._outside and ran_jailed is not None and ran_jailed()

    def emptied(self) -> None:
        """The session's student process, the first of its own process-id space, has been reaped
        (see `pid_space_only`): nothing of the session runs until the next one starts."""
        self._quiet = True

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

    def others_running(self, worker: int, pid_space: bool = False) -> bool:
        """Whether any process of the session other than `worker` is alive (children, daemons).

        While the worker lives, every process student code starts stays below it (the worker is
        a child subreaper: orphans come back to it, double-forked daemons included). So when its
        /proc children files list no child at all, nothing else runs, and when they list a live
        child, something does: both without scanning every process. Otherwise (only exited
        children listed, which may hide others) every process is scanned. With `pid_space` (the
        worker is process 1 of the process-id space every process of the session runs in: see
        `pid_space_only`), the worker's own state need not be read first: once it has exited,
        the kernel has killed every other process of that space, and its children files list none."""
        if proctable.CHILDREN_FILES and (pid_space or proctable.alive(worker)):
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
        first = processes()
        members = select(first)
        table: dict[int, Proc] | None = first
        if not self.separate_user:
            frozen = _freeze(select, first)
            _signal_all(frozen, signal.SIGKILL)
            members |= frozen
            select, table = _including(select, frozen), None
        killed, last, gone = _kill_until_gone(select, table)
        members |= killed | select(last)
        _reap(members - {worker, os.getpid()})
        self._quiet = gone
        return gone

    def close(self) -> None:
        """Kill what is left, delete the student's files in world-writable folders, empty its
        keyrings, release the uid. Never raises for what the student did: a uid whose keyrings
        cannot be emptied is retired (`_retire_id`), never drawn again by a later session."""
        try:
            if not self._quiet:
                self.kill_all()
            if (ids := self.user) is not None:
                if self._outside:  # a jailed process wrote only to its session folder and its own
                    # tmpfs (the rest of its file system is read-only): shared folders hold nothing of it
                    sweep(ids[0], shared_folders())
                if ids[0] in key_users() and not self._clear_keys(*ids):  # keyrings belong to the uid
                    _retire_id(ids[0])
        finally:
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None

    def _clear_keys(self, uid: int, gid: int) -> bool:
        """Empty the uid's kernel keyrings, which outlive its processes (a later session may draw
        the same uid); whether that worked."""
        from .spawn import FORK_SERVER, fork_server
        try:
            if FORK_SERVER:
                return fork_server().clear_keys(uid, gid, time.monotonic() + KILL_SECONDS)
            from .confine import clear_keys_as  # no zygote to ask: a child of the grader (only system calls there)
            return clear_keys_as(uid, gid)
        except (OSError, InternalError):
            return False


RETIRED = ".retired"  # suffix of a claim file whose uid is never drawn again


def _retire_id(uid: int) -> None:
    """Never draw `uid` again: its keyrings still hold what a student left (the student took
    away the permissions needed to empty them). A file in the root-only claims folder, which
    lasts as long as the keyrings do where that folder is on a tmpfs (/run)."""
    try:
        os.close(os.open(f"{uid}{RETIRED}", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=_claims_folder()))
    except (OSError, InternalError):
        pass
