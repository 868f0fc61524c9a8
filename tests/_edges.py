"""Helpers for the tests of the edges where student data enters the grader (test_submission_files,
test_bounds, test_leaks, test_output_files): a course with a quiz and a course secret under /tmp,
laid out like a real one, and `mha grade` run in a subprocess (as root, or as a dropped uid)
that reports the grader process's own peak memory (VmHWM, read at its exit)."""
from __future__ import annotations

import ctypes
import functools
import json
import os
import secrets
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from grader.course.loader import load_course
from grader.course.quiz import answer_key
from grader.course.seeds import DEFAULT_SEED
from grader.paths import remove_tree

from ._required import skip_isolation
from .conftest import ROOT, lay_out_course, solution_source
from .test_hostile import PROBLEMS

ROOT_MODE = os.geteuid() == 0
DROPPED_UID = 65534  # a non-root uid for the non-root runs (kept in group 0 to read this checkout)
AR, CR, PS = PROBLEMS

# what `python -c` runs: `mha`, and at its end (an exit handler, or os._exit, which ends grade
# and check: grader/cli/launch.py) the grader process's peak resident memory written to
# $MHA_TEST_PEAK (only by this process, not by processes forked from it)
_RUN = textwrap.dedent("""
    import atexit, os, runpy, sys
    _pid, _exit = os.getpid(), os._exit
    def _peak():
        if os.getpid() == _pid:
            with open("/proc/self/status") as status, open(os.environ["MHA_TEST_PEAK"], "w") as out:
                out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])
    def _end(status):
        _peak()
        _exit(status)
    atexit.register(_peak)
    os._exit = _end
    sys.argv = ["mha", *sys.argv[1:]]
    runpy.run_module("grader", run_name="__main__")
""")


@dataclass(frozen=True)
class EdgeCourse:
    """A course folder any user may read (until the grader protects it): exercises/ with three
    problems and the quiz, course.yaml with a secret, solutions/ and .git/ beside it."""

    base: Path
    exercises: Path
    secret: str
    points: dict[str, float]       # problem id -> points
    quiz_points: dict[str, float]  # quiz item id -> points
    key: dict                      # the right answers of the default seed

    @property
    def total(self) -> float:
        return sum(self.points.values()) + sum(self.quiz_points.values())


def make_course() -> EdgeCourse:
    base = Path(tempfile.mkdtemp(prefix="mha-edges-"))
    exercises = lay_out_course(base, "title: Edges\nquiz: quiz.yaml\n", PROBLEMS, PROBLEMS, extra=["quiz.yaml"])
    secret = f"SECRET{secrets.token_hex(8)}"
    (exercises / "course.yaml").write_text(f"secret: {secret}\n")
    os.chmod(exercises / "course.yaml", 0o644)  # readable by anyone until the grader protects the folder
    course = load_course(exercises)
    return EdgeCourse(base, exercises, secret, {p.id: p.points for p in course.problems},
                  {i.id: i.points for i in course.quiz.items if not i.manual},  # written: pending, by hand
                  answer_key(course.quiz, DEFAULT_SEED))


def new_folder(edge_course: EdgeCourse, name: str) -> Path:
    """A fresh folder inside the course base that any user may enter (for the dropped uid)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=edge_course.base))
    os.chmod(folder, 0o777)
    return folder


def write_submission(folder: Path, source: str | None = None, answers: dict | str | None = None) -> Path:
    """attention.py (the model answers unless `source`) and answers.yaml (the key if a dict)."""
    (folder / "attention.py").write_text(solution_source() if source is None else source)
    if answers is not None:
        (folder / "answers.yaml").write_text(answers if isinstance(answers, str) else yaml.safe_dump(answers))
    return folder


@dataclass(frozen=True)
class GraderRun:
    code: int
    stdout: str
    stderr: str
    peak_mb: float      # the grader process's own peak resident memory (VmHWM)
    output: Path | None
    left: list[str]     # what is left in the run's own temporary folder ($TMPDIR): should be nothing
    processes: list[str]  # processes still working in that folder (student code runs there): none

    def results(self) -> dict:
        return json.loads(self.output.read_text())

    def report(self) -> str:
        """Everything a student or instructor could read from this run."""
        return self.stdout + self.stderr + (self.output.read_text() if self.output and self.output.exists() else "")


def run_grader(edge_course: EdgeCourse, *args: str, cwd: Path, output: Path | None = None, user: int | None = None,
               umask: int | None = None, env: dict | None = None, limit: float = 120.0) -> GraderRun:
    """`mha --course COURSE ARGS [--output OUTPUT]` in a subprocess, as root or as `user`
    (with `umask`, and `env` added to the environment)."""
    peak = Path(tempfile.mkstemp(prefix="mha-peak-", dir=edge_course.base)[1])
    os.chmod(peak, 0o666)
    tmp = new_folder(edge_course, "tmp")  # the grader's own temporary files go here, to be counted
    os.chmod(tmp, 0o1777)
    env = {**os.environ, "MHA_TEST_PEAK": str(peak), "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), **(env or {})}
    if user is not None:
        cache = edge_course.base / f"cache-{user}"
        cache.mkdir(exist_ok=True)
        os.chown(cache, user, 0)
        env.update(HOME=str(cache), MHA_CACHE_DIR=str(cache))

    def become() -> None:
        if umask is not None:
            os.umask(umask)
        if user is not None:
            drop_to(user)

    extra = ("--output", str(output)) if output is not None else ()
    # no preexec_fn when there is nothing to do: then subprocess starts the child with vfork, not a
    # fork of this (large) process
    changes = umask is not None or user is not None
    done = subprocess.run([sys.executable, "-c", _RUN, "--course", str(edge_course.exercises), *args, *extra],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=limit,
                          preexec_fn=become if changes else None)
    text = peak.read_text().strip()
    peak.unlink()
    left, processes = sorted(os.listdir(tmp)), working_in(tmp)
    remove_tree(tmp)
    return GraderRun(done.returncode, done.stdout, done.stderr, int(text) / 1024 if text else 0.0, output, left,
                     processes)


def working_in(folder: Path) -> list[str]:
    """Processes whose working folder is inside `folder` (read as a link's text: nothing is opened)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(f"{pid} {cwd}")
    return found


def grade(edge_course: EdgeCourse, submission: Path, *extra: str, output: Path | None = None, user: int | None = None,
          fmt: str = "gradescope", timeout: float = 2.0, umask: int | None = None) -> GraderRun:
    """`mha grade SUBMISSION --format FMT --output OUTPUT` with short time limits."""
    if output is None and fmt == "gradescope":
        output = new_folder(edge_course, "out") / "results.json"
    return run_grader(edge_course, "grade", str(submission), "--format", fmt, "--timeout", str(timeout),
                      "--total-timeout", "40", *extra, cwd=submission if submission.is_dir() else submission.parent,
                      output=output, user=user, umask=umask)


def scores(data: dict) -> dict[str, float]:
    """A Gradescope results.json's score per problem or quiz item (a problem's public test and the
    test of its hidden cases, shown after the due date by default, added up; a written item's test
    has no score: pending)."""
    found: dict[str, float] = {}
    for test in data["tests"]:
        if "score" in test:
            found[test["tags"][0]] = found.get(test["tags"][0], 0.0) + test["score"]
    return {name: round(score, 6) for name, score in found.items()}


def deserved(edge_course: EdgeCourse, lost: tuple[str, ...] = (), quiz: bool = True) -> dict[str, float]:
    """Full points but for the `lost` problems and items (and the quiz unless `quiz`)."""
    points = {**edge_course.points, **edge_course.quiz_points}
    return {i: 0.0 if i in lost or (not quiz and i in edge_course.quiz_points) else p for i, p in points.items()}


def graded_in_every_mode(edge_course: EdgeCourse, cases, make, *, timeout: float, workers: int) -> dict:
    """Each case laid out by `make(course, case, folder)` and graded in every mode that can run
    here (see `users`), `workers` at a time: {(case, user): GraderRun, or the exception}."""
    todo = [(case, user) for case in cases for user in users() if user is None or not dropped_uid_problem()]

    def attempt(job):
        case, user = job
        folder = new_folder(edge_course, case.name)
        make(edge_course, case, folder)
        try:
            return grade(edge_course, folder, user=user, timeout=timeout)
        except Exception as exc:  # reported by that case's test
            return exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(todo, pool.map(attempt, todo)))


@pytest.fixture(scope="module")
def edge_course():
    """The course of a test module; deleted however deep what the tests left in it."""
    edge_course = make_course()
    yield edge_course
    remove_tree(edge_course.base)


def users() -> list[int | None]:
    """The modes to run in: the tests' own user (None: root here, as on CI) and, as root, a dropped uid."""
    return [None, DROPPED_UID] if ROOT_MODE else [None]


def _closed_folders(paths) -> dict[str, set[str]]:
    """{a folder that uid DROPPED_UID (group 0) cannot enter: the names of its entries that lead
    to `paths`}, for the outermost such folders only (a pyenv installation under /root, 0700)."""
    closed: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            info = os.stat(folder)
            mine = info.st_mode & (0o010 if info.st_gid == 0 else 0o001)
            if not mine:
                closed.setdefault(str(folder), set()).add(parts[depth])
                break
    return closed


_libc = ctypes.CDLL(None, use_errno=True)
_CLOSED = _closed_folders({sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.executable),
                           str(ROOT)}) if ROOT_MODE else {}
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


def drop_to(user: int) -> None:
    """In a child process about to exec, as root: become `user` (group 0, no other groups). Where
    this Python lies in a folder that user cannot enter, the child first gets a mount namespace
    of its own in which that folder is an empty tmpfs holding only the entries that lead to
    Python and this checkout (bound from the real ones): what a non-root user who can run its own
    Python sees. Nothing outside this process's own namespace changes. Only system calls here
    (it runs between fork and exec)."""
    if _CLOSED:
        if _libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
            raise OSError(ctypes.get_errno(), "unshare")
        if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
        kept = [(f"{folder}/{name}", os.open(f"{folder}/{name}", os.O_PATH))  # in the new namespace
                for folder, names in _CLOSED.items() for name in sorted(names)]
        for folder in _CLOSED:
            if _libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 0, b"mode=0755") != 0:
                raise OSError(ctypes.get_errno(), f"mount tmpfs {folder}")
        for path, fd in kept:
            os.mkdir(path, 0o755)
            if _libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, _MS_BIND | _MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"mount --bind {path}")
            os.close(fd)
    os.setgroups([])
    os.setgid(0)
    os.setuid(user)


@functools.lru_cache(maxsize=1)
def dropped_uid_problem() -> str | None:
    """Why the dropped uid cannot run the grader here (None: it can), even with the private view
    of `drop_to`."""
    try:
        done = subprocess.run([sys.executable, "-c", "import grader.cli.commands"], cwd="/", env={
            **os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
            preexec_fn=lambda: drop_to(DROPPED_UID))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"uid {DROPPED_UID} cannot run {sys.executable} ({exc})"
    return None if done.returncode == 0 else f"uid {DROPPED_UID} cannot import the grader: {done.stderr[-200:]}"


def skip_unless_runnable(user: int | None) -> None:
    """Skip a dropped-uid run where that uid cannot run this Python at all (a failure when
    isolation is required)."""
    problem = dropped_uid_problem() if user is not None else None
    if problem:
        skip_isolation(problem)


__all__ = ["AR", "CR", "PS", "EdgeCourse", "GraderRun", "ROOT_MODE", "DROPPED_UID", "make_course", "new_folder",
           "write_submission", "run_grader", "grade", "scores", "deserved", "users", "skip_unless_runnable",
           "dropped_uid_problem", "drop_to", "graded_in_every_mode", "edge_course", "working_in"]
