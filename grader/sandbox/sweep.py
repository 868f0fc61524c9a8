"""The folders where any user may create files, and the removal of what a student uid left there.

Found by a walk of SHARED_DIRS (and the temporary folder) kept for ten minutes in the grader's
cache folder (docs/security.md): a world-writable folder made since is missed until the
next walk.
"""
from __future__ import annotations

import functools
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from ..paths import remove_tree

__all__ = ["SHARED_DIRS", "WALK_MAX_AGE", "shared_folders", "sweep", "walk_soon"]

SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where any user may create files

_walk_lock = threading.Lock()
_walk: threading.Thread | None = None


def shared_folders() -> tuple[str, ...]:
    """Where any user may create files: SHARED_DIRS, the temporary folder, and every
    world-writable folder below them (walked once per process, see `_recent_walk`)."""
    with _walk_lock:
        return _writable_dirs(tuple(dict.fromkeys((*SHARED_DIRS, tempfile.gettempdir()))))


def walk_soon() -> None:
    """Start the walk of `shared_folders` in the background, once per process, so the first
    session's clean-up does not wait for it."""
    global _walk
    if _walk is None:
        _walk = threading.Thread(target=shared_folders, name="mha-shared-folders", daemon=True)
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


@functools.cache
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


def sweep(uid: int, folders: Iterable[str]) -> None:
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
