"""Work done once per test run and shared by every pytest-xdist worker (each worker is a process
with its own session fixtures: a session fixture alone would redo the work in each of them).

`once(factory, name, build)` gives a folder of the run's temporary directory that `build(folder)`
filled, built by whichever process asks first while the others wait on a file lock, then read by
all. What a test may change it copies first (`copy_of`): the shared folder itself stays as built.
"""
from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def _run_root(factory: pytest.TempPathFactory) -> Path:
    """The temporary directory common to the run: under xdist each worker's base temp is a
    folder of it (pytest-of-USER/pytest-N/popen-gwK), without xdist it is the base temp itself."""
    base = factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], dict]) -> tuple[Path, dict]:
    """The folder `name` of this run, filled by `build(folder)` exactly once, and the JSON-able
    dict that `build` returned. A build that failed is not kept: the next caller tries again
    (and fails with its own message)."""
    root = _run_root(factory) / "shared"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, and by the kernel if we die
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            info = build(folder)
            done.write_text(json.dumps(info))
    return folder, json.loads(done.read_text())


def copy_of(source: Path, target: Path) -> Path:
    """A private copy of a shared folder (links copied as links)."""
    shutil.copytree(source, target, symlinks=True)
    return target
