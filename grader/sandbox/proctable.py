"""The process table, read from /proc: who runs, as whom, and whose child it is.

Read only: nothing here sends a signal. Off Linux every answer is empty (docs/security.md:
there only the worker's process group is killed).
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from ..records import record

__all__ = ["CHILDREN_FILES", "Proc", "alive", "children", "descendants", "has_marker", "processes", "status",
           "tree", "user_tasks"]

CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")  # the kernel keeps them


@record
class Proc:
    """One line of the process table."""

    pid: int
    ppid: int
    uids: tuple[int, ...]  # real, effective, saved, file-system
    state: str             # R, S, D, T, t, Z, X...

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def processes() -> dict[int, Proc]:
    """Every process on the machine, from /proc (processes that vanish while read are skipped)."""
    table: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:  # not Linux: only the worker's process group is killed (docs/security.md)
        return table
    for name in names:
        if name.isdigit():
            proc = status(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def status(pid: int) -> Proc | None:
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


def alive(pid: int) -> bool:
    """Whether `pid` runs (exists and is not a zombie)."""
    proc = status(pid)
    return proc is not None and proc.alive


def children(pid: int) -> list[int] | None:
    """The children of every thread of `pid`, from /proc/PID/task/TID/children; None when they
    cannot be read or its threads changed meanwhile. An empty answer is exact (a list read
    while it held any child would show the first); a non-empty one may miss children that
    another child's exit hid while the file was read, as the kernel documents."""
    try:
        tasks = sorted(os.listdir(f"/proc/{pid}/task"))
        found: list[int] = []
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        if sorted(os.listdir(f"/proc/{pid}/task")) != tasks:
            return None
    except (OSError, ValueError):
        return None
    return found


def descendants(pid: int) -> set[int]:
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


def has_marker(pid: int, marker: bytes) -> bool:
    """Whether `marker` (NAME=VALUE) is in the environment /proc shows for `pid`."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def tree(table: dict[int, Proc], roots: Iterable[int]) -> set[int]:
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


def user_tasks(uid: int) -> int:
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
