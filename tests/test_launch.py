"""The `mha` console script (grader.cli.launch): which command it sees, the zygote started first, one BLAS thread."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from grader.cli import chosen, launch

from .conftest import EXERCISES, ROOT, SOLUTIONS

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

# `launch.main()` as the console script runs it. As it ends (at os._exit, or in an exit handler
# for a command that exits as usual) the last line on stderr is JSON: the thread variables the
# process ended with, the exit handlers registered since it started, how it ended.
LAUNCH = """\
import atexit, json, os, sys
VARIABLES = {variables!r}
registered, register = [], atexit.register
atexit.register = lambda f, *a, **k: registered.append(f.__module__ + "." + f.__qualname__) or register(f, *a, **k)

def report(how):
    atexit.unregister(report)
    print(json.dumps({{"threads": {{v: os.environ.get(v) for v in VARIABLES}}, "exit handlers": registered,
                      "ended": how}}), file=sys.stderr, flush=True)

register(report, "exit handlers")
real_exit = os._exit
os._exit = lambda status: report("os._exit") or real_exit(status)
sys.argv = ["mha", *json.loads(sys.argv[1])]
from grader.cli.launch import main
main()
"""


def run_launch(argv: list[str], **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `mha ARGV` through launch.main() in a fresh Python whose environment has no thread
    variables but those in `env`; the result and what LAUNCH reports at the end."""
    environ = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    environ.update(env, MHA_COURSE=str(EXERCISES))
    code = LAUNCH.format(variables=THREAD_VARIABLES)
    done = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=120)
    return done, json.loads(done.stderr.strip().splitlines()[-1])


class TestCommandOf:
    @pytest.mark.parametrize("argv,command", [
        (["grade", "x"], "grade"),
        (["--course", "dir", "check"], "check"),
        (["--course", "grade", "list"], "list"),  # the value of --course is no command
        (["--version"], None),
        (["--", "grade"], "grade"),
        (["--"], None),
        ([], None),
        (["-h", "grade-all", "subs"], "grade-all"),
        (["--course"], None),
    ])
    def test_the_first_argument_that_is_no_option_or_option_value(self, argv, command):
        """The sub-command is the first word not starting with '-' (after `--`, the next word), skipping --course' value."""
        assert launch.command_of(argv) == command

    @pytest.mark.parametrize("group", ["grader.cli.commands:main", "grader.cli.student_commands:bundle"])
    def test_the_options_taking_a_value_are_clicks(self, group):
        """OPTIONS_WITH_VALUE is read off click's own group: every group option that takes a value
        (and no flag) is in it, so a new one cannot be mistaken for the sub-command."""
        import importlib

        import click
        module, name = group.split(":")
        main = getattr(importlib.import_module(module), name)
        taking = {name for p in main.params if isinstance(p, click.Option) and not p.is_flag and not p.count
                  for name in (*p.opts, *p.secondary_opts)}
        assert taking <= launch.OPTIONS_WITH_VALUE
        if group == "grader.cli.commands:main":
            assert taking == launch.OPTIONS_WITH_VALUE


class TestMain:
    @pytest.mark.parametrize("argv,calls", [
        (["grade", "solutions"], ["zygote started", "zygote", "cli mha", "freeze", "end None"]),
        (["--course", "x", "check"], ["zygote started", "zygote", "cli mha", "freeze", "end None"]),
        (["list"], ["cli mha"]),
        (["--course", "grade", "validate"], ["cli mha"]),
        # chosen IDs: the grade command takes the zygote over once it knows they need one
        (["--course", "COURSE", "grade", "solutions", "--problem", "softmax"], ["zygote started", "cli mha", "freeze",
                                                                              "end None"]),
        (["grade", "solutions", "--problem", "QUIZ"], ["zygote started", "cli mha", "freeze", "end None"]),
        # quiz items only, of a course named here: no student code runs, no zygote starts
        (["--course", "COURSE", "grade", "solutions", "--problem", "QUIZ"], ["cli mha", "freeze", "end None"]),
        (["grade", "solutions", "--course=packaged", "--problem=QUIZ"], ["cli mha", "freeze", "end None"]),
        (["--course", "COURSE", "check", "QUIZ"], ["zygote started", "zygote", "cli mha", "freeze", "end None"]),
    ])
    def test_grading_commands_start_the_zygote_before_the_cli(self, argv, calls, monkeypatch, core_course):
        """check and grade start the zygote before the CLI runs (first of all, with built-in
        modules only: zygote_start; then `spawn` takes it over), with the cyclic garbage collector
        off, freeze what they made once done and end the process (one submission: see launch.py);
        other commands do not start it, keep the collector on and return. A grade of quiz items
        only (COURSE: the course folder, QUIZ: one of its quiz items) of a course named on the
        command line starts none."""
        import grader.cli.commands
        from grader.sandbox import spawn, zygote_start
        quiz_item = next(i.id for i in core_course.quiz.items if not i.manual)
        argv = [{"COURSE": str(EXERCISES), "QUIZ": quiz_item}.get(a, a.replace("QUIZ", quiz_item)) for a in argv]
        seen = []
        monkeypatch.setattr(zygote_start, "start", lambda: seen.append("zygote started"))
        monkeypatch.setattr(spawn, "prestart", lambda: seen.append("zygote"))
        monkeypatch.setattr(grader.cli.commands, "main", lambda prog_name: seen.append(f"cli {prog_name}"))
        monkeypatch.setattr(launch.gc, "freeze", lambda: seen.append("freeze"))
        monkeypatch.setattr(launch, "_leave", lambda code: seen.append(f"end {code}"))
        monkeypatch.setattr(sys, "argv", ["mha", *argv])
        for variable in THREAD_VARIABLES:  # restored (unset or as they were) after the test
            monkeypatch.setenv(variable, "")
            monkeypatch.delenv(variable)
        try:
            launch.main()
            collecting = gc.isenabled()
        finally:
            gc.enable()
        assert seen == calls
        assert collecting == (calls == ["cli mha"])  # (a one-submission command's process ends: not re-enabled)
        assert {v: os.environ.get(v) for v in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "1")

    def test_python_m_grader_version(self):
        """`python -m grader --version` runs the launcher: exit 0 and `mha, version ...`."""
        done = subprocess.run([sys.executable, "-m", "grader", "--version"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("mha, version ")

    def test_grade_gives_full_marks_with_one_blas_thread(self):
        """`mha grade solutions --format json --problem softmax` through the launcher: exit 0, full
        marks, and the grader ran with OPENBLAS/OMP/MKL_NUM_THREADS=1 when the environment had none."""
        done, end = run_launch(["grade", str(SOLUTIONS), "--format", "json", "--problem", "softmax"])
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert [p["id"] for p in report["problems"]] == ["softmax"]
        assert report["score"] == report["max_score"] == 10
        assert end["threads"] == dict.fromkeys(THREAD_VARIABLES, "1")

    def test_thread_counts_from_the_environment_are_kept(self):
        """OPENBLAS_NUM_THREADS=3 in the environment stays 3; the variables not set become 1."""
        done, end = run_launch(["--version"], OPENBLAS_NUM_THREADS="3")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("mha, version ")
        assert end["threads"] == {"OPENBLAS_NUM_THREADS": "3", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        assert end["ended"] == "exit handlers"  # not a one-submission command: it exits as usual


class TestQuizOnly:
    """`chosen.quiz_only`: a grade runs no student code when no chosen ID names a problem file."""

    def test_every_quiz_item_is_quiz_only_and_every_problem_is_not(self, everything_on):
        """Told from the files alone, for every ID of the course (its optional problems switched
        on): each problem is problems/<id>.yaml (as the loader requires), no quiz item is."""
        from grader.course.loader import load_course
        full_course = load_course(everything_on)
        root = full_course.root
        for problem in full_course.problems:
            assert problem.path == root / "problems" / f"{problem.id}.yaml"
            assert not chosen.quiz_only(root, [problem.id])
        items = [item.id for item in full_course.quiz.items]
        assert items and all(chosen.quiz_only(root, [item]) for item in items)
        assert chosen.quiz_only(str(root), items)
        assert not chosen.quiz_only(root, [*items, full_course.problems[0].id])  # one problem among them

    @pytest.mark.parametrize("ids", [[], ["../problems/softmax"], ["x/y"], [".hidden"], [""], ["a\0b"]])
    def test_anything_unclear_runs_as_any_grade(self, ids):
        """No IDs (everything is graded), or an ID that is not a plain name: False."""
        assert not chosen.quiz_only(EXERCISES, ids)

    def test_no_course_there_runs_as_any_grade(self, tmp_path):
        """A folder without assignment.yaml, or none at all: False (the grade says what is wrong)."""
        assert not chosen.quiz_only(tmp_path, ["anything"])
        assert not chosen.quiz_only(None, ["anything"])

    def test_the_packaged_course_is_the_one_paths_finds(self):
        from grader.paths import packaged_course
        assert chosen.packaged_course() == str(packaged_course())

    @pytest.mark.parametrize("argv,values", [
        (["grade", "x", "--problem", "a", "--problem=b"], ["a", "b"]),
        (["grade", "x", "--problem"], []),
        (["grade", "--", "--problem", "a"], []),
        (["grade", "--problems", "a"], []),
    ])
    def test_option_values(self, argv, values):
        assert chosen.option_values(argv, chosen.PROBLEM_OPTION) == values

    def test_a_quiz_only_grade_starts_no_student_process(self, cli, core_course, monkeypatch):
        """In the grade command: quiz items only, no zygote asked for and no session; the item is
        graded as ever. With a problem among the IDs, both are."""
        from grader.grading import grade
        from grader.sandbox import spawn
        started, sessions, real = [], [], grade.WatchedSession
        monkeypatch.setattr(spawn, "prestart", lambda: started.append("zygote"))
        monkeypatch.setattr(grade, "WatchedSession", lambda *a, **k: sessions.append(1) or real(*a, **k))
        item = next(i.id for i in core_course.quiz.items if not i.manual)
        result = cli("grade", str(SOLUTIONS), "--format", "json", "--problem", item)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert [p["id"] for p in report["problems"]] == [item]
        assert report["score"] == report["max_score"] > 0
        assert (started, sessions) == ([], [])
        result = cli("grade", str(SOLUTIONS), "--format", "json", "--problem", item, "--problem", "softmax")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["score"] == json.loads(result.stdout)["max_score"]
        assert (started, sessions) == (["zygote"], [1])


class TestExit:
    """grade and check end at once (os._exit) once done, with their status, output and clean-up."""

    @pytest.mark.parametrize("command", ["grade", "check"])
    def test_exit_status_output_and_clean_up_are_kept(self, command, tmp_path):
        """A failing check or grade exits 1 with its whole report on stdout; it ended through
        os._exit, with no exit handler skipped but the fork server's, which it ran itself (the
        zygote stopped, the folder it was lent deleted: nothing left in $TMPDIR)."""
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        argv = ["check", "--path", str(EXERCISES / "attention.py")] if command == "check" else \
            ["grade", str(EXERCISES), "--format", "json", "--fail-under", "50"]
        done, end = run_launch(argv, TMPDIR=str(tmp))
        assert done.returncode == 1, done.stderr
        if command == "check":
            assert "not implemented yet" in done.stdout and done.stdout.rstrip().splitlines()[-1].startswith("Score:")
        else:
            assert json.loads(done.stdout)["score"] < 50
        assert end == {"threads": dict.fromkeys(THREAD_VARIABLES, "1"), "ended": "os._exit",
                       "exit handlers": ["grader.sandbox.spawn._stop"]}
        assert os.listdir(tmp) == []

    @pytest.mark.parametrize("command", ["grade", "check"])
    def test_a_mistyped_id_after_the_early_start_leaves_nothing(self, command, tmp_path):
        """The student process starts while the cases are read (grade.early_session): a problem
        id found unknown then is still exit 2 with "did you mean", and the session started for
        nothing is closed: no folder of it is left in $TMPDIR."""
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        argv = [command, str(SOLUTIONS), "--problem", "sofmax"] if command == "grade" else \
            [command, "sofmax", "--path", str(SOLUTIONS / "attention.py")]
        done, _ = run_launch(argv, TMPDIR=str(tmp))
        assert done.returncode == 2, done.stderr
        assert "unknown problem 'sofmax': did you mean 'softmax'?" in done.stderr
        assert os.listdir(tmp) == []

    def test_a_reader_that_went_away_is_a_quiet_exit(self):
        """stdout closed before grade writes its report: exit 0, nothing on stderr."""
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run([sys.executable, "-m", "grader", "grade", str(SOLUTIONS), "--problem", "softmax"],
                                  cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
                                  env={**os.environ, "MHA_COURSE": str(EXERCISES)})
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (0, "")

    @pytest.mark.parametrize("code,status", [("no such thing", 1), (None, 0), (3, 3), (True, 1), (258, 2)])
    def test_the_commands_exit_is_the_process_status(self, code, status, monkeypatch, capsys):
        """launch's end of a one-submission command: SystemExit's code becomes the status Python
        would give it (a message printed to stderr, status 1), after the fork server is stopped."""
        calls = []
        monkeypatch.setattr(launch.gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr("grader.sandbox.spawn.stop_fork_server", lambda reap: calls.append(f"stop reap={reap}"))

        class Ended(Exception):
            pass

        def exit_now(number):
            calls.append(number)
            raise Ended

        monkeypatch.setattr(launch.os, "_exit", exit_now)
        with pytest.raises(Ended):
            launch._main(lambda prog_name: sys.exit(code), one_submission=True)
        assert calls == ["freeze", "stop reap=False", status]
        assert capsys.readouterr().err == ("no such thing\n" if code == "no such thing" else "")

    @pytest.mark.parametrize("code", ["no such thing", None, 3])
    def test_the_commands_exit_goes_through(self, code, monkeypatch):
        """A one-submission command's SystemExit reaches Python unchanged (its code or message),
        after what the command made was frozen."""
        calls = []
        monkeypatch.setattr(launch.gc, "freeze", lambda: calls.append("freeze"))

        def cli(prog_name):
            calls.append(prog_name)
            sys.exit(code)
        with pytest.raises(SystemExit) as exit_info:
            launch._run(cli, one_submission=True)
        assert exit_info.value.code == code
        assert calls == ["mha", "freeze"]
