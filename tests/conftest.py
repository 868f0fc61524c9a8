"""Shared fixtures: the repository's course, a CLI runner, and submission writers."""
from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from grader.cli.commands import main
from grader.course.code import read_code
from grader.course.loader import load_course

from ._required import REQUIRE_ENV, ROOT_MODE, isolation_required, skip_isolation
from ._shared import once

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"


def mha_command() -> str:
    """This environment's `mha`: the one beside the Python running the tests (a venv need not be
    activated, nor on PATH), else the first on PATH."""
    beside = Path(sys.executable).parent / "mha"
    found = str(beside) if beside.is_file() else shutil.which("mha")
    assert found, "no mha command beside this Python or on PATH: install the package first"
    return found
# The default course's own code (reference, named mistakes, answer functions), loaded as any course's is.
COURSE_CODE = read_code(EXERCISES / "course.py")
COURSE = COURSE_CODE.module


TEST_SECONDS = 600  # no test may take longer, whatever it grades: a hang fails, it never blocks the run

# Hypothesis (tests/test_fuzz.py): "ci", loaded by default, is derandomized with a fixed example
# budget, so every run tries the same inputs; `--hypothesis-profile=long` tries many more, at random
# (CONTRIBUTING.md, "Fuzzing"). Each property scales its own budget from the profile's.
settings.register_profile("ci", derandomize=True, database=None, max_examples=200, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=5000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def time_limit(request):
    """Every test gets a time limit (SIGALRM in the main thread raises TimeoutError in it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{request.node.nodeid} took more than {TEST_SECONDS} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TEST_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def pytest_configure(config):
    """Reports follow $COLUMNS (reports/terminal.py), which pytest-xdist sets in its workers to the
    terminal's width: the tests' reports get the default width wherever they run. The first
    process of the run (before any worker starts) byte-compiles this checkout when Python will
    not (`byte_compile_checkout`)."""
    for variable in ("COLUMNS", "LINES"):
        os.environ.pop(variable, None)
    if not hasattr(config, "workerinput"):
        byte_compile_checkout()


def byte_compile_checkout(root: Path = ROOT, imported_from: Path | None = None,
                          python_writes: bool | None = None) -> list[str]:
    """The packages of the checkout `root` compiled to bytecode, as `pip install` compiles an
    installed package: the names compiled, none when there is nothing to do. `imported_from`:
    the folder the grader is imported from (this Python's); `python_writes`: whether Python
    writes .pyc files itself as it imports (this Python's setting).

    With PYTHONDONTWRITEBYTECODE set (as many container images set it), Python writes no .pyc
    when it imports, so an editable install (this checkout) would be compiled from its source
    again by every `mha` process and every zygote the suite starts (zygotes run with -B and
    never write one): about a third of a cold grade's time, in hundreds of processes. Up to
    date files are left alone. An installed package (not this checkout's) was compiled by pip."""
    import compileall

    import grader
    imported_from = imported_from or Path(grader.__file__).resolve().parent
    python_writes = not sys.flags.dont_write_bytecode if python_writes is None else python_writes
    if python_writes or imported_from != root / "grader":
        return []
    names = ["grader", "exercises"]
    for name in names:
        compileall.compile_dir(str(root / name), quiet=1)
    return names


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml's options): a worker per core and two more (twice the cores on one
    or two). A good part of the suite waits rather than computes (student processes running out
    their time limits, other platforms' tools starting, a worker waiting for an export another one
    builds), and the extra workers use that time: 482 s where one per core took 524, on two cores
    (docs/performance.md). No more than two extra: each worker holds its own imports (otter,
    nbformat, numpy...), and a machine of many cores has workers enough to fill the waits."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + min(cores, 2)


def pytest_collection_modifyitems(items):
    """Files holding a `slow` test run first (the order is otherwise kept): pytest-xdist hands out
    whole files (`--dist loadfile`) in this order, so a long file does not start last and leave
    the other workers idle while it ends."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_collection_finish(session):
    """What collection made (every test module and what it imported: the grader, numpy, hypothesis...)
    lives until the end of the run: frozen (`gc.freeze`), the cyclic collector's full passes never
    walk it again (one such pass over it took about 90 ms). On five test files of in-process grading,
    the workers' collections took 1.7 s of CPU with it, 2.5 s without."""
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item):
    """A test marked `root` runs only as root: skipped otherwise, a failure when isolation is required."""
    if item.get_closest_marker("root") is not None and not ROOT_MODE:
        skip_isolation("this test needs root (a separate student uid, namespaces)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With MHA_REQUIRE_ISOLATION=1 a `root` test that skipped anyway (a pytest.skip in its body or
    in a fixture it uses) is reported as failed: isolation tests never skip in silence there."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isolation_required() and item.get_closest_marker("root") is not None \
            and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{reason} (isolation tests must run: {REQUIRE_ENV}=1)"


@pytest.fixture(scope="session", autouse=True)
def seed_cache(tmp_path_factory):
    """Compiled assignments (grader/grading/seed_cache.py) go to a folder of this test run, not ~/.cache;
    subprocesses inherit it."""
    from grader.grading.seed_cache import CACHE_ENV
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("seed-cache"))
    yield Path(os.environ[CACHE_ENV])
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(scope="session", autouse=True)
def wheels_downloaded_once():
    """`wheelhouse.download` (a `pip download` of the exports' dependency wheels, seconds each
    time) runs pip once per set of arguments in each test process: a later identical call gets a
    copy of the wheels the first call got, or raises its error again. Every caller still calls it
    with its own arguments; a test may monkeypatch it as before."""
    from grader.errors import InternalError
    from grader.exports import wheelhouse
    real = wheelhouse.download
    done: dict[tuple, dict[str, bytes] | InternalError] = {}

    def download(python, platforms=wheelhouse.GRADESCOPE_PLATFORMS, requirements=None, timeout=600):
        key = (python, tuple(platforms), None if requirements is None else tuple(requirements))
        if key not in done:
            try:
                done[key] = real(python, platforms=platforms, requirements=requirements, timeout=timeout)
            except InternalError as exc:
                done[key] = exc
        if isinstance(done[key], InternalError):
            raise done[key]
        return dict(done[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wheelhouse, "download", download)
        yield


@pytest.fixture(scope="session")
def course():
    """The packaged course with its optional problems and quiz items switched on: every problem and
    item is held to the contract (model answers full marks, stubs 0, every named mistake caught)."""
    return load_course(EXERCISES).with_optional()


def with_everything_on(folder: Path) -> Path:
    """The packaged course copied to `folder` with its optional problems moved under `problems`
    (after the core) and its optional quiz items asked, as an instructor who switches them all on
    would have it."""
    import yaml
    shutil.copytree(EXERCISES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "assignment.yaml"
    core, _, optional = path.read_text().partition("\noptional:")
    problems = (yaml.safe_load("optional:" + optional)["optional"] or {}).get("problems") or ()
    switched_on = "".join(f"  - {i}\n" for i in problems)
    path.write_text(core.rstrip("\n") + "\n" + switched_on)
    return folder


@pytest.fixture(scope="session")
def everything_on(tmp_path_factory) -> Path:
    """A copy of the packaged course with every optional problem switched on."""
    return with_everything_on(tmp_path_factory.mktemp("everything-on") / "course")


@pytest.fixture
def cli_everything(everything_on):
    """`mha ...` in-process on the course with every optional problem switched on."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, ["--course", str(everything_on), *args], catch_exceptions=False)

    return invoke


@pytest.fixture(scope="session")
def core_course():
    """The packaged course as assignment.yaml grades it by default: the core, optional ones off."""
    return load_course(EXERCISES)


@pytest.fixture(scope="session")
def otter_autograder(tmp_path_factory) -> Path:
    """The otter export after `otter assign` and `otter generate`, with the venv its zip declares,
    built once per test run (tests/test_export_otter.py's `build_autograder`); copy before use."""
    from .test_export_otter import build_autograder
    return once(tmp_path_factory, "otter-autograder", build_autograder)[0]


@pytest.fixture(scope="session")
def nbgrader_graded(tmp_path_factory) -> tuple[Path, dict]:
    """The nbgrader export after `generate_assignment` and `autograde` of three students, built
    once per test run (tests/test_export_nbgrader.py's `build_graded`); read it, change nothing."""
    from .test_export_nbgrader import build_graded
    return once(tmp_path_factory, "nbgrader-graded", build_graded)


@pytest.fixture
def cli():
    """Invoke `mha ...` in-process; returns the click Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, ["--course", str(EXERCISES), *args], catch_exceptions=False)

    return invoke


@pytest.fixture
def write_submission(tmp_path):
    """Write a submission file from source text; returns its path."""
    def write(source: str, name: str = "attention.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return path
    return write


def solution_source() -> str:
    return (SOLUTIONS / "attention.py").read_text()


def run_as_uid(uid: int, action) -> int:
    """Run `action()` in a forked child switched to `uid` (= gid, no groups); its exit code, or
    70 if it raised. The child only makes system calls: prepare everything before."""
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = action()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


# Run by `uids_holding_keys` in a small process of its own: argv = keyctl's syscall number, "1" to
# search the persistent keyring too, the key names (comma-separated), then the uids. Prints each uid
# whose child (switched to it, making only system calls) found a key or failed.
_FIND_KEYS = """
import ctypes, os, sys
libc, c_long = ctypes.CDLL(None, use_errno=True), ctypes.c_long
keyctl, persistent_too = c_long(int(sys.argv[1])), sys.argv[2] == "1"
names = [name.encode() for name in sys.argv[3].split(",")]
def search():
    rings = [-4, -5]  # the user and user-session keyrings
    if persistent_too:
        persistent = libc.syscall(keyctl, c_long(22), c_long(-1), c_long(-4))
        if persistent > 0:
            rings.append(persistent)
    hits = [libc.syscall(keyctl, c_long(10), c_long(ring), b"user", name, c_long(0)) > 0
            for ring in rings for name in names]
    return 1 if any(hits) else 0
for uid in map(int, sys.argv[4:]):
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = search()
        finally:
            os._exit(code)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        print(uid)
"""


def uids_holding_keys(keyctl: int, names: list[str], uids, persistent: bool) -> list[int]:
    """The uids among `uids` whose user or user-session keyring (and persistent keyring, if
    `persistent`) holds a "user" key named in `names`, or whose search failed. One child per uid,
    forked by a small helper process: a fork of the test process, whose memory is large, costs
    far more, and a busy machine has a hundred sandbox uids holding keys."""
    uids = list(uids)
    if not uids:
        return []
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _FIND_KEYS, str(keyctl), "1" if persistent else "0",
                           ",".join(names), *map(str, uids)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the key search failed: {done.stderr[-2000:]}"
    return [int(line) for line in done.stdout.split()]


REQUIRE_ISOLATION = os.environ.get("MHA_REQUIRE_ISOLATION", "").strip() in ("1", "yes", "true")


def isolation_missing(reason: str) -> None:
    """A test that needs root or namespaces cannot run here: it skips, or fails when the run
    requires isolation (MHA_REQUIRE_ISOLATION=1, as `.ci/run` sets it as root)."""
    if REQUIRE_ISOLATION:
        pytest.fail(f"isolation is required (MHA_REQUIRE_ISOLATION=1) but {reason}", pytrace=False)
    pytest.skip(reason)


def installation_in_tmp() -> set[str]:
    """The names in /tmp of the folders holding this Python installation, when it lies there (a
    virtualenv under /tmp): a jailed student's fresh /tmp shows them, read-only, so that Python
    keeps importing from them by their paths."""
    from grader.sandbox.confine import library_folders
    names = set()
    for path in library_folders():
        parts = Path(os.path.normpath(path)).parts
        if len(parts) > 2 and parts[:2] == ("/", "tmp"):
            names.add(parts[2])
    return names


def installation_hidden_from_others() -> bool:
    """Whether other users cannot reach this Python's standard library by its path (a folder on the
    way to it lacks o+x), as with a Python under /root (pyenv): the hard case for imports as a student uid."""
    path = Path(os.path.realpath(sys.base_prefix))
    return any(not os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def copy_course_code(folder: Path) -> None:
    """The default course's code (every Python file of exercises/ but the student's attention.py, and
    the models/ package its quiz answers read) into `folder`."""
    for path in EXERCISES.glob("*.py"):
        if path.name != "attention.py":
            shutil.copy(path, folder)
    shutil.copytree(EXERCISES / "models", folder / "models", ignore=shutil.ignore_patterns("__pycache__"))


def lay_out_course(base: Path, header: str, order, problems, extra=()) -> Path:
    """A course folder beside a checkout's usual neighbours (solutions/, .git/), every file
    readable by anyone until the grader protects it: base/exercises with assignment.yaml (`header`
    then the problems in `order`), the `problems`' YAML files and the `extra` files of exercises/."""
    exercises = base / "exercises"
    (exercises / "problems").mkdir(parents=True)
    (exercises / "assignment.yaml").write_text(header + "code: course.py\nproblems:\n" + "".join(f"  - {p}\n" for p in order))
    copy_course_code(exercises)
    for name in extra:
        shutil.copy(EXERCISES / name, exercises)
    for problem in problems:
        shutil.copy(EXERCISES / "problems" / f"{problem}.yaml", exercises / "problems")
    (base / "solutions").mkdir()
    shutil.copy(SOLUTIONS / "attention.py", base / "solutions")
    (base / ".git").mkdir()
    (base / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for folder, _, files in os.walk(base):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return exercises
