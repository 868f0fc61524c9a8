"""Hostile and broken submissions cannot crash, stall or fool the grader, nor leave anything behind.

Each submission is the model solution followed by `hostile/_prelude.py` and one snippet from
`hostile/NAME.py`; a later `def` replaces the solution's function, so a submission deserves full
marks on every problem except the ones its snippet breaks (`loses`). Each is graded through the
CLI (`python -m grader grade SUB --format gradescope --output OUT`, three at a time) on a copy of
three problems in a course folder under /tmp laid out like a real one (exercises/, solutions/,
.git/, readable by "others" until the grader protects them), and the test asserts: exit code 0,
a valid results file written by the grader, the exact score, the grader's peak memory, no
process left (every process a submission starts is named hxTOKEN or has TOKEN in its command
line), no file left outside its temporary folder (every file it writes has TOKEN in its name
or text; as root, anything a sandbox uid owns in the course or submission folder counts too),
comparing snapshots of /tmp, /var/tmp, /dev/shm, /run/lock, the repository and the course folder
(with the output folder) taken before and after (by lstat: no link followed, nothing but regular
files opened), and no kernel key left for a later session of any sandbox uid. Those marked
`fallback` are graded again as root without namespaces; `grade-all` on a class with hostile
students is graded in both root modes.
"""
from __future__ import annotations

import csv
import ctypes
import functools
import json
import os
import platform
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.sandbox.isolation import CLAIMS, NAMESPACES_ENV, PACKAGE, RETIRED, SANDBOX_IDS, SHARED_DIRS
from grader.sandbox.session import Limits, RunStatus, Session

from .conftest import (
    ROOT,
    installation_in_tmp,
    isolation_missing,
    lay_out_course,
    solution_source,
    uids_holding_keys,
)

pytestmark = pytest.mark.slow  # grades every hostile submission, twice as root

HOSTILE = Path(__file__).with_name("hostile")
PROBLEMS = ("attention_reading", "count_routing_distributions", "predict_shapes")
GRADED_IN = (PROBLEMS[1], PROBLEMS[0], PROBLEMS[2])  # the course's order: a large request follows the first
ROOT_MODE = os.geteuid() == 0
RUN_BOUND = 45.0         # seconds a whole hostile run may take, on a loaded 2-core machine
OTHER_RUN = re.compile(rb"mha-hostile-\d{8}")  # files of a concurrent run of these tests
SKIP_DIRS = {".git", ".venv", ".venv-ci", "node_modules"}


@dataclass(frozen=True)
class Hostile:
    name: str                       # hostile/<name>.py
    loses: tuple[str, ...] = ()     # problems it must score 0 on ("*": every problem)
    says: tuple[str, ...] = ()      # text the results file must contain
    root_only: bool = False         # the guarantee it tests holds only when the grader is root
    syntax_line: int | None = None  # line of the snippet with a syntax error
    timeout: float = 1.0            # seconds per problem: a hostile loop costs 1 s, not 10
    grader_mb: float = 300          # peak memory allowed to the grader and its zygote (VmHWM)
    alone: bool = False             # graded while no other hostile runs (it takes every CPU)
    fallback: bool = False          # graded again as root without namespaces (MHA_NAMESPACES=off)
    namespaces_only: bool = False   # the guarantee holds only in namespaces
    scored: tuple[tuple[str, float], ...] = ()  # problems it earns part of (public cases only)


AR, CR, PS = PROBLEMS
HOSTILES = (
    Hostile("infinite_loop", loses=(AR,), says=("timed out (time limit of 1 s for this problem)",)),
    Hostile("long_sleep", loses=(CR,), says=("timed out (time limit of 1 s for this problem)",)),
    Hostile("exit_at_import", loses=("*",),
            says=("the process stopped while importing attention.py: the process exited with code 3",)),
    Hostile("sys_exit_at_import", loses=("*",), says=("importing attention.py raised SystemExit",)),
    Hostile("keyboard_interrupt_at_import", loses=("*",), says=("importing attention.py raised KeyboardInterrupt",)),
    Hostile("os_exit_in_function", loses=(AR,), says=("crashed: the process exited with code 0",)),
    Hostile("sys_exit_in_function", loses=(CR,), says=("raised SystemExit",)),
    Hostile("keyboard_interrupt_in_function", loses=(PS,), says=("raised KeyboardInterrupt",)),
    Hostile("syntax_error", loses=("*",), syntax_line=4),
    Hostile("import_error", loses=("*",),
            says=("importing attention.py raised ModuleNotFoundError", "No module named 'numpy_but_faster'")),
    Hostile("memory_hog", loses=(AR,), says=("raised MemoryError",), timeout=10),
    # a problem whose function leaves processes running loses its points (they are stopped)
    Hostile("fork_children", loses=(AR,), says=("it left processes running after it returned",), fallback=True),
    Hostile("daemon", loses=(CR,), says=("it left processes running after it returned",), fallback=True),
    Hostile("fork_bomb", loses=(PS,), says=("timed out",), alone=True),
    # attention_reading has hidden cases, so what it printed is not shown (tests/test_leaks.py)
    Hostile("output_flood", loses=(AR,), says=("timed out",)),
    Hostile("fake_results", loses=(AR,), root_only=True),
    Hostile("eq_always_true", loses=(AR,), says=("wrong type",)),
    Hostile("array_raises", loses=(AR,), says=("RuntimeError: no array for you",)),
    Hostile("ndarray_subclass", loses=(AR,), says=("wrong value",)),
    Hostile("nan_inf", loses=(AR, CR)),
    Hostile("strings_and_dicts", loses=(AR, CR, PS), says=("wrong type",)),
    Hostile("malicious_reduce", loses=(AR, CR)),
    Hostile("monkeypatch", loses=(AR,), says=("wrong value",)),
    Hostile("mutate_inputs", loses=(AR,), says=("wrong value",)),
    Hostile("import_grader", loses=(CR,), says=("raised ImportError", "student code cannot import the grader package")),
    Hostile("signal_grader", root_only=True),
    Hostile("read_secrets", loses=(AR, CR), root_only=True,
            says=("student code cannot import the grader package",
                  "probes: reference=closed package_list=closed problems=closed problems_list=closed "
                  "solutions=closed git=closed kept_trees=closed write_course=closed write_exercises=closed "
                  "reference_by_path=closed import_grader="), fallback=True),
    Hostile("stall_stdin", loses=(CR,), says=("timed out (time limit of 1 s for this problem)",), fallback=True),
    Hostile("claim_squatter", loses=(PS,), root_only=True, fallback=True,
            says=("claims: /run/mha-sandbox=closed /var/lib/mha-sandbox=closed slept=yes sockets=",)),
    Hostile("keyrings", loses=(CR,), root_only=True, fallback=True, says=("grader_key=none",)),
    Hostile("read_checkout", loses=(CR,), root_only=True, fallback=True,
            says=("probes: from_cmdline=closed checkout=closed submissions=closed solutions=closed",)),
    Hostile("hidden_left_behind", scored=((AR, 2.5),), fallback=True),  # its public half (of 5 points)
    Hostile("namespaces", loses=(CR,), root_only=True, namespaces_only=True,
            says=("shared: network=PermissionError interfaces=lo processes=0 tmp=0 shm=0",)),
)


@dataclass(frozen=True)
class EdgeCourse:
    """A course folder under /tmp that any user could read, until the grader protects it."""

    base: Path
    exercises: Path
    points: dict[str, float]


@pytest.fixture(scope="module")
def edge_course():
    base = Path(tempfile.mkdtemp(prefix="mha-course-"))
    exercises = lay_out_course(base, "title: Hostile submissions\n", GRADED_IN, PROBLEMS)
    points = {p.id: p.points for p in load_course(exercises).problems}
    yield EdgeCourse(base, exercises, points)
    shutil.rmtree(base, ignore_errors=True)


def submission_source(hostile: Hostile, token: str, edge_course: EdgeCourse) -> tuple[str, int]:
    """The hostile submission's text, and how many lines precede the snippet."""
    head = solution_source().rstrip("\n") + "\n\n\n" + (HOSTILE / "_prelude.py").read_text() + "\n\n"
    snippet = (HOSTILE / f"{hostile.name}.py").read_text()
    text = (head + snippet).replace("@TOKEN@", token).replace("@COURSE@", str(edge_course.base))
    text = text.replace("@PYTHON@", repr(sorted(installation_in_tmp())))  # a virtualenv under /tmp
    from grader.course.yamlio import _kept_folder
    kept = _kept_folder()
    assert kept is not None and any(kept.iterdir())  # the course was loaded here: its trees are kept
    text = text.replace("@KEPT@", str(kept))
    return text.replace("@PACKAGE@", str(PACKAGE)).replace("@CHECKOUT@", str(ROOT)), head.count("\n")


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    grader_mb: float  # peak resident memory (VmHWM) of the grader and of its zygote, the larger


def _peak_mb(pid: int) -> float:
    """VmHWM of `pid` (the kernel's own high-water mark of its resident memory), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle.read(8192).splitlines():
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _grader_processes(pid: int) -> list[int]:
    """The grader and its direct children that are not student processes (its zygote, grade-all's
    job processes): student processes run with their own limits."""
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                for child in handle.read().split():
                    with open(f"/proc/{int(child)}/cmdline", "rb") as cmd:
                        words = cmd.read(4096).split(b"\0")
                    if b"--zygote" in words or b"grader" in words or words[:1] == [sys.executable.encode()]:
                        found.append(int(child))
    except (OSError, ValueError):
        pass
    return found


def run_mha(*args: str, cwd: Path, limit: float = 120.0, env: dict[str, str] | None = None,
            preexec_fn=None) -> Run:
    """`python -m grader ARGS` (the `mha` command), with its exit code, output, time and the peak
    memory of the grader's own processes: their VmHWM, read every 10 ms until they exit (it only
    grows, so a late reading covers every earlier moment)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "grader", *args], stdout=out, stderr=err, cwd=cwd,
                                env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        peaks: dict[int, float] = {}
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for pid in _grader_processes(proc.pid):
                    peaks[pid] = max(peaks.get(pid, 0.0), _peak_mb(pid))
                done.wait(0.01)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            proc.wait(timeout=limit)  # a hung grader fails the test instead of hanging it
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            done.set()
            watcher.join()
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Run(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                   seconds, max(peaks.values(), default=0.0))


def leftovers(token: str) -> list[str]:
    """Processes named hxTOKEN or with TOKEN in their command line (zombies included)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if comm == f"hx{token}" or token in cmdline:
            found.append(f"{pid} {comm} {cmdline[:80]}")
    return found


@dataclass(frozen=True)
class Listing:
    """A folder's entries as seen once: its identity then, and when it was read."""
    ident: tuple[int, int, int]  # device, inode, ctime (ns): any entry added, removed or renamed changes the ctime
    read_ns: int                 # time.time_ns() just before the folder was listed
    files: frozenset[str]        # every entry that is not a folder (files, links, sockets...)
    folders: tuple[str, ...]


_LISTINGS: dict[str, Listing] = {}  # by path: the latest listing of each folder any snapshot read
STABLE_NS = 2 * 10**9  # a listing is reused only for a folder unchanged this long before it was read


@pytest.fixture(scope="module", autouse=True)
def forget_listings():
    """The listings of a busy /tmp take a hundred megabytes: dropped once this file is done, so
    that the worker's later forks (tests of other files) do not copy them."""
    yield
    _LISTINGS.clear()


@dataclass(frozen=True)
class Snapshot:
    """Every path under some roots, seen once: the paths looked at (lstat) and the listing of every
    folder among them. `paths()` is the whole set; `new_since(before)` is `after.paths() -
    before.paths()`, computed without building either set (a snapshot of a busy /tmp holds
    hundreds of thousands of paths): a folder whose listing `before` holds too has no new file."""
    looked_at: frozenset[str]      # roots and folders whose lstat succeeded
    listings: dict[str, Listing]   # by folder: its listing in this snapshot

    def paths(self) -> set[str]:
        return set(self.looked_at).union(*(listing.files for listing in self.listings.values()))

    def __contains__(self, path: str) -> bool:
        listing = self.listings.get(os.path.dirname(path))
        return path in self.looked_at or (listing is not None and path in listing.files)

    def new_since(self, before: Snapshot) -> set[str]:
        new = {path for path in self.looked_at - before.looked_at if path not in before}
        for folder, listing in self.listings.items():
            if before.listings.get(folder) is not listing:  # the same listing: the same files
                new.update(path for path in listing.files if path not in before)
        return new


def snapshot(roots) -> Snapshot:
    """Every path under `roots`, from lstat and folder listings: no link is followed, and
    nothing but folders is opened (to be listed).

    Every folder is looked at (lstat) each time, but one whose identity (device, inode and
    ctime) is the one an earlier snapshot saw has the same entries as then, and is not listed
    again: adding, removing or renaming an entry sets a folder's ctime to the current time, and no
    user can set it back. The earlier listing is trusted only when the folder's ctime was at least
    STABLE_NS older than the listing (so no change within the same clock tick can hide)."""
    looked_at: set[str] = set()
    listings: dict[str, Listing] = {}
    todo = [str(r) for r in roots]
    while todo:
        path = todo.pop()
        try:
            info = os.lstat(path)
        except OSError:
            continue
        looked_at.add(path)
        if not stat.S_ISDIR(info.st_mode):
            continue
        ident = (info.st_dev, info.st_ino, info.st_ctime_ns)
        listing = _LISTINGS.get(path)
        if listing is None or listing.ident != ident or listing.read_ns - info.st_ctime_ns < STABLE_NS:
            listing = _list(path, ident)
            if listing is None:
                continue
            _LISTINGS[path] = listing
        listings[path] = listing
        todo.extend(listing.folders)
    return Snapshot(frozenset(looked_at), listings)


def _list(path: str, ident: tuple[int, int, int]) -> Listing | None:
    files, folders = [], []
    read_ns = time.time_ns()
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name in SKIP_DIRS or entry.name.startswith("pytest-of-"):
                    continue
                try:
                    (folders if entry.is_dir(follow_symlinks=False) else files).append(entry.path)
                except OSError:  # gone meanwhile
                    continue
    except OSError:
        return None
    return Listing(ident, read_ns, frozenset(files), tuple(folders))


def _text(path: str, mode: int) -> bytes:
    """The first MiB of a regular file; nothing for anything else. Opened without following a
    link and without blocking, and checked again once open (it may have been replaced)."""
    if not stat.S_ISREG(mode):
        return b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, 1 << 20)
    except OSError:
        return b""
    finally:
        os.close(fd)


def strays(before: Snapshot, after: Snapshot, token: str, ignore: Path, own: tuple[Path, ...] = ()) -> dict[str, int]:
    """New paths the submission made: owned by a student uid (a sandbox uid as root, else this
    user), with TOKEN in the name or text, or (as root) anywhere in the `own` folders (this test's
    course and submission folders), leaving out concurrent sessions' folders and concurrent runs
    of these tests. Other graders on the machine (other uids, or their own sandbox uids in the
    shared folders) are not this submission's."""
    found = {}
    inside = tuple(f"{folder}/" for folder in own)
    for path in sorted(after.new_since(before)):
        try:
            info = os.lstat(path)
        except OSError:  # gone since: nothing left there
            continue
        uid, mode = info.st_uid, info.st_mode
        if path == str(ignore) or not (uid in SANDBOX_IDS or uid == os.geteuid() != 0):
            continue
        text = _text(path, mode)
        ours = token in path or token.encode() in text
        theirs = "mha-run-" in path or OTHER_RUN.search(path.encode() + text)
        if ours or (uid in SANDBOX_IDS and path.startswith(inside) and not theirs):
            found[path] = uid
    return found


def still_there(paths: dict[str, int]) -> list[str]:
    """The paths that still exist with the same owner: a file another session was writing (and
    has deleted since) when it was seen is not a leftover."""
    there = []
    for path, uid in paths.items():
        try:
            if os.lstat(path).st_uid == uid:
                there.append(f"{path} (uid {uid})")
        except FileNotFoundError:
            pass
    return there


KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())


def keys_left(token: str) -> list[str]:
    """Keys named after TOKEN that a later session of any sandbox uid that owns keys would find
    in its user, user-session or persistent keyring. Each uid is checked by a child switched to it
    (conftest.py's `uids_holding_keys`)."""
    if KEYCTL is None:
        return []
    try:
        with open("/proc/key-users", "rb") as handle:
            uids = [int(line.split(b":")[0]) for line in handle.read().splitlines() if b":" in line]
    except OSError:
        return []
    names = [f"mha-hostile-{token}-{label}" for label in ("session", "user", "usersession", "persistent")]
    checked = [u for u in uids if u in SANDBOX_IDS and not retired(u)]
    return [f"uid {uid}" for uid in uids_holding_keys(KEYCTL, names, checked, persistent=True)]


def retired(uid: int) -> bool:
    """Whether no later session draws `uid` (its keyrings could not be emptied)."""
    return any(os.path.exists(f"{folder}/{uid}{RETIRED}") for folder in CLAIMS)


def read_results(path: Path) -> dict:
    """A Gradescope results.json with the fields this grader always writes."""
    data = json.loads(path.read_text())
    assert isinstance(data["score"], (int, float)) and "execution_time" not in data
    assert isinstance(data["output"], str) and isinstance(data["tests"], list)
    for test in data["tests"]:
        assert {"name", "score", "max_score", "status", "output", "tags"} <= test.keys()
    return data


@dataclass(frozen=True)
class Outcome:
    """One hostile submission graded through the CLI, and what it left behind."""

    run: Run
    output: Path
    offset: int              # lines before the snippet in the submission
    out_dir_files: list[str]
    leftovers: list[str]
    strays: dict[str, int]
    token: str


GRADER_KEY = "mha-grader-key-"  # a key the grader holds in its own session keyring (see keyrings.py)


def _grader_keyring(token: str):
    """For the grader's process, before it starts: a new session keyring holding a key that
    student code must not find (only system calls: this runs between fork and exec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    name, add_key = (GRADER_KEY + token).encode(), {"x86_64": 248, "aarch64": 217}.get(platform.machine())

    def enter() -> None:
        if KEYCTL is not None and add_key is not None:
            libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(1), ctypes.c_long(0))  # join a new session keyring
            libc.syscall(ctypes.c_long(add_key), b"user", name, b"grader secret", ctypes.c_size_t(13),
                         ctypes.c_long(-3))
    return enter


def grade_hostile(hostile: Hostile, edge_course: EdgeCourse, folder: Path, env: dict[str, str] | None = None) -> Outcome:
    token = f"{secrets.randbelow(10 ** 8):08d}"
    source, offset = submission_source(hostile, token, edge_course)
    submission = folder / "attention.py"
    submission.write_text(source)
    out_dir = edge_course.base / f"out-{hostile.name}-{token}"
    out_dir.mkdir()
    os.chmod(out_dir, 0o777)  # world-writable on purpose: student code may try to write here
    output = out_dir / "results.json"
    roots = (*SHARED_DIRS, ROOT, edge_course.base, folder)
    before = snapshot(roots)
    run = run_mha("--course", str(edge_course.exercises), "grade", str(submission), "--format", "gradescope",
                  "--output", str(output), "--timeout", str(hostile.timeout), "--total-timeout", "30", cwd=folder,
                  env=env, preexec_fn=_grader_keyring(token) if hostile.name == "keyrings" else None)
    return Outcome(run, output, offset, sorted(os.listdir(out_dir)), leftovers(token),
                   strays(before, snapshot(roots), token, output, (edge_course.base, folder)), token)


def _grade_every(todo: list[Hostile], edge_course: EdgeCourse, tmp_path_factory, env: dict[str, str] | None = None
                 ) -> dict[str, Outcome | BaseException]:
    """Every hostile submission of `todo` graded, three at a time; the fork bomb alone (it takes every CPU)."""
    def attempt(hostile: Hostile) -> Outcome | BaseException:
        try:
            return grade_hostile(hostile, edge_course, tmp_path_factory.mktemp(hostile.name), env)
        except Exception as exc:  # reported by that hostile's test
            return exc

    with ThreadPoolExecutor(max_workers=3) as pool:
        done = dict(zip((h.name for h in todo if not h.alone),
                        pool.map(attempt, [h for h in todo if not h.alone])))
    done.update((h.name, attempt(h)) for h in todo if h.alone)
    return done


@pytest.fixture(scope="module")
def outcomes(edge_course: EdgeCourse, tmp_path_factory) -> dict[str, Outcome | BaseException]:
    """Every hostile submission graded in the grader's default mode."""
    return _grade_every([h for h in HOSTILES if ROOT_MODE or not h.root_only], edge_course, tmp_path_factory)


@pytest.fixture(scope="module")
def fallback_outcomes(edge_course: EdgeCourse, tmp_path_factory) -> dict[str, Outcome | BaseException]:
    """The hostile submissions marked `fallback` graded again as root without namespaces."""
    if not ROOT_MODE:
        isolation_missing("the fallback without namespaces is root's")
    return _grade_every([h for h in HOSTILES if h.fallback], edge_course, tmp_path_factory,
                        {NAMESPACES_ENV: "off"})


@functools.cache
def sandbox_mode() -> str:
    """The mode student code runs in here by default (`mha doctor` says it too)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "attention.py"
        path.write_text("def f():\n    return 1\n")
        with Session(path) as session:
            session.run("f", [[]], 30.0)
            return session.isolation.mode


def check_outcome(hostile: Hostile, edge_course: EdgeCourse, outcome: Outcome | BaseException) -> None:
    """Exit 0, a valid results file, the exact score deserved, bounded grader memory, no process,
    file or key left."""
    if isinstance(outcome, BaseException):
        raise outcome
    run = outcome.run
    assert run.code == 0, run.stderr
    assert run.seconds < RUN_BOUND
    data = read_results(outcome.output)
    lost = set(edge_course.points) if "*" in hostile.loses else set(hostile.loses)
    deserved = {p: 0.0 if p in lost else points for p, points in edge_course.points.items()} | dict(hostile.scored)
    from ._edges import scores  # _edges imports this module
    assert scores(data) == deserved
    assert data["score"] == sum(deserved.values())
    report = data["output"] + "\n".join(t["output"] for t in data["tests"])
    for text in hostile.says:
        assert text in report
    assert "LEAK" not in report + run.stdout + run.stderr  # what hidden_left_behind was passed in the hidden phase
    assert all(len(t["output"]) < 8000 for t in data["tests"])  # feedback stays short whatever was printed
    assert 0 < run.grader_mb < hostile.grader_mb
    if hostile.syntax_line:
        assert f"attention.py has a syntax error (line {outcome.offset + hostile.syntax_line}): expected ':'" in report
    assert outcome.output.stat().st_uid == os.geteuid() and outcome.out_dir_files == ["results.json"]
    assert outcome.leftovers == []
    assert still_there(outcome.strays) == []
    assert keys_left(outcome.token) == []


class TestSnapshot:
    def test_a_path_added_anywhere_since_is_new(self, tmp_path, monkeypatch):
        """A file added deep in folders an earlier snapshot listed, and a new folder with a file, are
        the new paths of the next snapshot; the folders that did not change are not listed again."""
        monkeypatch.setattr(sys.modules[__name__], "STABLE_NS", 0)  # reuse every unchanged folder's listing
        deep = tmp_path / "a" / "b" / "c"
        deep.mkdir(parents=True)
        (tmp_path / "a" / "old.txt").write_text("old")
        before = snapshot([tmp_path])
        assert before.paths() == {str(tmp_path), *(str(tmp_path / p) for p in ("a", "a/b", "a/b/c", "a/old.txt"))}
        listed = {path: _LISTINGS[path] for path in before.paths() if path in _LISTINGS}
        (deep / "new.txt").write_text("new")
        (tmp_path / "a" / "d").mkdir()
        (tmp_path / "a" / "d" / "e.txt").write_text("e")
        for folder in (deep, tmp_path / "a"):  # a change within the clock tick of the listing: change again
            while os.lstat(folder).st_ctime_ns == listed[str(folder)].ident[2]:
                os.chmod(folder, os.lstat(folder).st_mode & 0o7777)
        after = snapshot([tmp_path])
        new = {str(deep / "new.txt"), str(tmp_path / "a" / "d"), str(tmp_path / "a" / "d" / "e.txt")}
        assert after.new_since(before) == after.paths() - before.paths() == new
        assert _LISTINGS[str(tmp_path / "a" / "b")] is listed[str(tmp_path / "a" / "b")]  # unchanged: not read again
        assert _LISTINGS[str(deep)] is not listed[str(deep)]

    def test_a_listing_is_trusted_only_for_a_folder_long_unchanged(self, tmp_path):
        """A folder listed less than STABLE_NS after its last change is listed again next time; one
        listed later is not."""
        (tmp_path / "f").write_text("")
        snapshot([tmp_path])
        changed = os.lstat(tmp_path).st_ctime_ns
        soon = replace(_LISTINGS[str(tmp_path)], read_ns=changed + STABLE_NS - 1)
        _LISTINGS[str(tmp_path)] = soon
        snapshot([tmp_path])
        late = replace(_LISTINGS[str(tmp_path)], read_ns=changed + STABLE_NS)
        assert _LISTINGS[str(tmp_path)] is not soon
        _LISTINGS[str(tmp_path)] = late
        assert snapshot([tmp_path]).paths() == {str(tmp_path), str(tmp_path / "f")}
        assert _LISTINGS[str(tmp_path)] is late


@pytest.mark.parametrize("hostile", [pytest.param(h, id=h.name, marks=[pytest.mark.root] if h.root_only else [])
                                     for h in HOSTILES])
def test_hostile_submission(hostile: Hostile, edge_course: EdgeCourse, outcomes):
    """Exit 0, a valid results file, the exact score deserved, no process, file or key left."""
    if hostile.root_only and not ROOT_MODE:
        isolation_missing("this guarantee needs the grader to run as root")
    if hostile.namespaces_only and sandbox_mode() != "namespaces":
        isolation_missing("namespaces do not work here (see `mha doctor`)")
    check_outcome(hostile, edge_course, outcomes[hostile.name])


@pytest.mark.root
@pytest.mark.parametrize("hostile", [h for h in HOSTILES if h.fallback], ids=lambda h: h.name)
def test_hostile_submission_without_namespaces(hostile: Hostile, edge_course: EdgeCourse, fallback_outcomes):
    """The same guarantees as root where namespaces are not available (MHA_NAMESPACES=off)."""
    check_outcome(hostile, edge_course, fallback_outcomes[hostile.name])


CLASSMATES = ("alice", "bob", "carol")  # correct submissions
IN_CLASS = {"stall_stdin": (CR,), "claim_squatter": (PS,), "read_classmates": (CR,),  # student: problems lost
            "hidden_left_behind": ()}
HALF = {"hidden_left_behind": AR}  # student: the problem it earns half of (its public cases)


@pytest.mark.root
@pytest.mark.parametrize("namespaces", ["default", "off"])
def test_one_student_cannot_stall_fail_or_read_the_class(edge_course: EdgeCourse, namespaces: str):
    """`grade-all --jobs 2` on a class with a stalling, a uid-squatting, a snooping student and
    one that leaves hidden inputs, a daemon and locked files and keyrings behind: exit 0, a gradebook with every
    classmate's full marks and each hostile student's exact
    score, nothing of the class readable, bounded grader memory, nothing left behind."""
    if not ROOT_MODE:
        isolation_missing("classmates are kept apart by the student uid, which needs root")
    base = Path(tempfile.mkdtemp(prefix="mha-class-"))  # under /tmp, readable by others until protected
    try:
        folder, out = base / "class", base / "graded"
        tokens = {}
        for student in (*CLASSMATES, *IN_CLASS):
            (folder / student).mkdir(parents=True)
            if student in IN_CLASS:
                tokens[student] = f"{secrets.randbelow(10 ** 8):08d}"
                source = submission_source(Hostile(student), tokens[student], edge_course)[0]
                source = source.replace("@CLASS@", str(folder)).replace("@OUT@", str(out))
            else:
                source = solution_source()
            (folder / student / "attention.py").write_text(source)
        for path, _dirs, files in os.walk(base):
            os.chmod(path, 0o755)
            for name in files:
                os.chmod(os.path.join(path, name), 0o644)
        roots = (*SHARED_DIRS, edge_course.base, base)
        before = snapshot(roots)
        run = run_mha("--course", str(edge_course.exercises), "grade-all", str(folder), "--out", str(out),
                      "--jobs", "2", "--timeout", "1", "--total-timeout", "30", "--no-progress", cwd=base,
                      env={NAMESPACES_ENV: "off"} if namespaces == "off" else None)
        assert run.code == 0, run.stderr
        with open(out / "gradebook.csv", newline="") as handle:
            rows = {row["student"]: row for row in csv.DictReader(handle)}
        full = sum(edge_course.points.values())
        expected = {s: full - sum(edge_course.points[p] for p in IN_CLASS.get(s, ())) for s in rows}
        got = {s: float(r["total"]) for s, r in rows.items()}
        for s in HALF:  # its public half only
            expected[s] -= edge_course.points[HALF[s]] / 2
        assert got == expected
        assert {s: r["status"] for s, r in rows.items()} == {
            **{s: "graded" for s in (*CLASSMATES, *IN_CLASS)}, "stall_stdin": "timeout"}  # a case timed out
        feedback = {s: " ".join(next((out / "feedback").glob(f"*{s}*.txt")).read_text().split())  # unwrapped
                    for s in IN_CLASS}
        assert "probes: classmate=closed class=closed out=closed" in feedback["read_classmates"]
        assert "claims: /run/mha-sandbox=closed /var/lib/mha-sandbox=closed" in feedback["claim_squatter"]
        assert "timed out (time limit of 1 s for this problem)" in feedback["stall_stdin"]
        assert "LEAK" not in "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
        assert 0 < run.grader_mb < 300
        left = {s: (leftovers(t), still_there(strays(before, snapshot(roots), t, out, (base,))), keys_left(t))
                for s, t in tokens.items()}
        assert left == {s: ([], [], []) for s in tokens}
    finally:
        shutil.rmtree(base, ignore_errors=True)


class TestWithoutSeparateUser:
    """The clean-up that also works without root: process tree, subreaper and marker."""

    @pytest.mark.parametrize("name, function, args", [
        ("fork_children", AR, ([0.5, 0.5], [[1.0, 2.0], [3.0, 4.0]])),
        ("daemon", CR, (2, 4, 3)),
    ])
    def test_children_are_killed(self, edge_course, name, function, args, tmp_path):
        """Children, subprocesses and a setsid daemon are all gone after the session closes."""
        token = f"{secrets.randbelow(10 ** 8):08d}"
        source, _ = submission_source(Hostile(name), token, edge_course)
        path = tmp_path / "attention.py"
        path.write_text(source)
        import numpy as np
        call = [np.asarray(a, dtype=float) if isinstance(a, list) else a for a in args]
        with Session(path, Limits(problem_seconds=5), separate_user=False) as session:
            run = session.run(function, [call], 5.0)
            assert run.cases[0].status is RunStatus.RETURNED
            assert leftovers(token) == []  # already killed: they outlived the problem
        assert leftovers(token) == []


    def test_a_daemon_left_by_a_process_that_exited_is_killed(self, tmp_path):
        """A function double-forks a daemon and its process exits at once (the daemon is nobody's
        child in the session): the daemon is killed, and the next problem runs in a fresh process."""
        token = f"{secrets.randbelow(10 ** 8):08d}"
        path = tmp_path / "attention.py"
        path.write_text(textwrap.dedent(f"""
            import ctypes, os, time
            def leave():
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        ctypes.CDLL(None).prctl(15, b"hx{token}", 0, 0, 0)
                        time.sleep(600)
                    os._exit(0)
                time.sleep(0.05)
                os._exit(0)
            def answer():
                return 42
        """))
        with Session(path, Limits(problem_seconds=5), separate_user=False) as session:
            assert session.run("leave", [[]], 5.0).cases[0].status is RunStatus.CRASHED
            assert session.run("answer", [[]], 5.0).cases[0].value == 42
            gone = time.monotonic() + 5  # the zygote kills it when woken by its worker's exit
            while leftovers(token) and time.monotonic() < gone:
                time.sleep(0.05)
            assert leftovers(token) == []
        assert leftovers(token) == []

    @pytest.mark.parametrize("separate_user", [False, None], ids=["same-user", "default"])
    def test_a_stopped_student_process_costs_only_its_problem(self, tmp_path, separate_user):
        """A function that stops itself (SIGSTOP) and one that stops its whole process group time
        out at their limit; the grader does not wait on the stopped processes, and the next
        problem is answered."""
        path = tmp_path / "attention.py"
        path.write_text(textwrap.dedent("""
            import os, signal
            def stop_self():
                os.kill(os.getpid(), signal.SIGSTOP)
                return 1
            def stop_group():
                if os.fork() == 0:
                    os.killpg(0, signal.SIGSTOP)
                    os._exit(0)
                os.killpg(0, signal.SIGSTOP)
                return 1
            def answer():
                return 42
        """))
        start = time.monotonic()
        with Session(path, Limits(problem_seconds=1, submission_seconds=60), separate_user=separate_user) as session:
            runs = [session.run(name, [[]], 1.0).cases[0] for name in ("stop_self", "stop_group", "answer")]
            mode = session.isolation.mode
        # in namespaces the student process is process 1 of its process-id space: the kernel
        # drops a stop signal it sends itself, and only its child stops
        stopped = RunStatus.RETURNED if mode == "namespaces" else RunStatus.TIMEOUT
        assert [r.status for r in runs] == [stopped, stopped, RunStatus.RETURNED]
        assert runs[2].value == 42
        assert time.monotonic() - start < 40  # two 1 s limits and the clean-up, on a loaded machine


class TestLimitOptions:
    """`mha grade` passes --total-timeout and --memory-mb on to the sandbox."""

    def test_total_timeout_bounds_the_whole_submission(self, edge_course, tmp_path):
        """With --total-timeout 2, a submission sleeping in every function costs about 2 s in all."""
        (tmp_path / "attention.py").write_text(
            "import time\n" + "".join(f"def {p}(*args):\n    time.sleep(60)\n" for p in PROBLEMS))
        run = run_mha("--course", str(edge_course.exercises), "grade", str(tmp_path), "--format", "json",
                      "--timeout", "30", "--total-timeout", "2", cwd=tmp_path)
        data = json.loads(run.stdout)
        assert run.code == 0 and run.seconds < 15
        assert data["score"] == 0
        summaries = [c["summary"] for p in data["problems"] for c in p["cases"]]
        assert "timed out (the submission's total time limit ran out)" in summaries

    def test_memory_mb_sets_the_limit(self, edge_course, tmp_path):
        """300 MiB of touched memory passes with the default limit and fails with --memory-mb 256."""
        (tmp_path / "attention.py").write_text(solution_source() + (
            "\n\n_solved = count_routing_distributions\n\n\n"
            "def count_routing_distributions(*layer):\n"
            "    block = np.ones(300 << 17)  # 300 MiB of float64, written\n"
            "    return _solved(*layer) + int(block[0]) - 1\n"))

        def score(*options):
            run = run_mha("--course", str(edge_course.exercises), "grade", str(tmp_path), "--format", "json",
                          *options, cwd=tmp_path)
            assert run.code == 0, run.stderr
            return next(p for p in json.loads(run.stdout)["problems"] if p["id"] == CR)

        assert score()["score"] == edge_course.points[CR]
        limited = score("--memory-mb", "256")
        assert limited["score"] == 0
        assert limited["cases"][0]["summary"].startswith("raised MemoryError")
