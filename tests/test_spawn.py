"""Student processes forked from a zygote (grader/sandbox/spawn.py): the fast path keeps the guarantees.

The hostile submissions of test_hostile.py and the isolation tests run on this path too (it is
the only one on Linux); these tests show that it is the path taken, that the zygote hands
student code nothing of the grader, and that one submission cannot change the next.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.classroom import batch
from grader.course.loader import load_course
from grader.sandbox import spawn
from grader.sandbox.isolation import MARKER
from grader.sandbox.session import Limits, RunStatus, Session

from .conftest import EXERCISES, ROOT, solution_source

ROOT_MODE = os.geteuid() == 0
pytestmark = pytest.mark.skipif(not spawn.FORK_SERVER, reason="the fork server is Linux-only")


def value(session: Session, function: str) -> object:
    run = session.run(function, [[]], 10.0).cases[0]
    assert run.status is RunStatus.RETURNED, run
    return run.value


@pytest.fixture
def without_namespaces(monkeypatch):
    """The zygote's own mechanics, seen from the student process: in namespaces (as root, where
    the kernel allows them) it sees only its own process-id space (see test_isolation.py)."""
    from grader.sandbox.isolation import NAMESPACES_ENV
    monkeypatch.setenv(NAMESPACES_ENV, "off")


@pytest.mark.usefixtures("without_namespaces")
class TestForkServer:
    def test_sessions_are_forked_from_one_zygote(self, write_submission):
        """Each session's worker is a child of the same zygote, in a process group of its own."""
        path = write_submission("import os\ndef ids():\n    return [os.getpid(), os.getppid(), os.getpgid(0)]\n")
        server = spawn.fork_server()
        before = server.spawned
        ids = []
        for _ in range(2):
            with Session(path) as session:
                ids.append(value(session, "ids"))
        assert [parent for _, parent, _ in ids] == [server.proc.pid] * 2
        assert ids[0][0] != ids[1][0] and all(group == pid for pid, _, group in ids)
        assert spawn.fork_server() is server and server.spawned == before + 2

    def test_a_fresh_child_serves_the_problem_after_a_timeout(self, write_submission):
        """After a timeout the next problem gets a new process, forked too (no new Python)."""
        path = write_submission("import os\ndef spin():\n    while True:\n        pass\n"
                                "def pid():\n    return os.getpid()\n")
        with Session(path, Limits(problem_seconds=0.5)) as session:
            first = value(session, "pid")
            assert session.run("spin", [[]], 0.5).cases[0].status is RunStatus.TIMEOUT
            second = value(session, "pid")
        assert first != second

    def test_a_retired_worker_is_reaped_at_once(self, write_submission):
        """Once a worker is killed (here after a timeout), the zygote has reaped it before the next
        problem starts: nothing of it is left, not even a zombie."""
        path = write_submission("import os\ndef pid():\n    return os.getpid()\n"
                                "def spin():\n    while True:\n        pass\n")
        with Session(path) as session:
            pid = value(session, "pid")
            assert session.run("spin", [[]], 0.5).cases[0].status is RunStatus.TIMEOUT
            assert not Path(f"/proc/{pid}").exists()

    @pytest.mark.parametrize("leave, fresh", [
        ("pass", False),                 # nothing left: the worker goes on
        ("_zombie()", False),            # an exited child only: every process scanned, none runs
        ("_zombie(); _daemon()", True),  # a daemon beside an exited child
    ], ids=["nothing", "zombie", "zombie-and-daemon"])
    def test_the_next_problem_gets_a_fresh_process_only_after_leftovers(self, write_submission, leave, fresh):
        """A worker that left a running process behind is replaced before the next problem, one
        that left none is kept: exited (zombie) children neither hide a daemon nor count as one."""
        path = write_submission(f"""
            import os, time
            def _zombie():
                if os.fork() == 0:
                    os._exit(0)
                time.sleep(0.05)
            def _daemon():
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        time.sleep(600)
                    os._exit(0)
                time.sleep(0.05)
            def leave():
                {leave}
                return os.getpid()
            def pid():
                return os.getpid()
        """)
        with Session(path) as session:
            first = value(session, "leave")
            assert (value(session, "pid") != first) is fresh

    def test_student_code_sees_nothing_of_the_grader(self, write_submission):
        """No grader module (so no reference, problems or expected values), no file descriptor
        but its own pipes and (as root, where the uid cannot reach them by their path) the
        Python installation's import folders, no environment but its session's."""
        path = write_submission("""
            import os, stat, sys
            def probe():
                modules = sorted(m for m in sys.modules if m.split(".")[0] in ("grader", "yaml", "click"))
                fds = {}
                for fd in os.listdir("/proc/self/fd"):
                    try:
                        info = os.stat(f"/proc/self/fd/{fd}")
                    except OSError:
                        continue  # listdir's own, closed by now
                    folder = stat.S_ISDIR(info.st_mode)
                    fds[int(fd)] = os.readlink(f"/proc/self/fd/{fd}") if folder else "pipe"
                return [modules, fds, sorted(os.environ)]
        """)
        with Session(path) as session:
            modules, fds, env = value(session, "probe")
        assert modules == []
        pipes = sorted(int(fd) for fd, what in fds.items() if what == "pipe")
        assert pipes[:3] == [0, 1, 2] and len(pipes) == 4  # stdin, stdout, stderr, answers
        installation = tuple(os.path.realpath(p) for p in (sys.base_prefix, sys.prefix))
        folders = [what for what in fds.values() if what != "pipe"]
        assert all(os.path.realpath(f).startswith(installation) for f in folders), folders
        assert env == sorted(spawn.student_env("/home", {MARKER: "x"}))

    def test_the_session_marker_is_in_proc_environ(self, write_submission):
        """Without a separate user, the grader finds a worker's escaped processes by the marker in
        /proc/PID/environ: the forked child shows its session's marker, not the zygote's."""
        path = write_submission("import os\ndef pid():\n    return os.getpid()\n")
        with Session(path, separate_user=False) as session:
            pid = value(session, "pid")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"{MARKER}={session.isolation.marker}".encode() in environ

    def test_a_dead_zygote_is_replaced(self, write_submission):
        """If the zygote dies, the next session starts a new one."""
        path = write_submission("import os\ndef parent():\n    return os.getppid()\n")
        old = spawn.fork_server()
        old.proc.kill()
        old.proc.wait()
        with Session(path) as session:
            parent = value(session, "parent")
        new = spawn.fork_server()
        assert new is not old and parent == new.proc.pid

    def test_without_the_fork_server_python_starts_the_worker(self, write_submission, monkeypatch):
        """Off Linux a fresh `python -I worker.py` is the worker, the grader its parent."""
        monkeypatch.setattr(spawn, "FORK_SERVER", False)
        path = write_submission("import os\ndef parent():\n    return os.getppid()\n")
        with Session(path) as session:
            assert value(session, "parent") == os.getpid()


ATTACK = """
import builtins, os, signal, sys
import numpy

SEPARATE = @SEPARATE@

def attack():
    numpy.exp = lambda x: x                  # this process's numpy only
    numpy.random.seed(1234)
    builtins.sorted = lambda *args, **kwargs: ["patched"]
    sys.modules["planted"] = sys
    os.environ["PLANTED"] = "1"
    if os.fork() == 0:  # a daemon
        os.setsid()
        os.execvp("sleep", ["sleep", "600"])
    tried = {}
    zygote = os.getppid()
    for name, how in (("kill", lambda: os.kill(zygote, signal.SIGSTOP)),
                      ("mem", lambda: open(f"/proc/{zygote}/mem", "r+b").close())):
        if not SEPARATE:  # the grader's own user may signal it (docs/security.md)
            continue
        try:
            how()
            tried[name] = "done"
        except OSError as exc:
            tried[name] = type(exc).__name__
    return tried
""".replace("@SEPARATE@", str(ROOT_MODE))

PROBE = """
import builtins, os, sys
import numpy

def state():
    return {"exp": numpy.exp(0.0), "sorted": sorted([2, 1]), "planted": "planted" in sys.modules,
            "env": "PLANTED" in os.environ, "draw": float(numpy.random.random()), "parent": os.getppid()}
"""


@pytest.mark.usefixtures("without_namespaces")
class TestOneSubmissionCannotChangeTheNext:
    def test_patches_and_signals_stay_in_their_process(self, write_submission):
        """A child that patches numpy and builtins, plants a module, an environment variable and a
        daemon, and goes for the zygote leaves the next child of that zygote pristine."""
        server = spawn.fork_server()
        with Session(write_submission(ATTACK, "attack.py")) as session:
            tried = value(session, "attack")
        with Session(write_submission(PROBE, "probe.py")) as session:
            seen = value(session, "state")
        assert seen["exp"] == 1.0 and seen["sorted"] == [1, 2]
        assert not seen["planted"] and not seen["env"]
        if ROOT_MODE:  # a separate uid cannot signal the zygote or read its memory
            assert tried == {"kill": "PermissionError", "mem": "PermissionError"}
            assert seen["parent"] == server.proc.pid

    def test_children_draw_different_random_numbers(self, write_submission):
        """numpy's global generator is seeded afresh in each child, not copied from the zygote."""
        path = write_submission(PROBE)
        draws = []
        for _ in range(2):
            with Session(path) as session:
                draws.append(value(session, "state")["draw"])
        assert draws[0] != draws[1]

    def test_grade_all_forks_every_submission_and_the_next_one_scores_full(self, tmp_path, monkeypatch):
        """In a batch, a hostile submission (numpy patched, the zygote and the grader signalled)
        costs only its own points: the next student, forked from the same zygote, gets full
        marks. No Python is started per submission: every worker is a fork."""
        course = load_course(EXERCISES)
        hostile = solution_source() + textwrap.dedent(f"""

            import os, signal
            np.isclose = lambda *args, **kwargs: True
            _zygote = os.getppid()
            _grader = int(open(f"/proc/{{_zygote}}/status").read().split("PPid:")[1].split()[0])
            for _pid in (_zygote, _grader) if {ROOT_MODE} else ():  # only a separate uid is kept out
                try:
                    os.kill(_pid, signal.SIGSTOP)
                except OSError:
                    pass


            def softmax(scores):
                return np.zeros(np.shape(scores))
        """)
        for student, source in (("a_hostile", hostile), ("b_model", solution_source())):
            (tmp_path / "class" / student).mkdir(parents=True)
            (tmp_path / "class" / student / "attention.py").write_text(source)
        server = spawn.fork_server()
        before = server.spawned

        real_popen = spawn.subprocess.Popen

        def no_new_python(command, *args, **kwargs):
            # the course's reference for a cascade re-run runs apart, never a student's code (cascade.py)
            if list(command[1:4]) == ["-I", "-m", "grader.grading.cascade"]:
                return real_popen(command, *args, **kwargs)
            raise AssertionError("a student process was started with a new Python")

        monkeypatch.setattr(spawn.subprocess, "Popen", no_new_python)
        outcomes = list(batch.grade_all(course, batch.discover(tmp_path / "class"), tmp_path / "out",
                                        seed_of=lambda student: 0, jobs=1, limits=Limits(problem_seconds=5)))
        scores = {o.submission.student: o.row.scores for o in outcomes}
        problems = {p.id: p.points for p in course.problems}
        assert {k: v for k, v in scores["b_model"].items() if k in problems} == problems
        assert scores["a_hostile"]["softmax"] == 0
        assert server.spawned >= before + 2 and spawn.fork_server() is server


class TestSparesStartedAhead:
    """`mha grade-all` starts each grader process's zygote before it loads the course
    (spawn.prestart_spares); a grader process forked by the batch adopts one, and the batch leaves
    none running and no folder lent to them."""

    @staticmethod
    def _class(folder: Path, students: int) -> list[batch.Submission]:
        said = solution_source() + textwrap.dedent("""

            import os


            def softmax(scores):
                raise ValueError(f"forked by {os.getppid()}")
        """)
        for number in range(students):
            (folder / f"s{number}").mkdir(parents=True)
            (folder / f"s{number}" / "attention.py").write_text(said)
        return batch.discover(folder)

    @staticmethod
    def _grade(course, found, out: Path) -> None:
        outcomes = list(batch.grade_all(course, found, out, seed_of=lambda student: 0, jobs=2,
                                        limits=Limits(problem_seconds=5)))
        assert [o.status for o in outcomes] == ["graded"] * len(found)

    @pytest.mark.usefixtures("without_namespaces")
    def test_each_grader_process_forks_its_students_from_a_spare(self, tmp_path):
        course = load_course(EXERCISES)
        found = self._class(tmp_path / "class", 4)
        spawn.prestart_spares(2)
        spares = list(spawn._spares)
        self._grade(course, found, tmp_path / "out")
        parents = {int(line.rsplit(" ", 1)[1]) for s in found
                   for line in (tmp_path / "out" / "feedback" / f"{s.student}.txt").read_text().splitlines()
                   if line.rstrip().rsplit(" ", 1)[0].endswith("forked by")}
        assert parents and parents <= {spare.proc.pid for spare in spares}
        assert all(spare.proc.returncode is not None for spare in spares)  # ended, and reaped by the batch
        assert spawn._spares == [] and spawn._handed == []

    def test_a_spare_never_adopted_is_stopped_and_no_lent_folder_stays(self, tmp_path, monkeypatch):
        import tempfile
        temporary = tmp_path / "tmp"
        temporary.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(temporary))
        course = load_course(EXERCISES)
        found = self._class(tmp_path / "class", 2)
        spawn.prestart_spares(3)  # two grader processes: the third spare is nobody's
        spares = list(spawn._spares)
        self._grade(course, found, tmp_path / "out")
        assert all(spare.proc.returncode is not None for spare in spares)
        assert sorted(temporary.iterdir()) == []  # neither the lent folders nor the sessions' are left


class TestCommandLine:
    def test_grade_starts_the_zygote_before_loading_the_course(self, cli, monkeypatch, tmp_path):
        """`mha grade` starts the zygote first, so numpy loads there while the grader loads YAML
        (here with an empty seed cache, so the assignment is loaded)."""
        import grader.course.loader
        from grader.grading.seed_cache import CACHE_ENV
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
        calls = []
        real_prestart, real_read = spawn.prestart, grader.course.loader.read_course
        monkeypatch.setattr(spawn, "prestart", lambda: (calls.append("zygote"), real_prestart())[1])
        # an unvalidated course is read (and checked) through read_course, which load_course calls too
        monkeypatch.setattr(grader.course.loader, "read_course", lambda root: (calls.append("load"), real_read(root))[1])
        result = cli("grade", str(ROOT / "solutions"), "--format", "json", "--problem", "softmax")
        assert result.exit_code == 0
        assert calls[:2] == ["zygote", "load"]

    @pytest.mark.parametrize("students, zygotes", [(3, 2), (1, 1)])
    def test_grade_all_starts_a_zygote_per_grader_process_before_loading_the_course(self, cli, monkeypatch, tmp_path,
                                                                                    students, zygotes):
        """`mha grade-all --jobs 2` starts its grader processes' zygotes first (spawn.prestart_spares),
        so numpy loads there while the course loads: one per grader process, and one for a class of
        one (graded in the command's own process)."""
        import grader.course.loader
        calls = []
        real_spares, real_load = spawn.prestart_spares, grader.course.loader.load_course
        real_read = grader.course.loader.read_course
        monkeypatch.setattr(spawn, "prestart_spares", lambda count: (calls.append(f"zygotes {count}"),
                                                                     real_spares(count))[1])
        # a validated course is loaded through load_course, one not validated yet through read_course
        monkeypatch.setattr(grader.course.loader, "load_course", lambda root: (calls.append("load"), real_load(root))[1])
        monkeypatch.setattr(grader.course.loader, "read_course", lambda root: (calls.append("load"), real_read(root))[1])
        for number in range(students):
            (tmp_path / "class" / f"s{number}").mkdir(parents=True)
            (tmp_path / "class" / f"s{number}" / "attention.py").write_text(solution_source())
        result = cli("grade-all", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "2",
                     "--no-progress")
        assert result.exit_code == 0, result.output
        assert calls[:2] == [f"zygotes {zygotes}", "load"]
        assert spawn._spares == [] and spawn._handed == []
        calls.clear()  # a second run into the same folder reads its results back: it starts none ahead
        result = cli("grade-all", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "2",
                     "--no-progress")
        assert result.exit_code == 0, result.output
        assert calls[:2] == ["zygotes 0", "load"]

    def test_grade_imports_nothing_heavy(self, tmp_path):
        """`mha grade` loads no plotting, notebook, otter or exporter module."""
        code = ("import json, sys; from grader.cli.commands import main\n"
                "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
                "print(json.dumps(sorted(sys.modules)))")
        out = subprocess.run([sys.executable, "-c", code, "--course", str(EXERCISES), "grade",
                              str(ROOT / "solutions"), "--format", "json", "--output", str(tmp_path / "r.json")],
                             capture_output=True, text=True, timeout=120)
        modules = json.loads(out.stdout.strip().splitlines()[-1])
        heavy = [m for m in modules if m.split(".")[0] in ("matplotlib", "nbformat", "otter", "pandas", "jinja2",
                                                         "IPython", "jupyter_client")
                 or m.startswith("grader.exports")]
        assert heavy == []
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["score"] == report["max_score"]


class TestForkedProcess:
    def test_a_released_process_is_never_signalled_again(self, write_submission, monkeypatch):
        """Once given up (the zygote may reap it and its pid be reused), a forked process counts
        as killed: killing the worker again signals nothing."""
        path = write_submission("def f():\n    return 1\n")
        with Session(path) as session:
            value(session, "f")
            worker = session._worker
            worker.kill()
            signalled = []
            monkeypatch.setattr(os, "kill", lambda pid, sig: signalled.append(pid))
            monkeypatch.setattr(os, "killpg", lambda pid, sig: signalled.append(pid))
            worker.kill()
            assert worker.proc.returncode == -signal.SIGKILL and worker.proc.wait() == -signal.SIGKILL
            assert worker.proc.pid not in signalled

    def test_a_refused_spawn_is_the_graders_failure_once_its_reply_is_read(self, write_submission, monkeypatch):
        """The session goes on while the zygote forks its student process (ForkedProcess reads the
        reply when first needed): a spawn the zygote refuses is still an InternalError naming
        why, raised by the session, with nothing of it left running."""
        from grader.errors import InternalError
        path = write_submission("def f():\n    return 1\n")
        server = spawn.fork_server()
        real = server.request

        def refused(request, fds):  # the zygote gets no descriptors: it refuses, and says why
            return real(request, ())

        monkeypatch.setattr(server, "request", refused)
        with pytest.raises(InternalError, match=r"could not start \(expected 4 file descriptors\)"):
            with Session(path) as session:
                session.run("f", [[]], 10.0)
        assert session._worker is None


# What the zygote started first thing (zygote_start) becomes, in a fresh Python: a JSON line.
EARLY = """\
import json, os, sys, tempfile
from grader.sandbox import spawn, zygote_start
from grader.sandbox.session import Session
leaked = tempfile.NamedTemporaryFile(prefix="mha-leaked-")
os.set_inheritable(leaked.fileno(), True)  # what a careless caller may leave open for its children
zygote_start.start()
early = zygote_start._early[1] if zygote_start._early else None
if sys.argv[1] == "unused":
    spawn.stop_fork_server()
    print(json.dumps({"early": early, "gone": not os.path.exists(f"/proc/{early}")}))
    sys.exit()
if sys.argv[1] == "forked":
    child = os.fork()
    if child == 0:
        os._exit(0 if zygote_start.take() is None else 1)
    print(json.dumps({"early": early, "child took it": os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0}))
    sys.exit()
server = spawn.fork_server()
with Session(b"import os\\ndef parent():\\n    return os.getppid()\\n") as session:
    parent = session.run("parent", [[]], 30.0).cases[0].value
fds = {os.readlink(f"/proc/{server.proc.pid}/fd/{n}") for n in os.listdir(f"/proc/{server.proc.pid}/fd")}
print(json.dumps({"early": early, "server": server.proc.pid, "parent": parent, "leaked": leaked.name in fds,
                  "cwd": os.readlink(f"/proc/{server.proc.pid}/cwd")}))
"""


class TestStartedFirst:
    """`mha grade` and `mha check` start the zygote with built-in modules only, before anything
    else (zygote_start), and the fork server takes it over."""

    @staticmethod
    def _run(mode: str, **env: str) -> dict:
        environ = {**os.environ, "MHA_NAMESPACES": "off", **env}  # (a student sees its parent outside them)
        done = subprocess.run([sys.executable, "-c", EARLY, mode], cwd=ROOT, env=environ, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def test_the_fork_server_forks_from_the_zygote_started_first(self):
        """The student process is the early zygote's child; the zygote runs in /, and a descriptor
        its starter left inheritable is not open in it."""
        seen = self._run("used")
        assert seen["early"] and seen["server"] == seen["early"] == seen["parent"]
        assert seen["cwd"] == "/" and not seen["leaked"]

    def test_one_never_used_is_stopped_and_reaped(self):
        seen = self._run("unused")
        assert seen["early"] and seen["gone"]

    def test_a_forked_copy_of_its_starter_does_not_take_it(self):
        seen = self._run("forked")
        assert seen["early"] and not seen["child took it"]

    def test_where_it_cannot_start_the_fork_server_starts_its_own(self, tmp_path):
        """No folder for its stderr file: nothing is started early, and the fork server starts
        the zygote itself, as before."""
        seen = self._run("used", TMPDIR=str(tmp_path / "missing"))
        assert seen["early"] is None and seen["server"] == seen["parent"]
