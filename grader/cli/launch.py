"""The `mha` console script: what a grading command needs is started before the CLI's imports.

A cold `mha grade` waits on two things: this process loading numpy, click, the problems and
the reference answers, and the zygote (`spawn.py`) loading Python and numpy for the student
processes. The zygote is the longer of the two, so it starts here, first thing, before
`click` and the rest of the grader are imported; both then load side by side on two cores.

Which command runs is read off argv here, before click is imported (`command_of`): starting the
zygote from a click callback would wait for click and the CLI to load first.
tests/test_launch.py checks OPTIONS_WITH_VALUE against click's own group.

A `grade` of quiz items only runs no student code (`chosen.quiz_only`: every `--problem` ID names
no problem file of the course), so it starts no zygote: GitHub Classroom's workflow grades each
quiz item in a step of its own, and the zygote's Python and numpy were about 0.17 s of CPU of
such a step's 0.45. Told here when the command line names the course; otherwise the grade
command tells it once it knows the course, and stops the zygote started here before any student
process is asked of it.

Also first thing: the grader's own numpy uses one BLAS thread (unless the environment says
otherwise). Its matrices are tiny, and a BLAS thread pool only competes with the student
processes for the cores (and costs its start-up when numpy loads). And for those commands
(one submission, well under a second) the cyclic garbage collector is off: its passes would only
walk the objects the imports made, and grading one submission makes little cyclic garbage
(answers are decoded into plain values). When the command is done, what it made is frozen
(`gc.freeze`). Then the process ends at once (`os._exit`), once its fork server is stopped and
its output flushed: the interpreter's teardown (freeing every module and object one by one)
took about 6 ms, a fifteenth of numpy's import, for nothing any file or reader sees. Nothing of
the package registers an exit handler but the fork server's (tests/test_launch.py checks it),
and the commands' SystemExit becomes the exit status Python would give it.
"""
from __future__ import annotations

import gc
import os
import sys

from .chosen import PROBLEM_OPTION, option_values, packaged_course, quiz_only

__all__ = ["main", "student", "command_of"]

EARLY_START = frozenset({"check", "grade"})  # commands that run student code at once
OPTIONS_WITH_VALUE = frozenset({"--course", "--exercises", "--assignment"})  # with their older names


def command_of(argv: list[str]) -> str | None:
    """The sub-command named in `argv` (the arguments after the program name), if any."""
    args = iter(argv)
    for arg in args:
        if arg == "--":
            return next(args, None)
        if arg in OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _named_quiz_only(argv: list[str]) -> bool:
    """`grade` of quiz items only (`quiz_only`) of a course named once on the command line."""
    courses = option_values(argv, OPTIONS_WITH_VALUE)
    if command_of(argv) != "grade" or len(courses) != 1:
        return False
    course = packaged_course() if courses[0] == "packaged" else courses[0]
    return quiz_only(course, option_values(argv, PROBLEM_OPTION))


def _start(argv: list[str]) -> bool:
    """Set up the process for the command in `argv`; whether it is a one-submission command."""
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    command = command_of(argv)
    if command not in EARLY_START:
        return False
    if not _named_quiz_only(argv):
        from ..sandbox import zygote_start
        zygote_start.start()  # first of all: its Python and numpy load while this process imports the rest
    gc.disable()  # one submission, a fraction of a second: collections would only walk what the imports made
    if command == "check" or not option_values(argv, PROBLEM_OPTION):
        # (a grade of chosen IDs takes the zygote over itself, once it knows whether they need one)
        from ..sandbox.spawn import prestart
        prestart()
    # numpy now, near the bottom of the stack: imported from deep inside the grader's imports, its
    # import (the typing aliases it subscripts) went back and forth across a 16 KB chunk of
    # CPython 3.11's frame stack about 1600 times, an mmap and a munmap each (about 6 ms)
    import numpy  # noqa: F401
    return True


def _run(cli, one_submission: bool) -> None:
    try:
        cli(prog_name="mha")
    finally:
        if one_submission:  # all it made lives until the exit: the collection at exit need not walk it
            gc.freeze()


def exit_status(code: object) -> int:
    """The exit status Python gives `sys.exit(code)`: 0 for None, an int as it is, anything else
    printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except (OSError, ValueError):
        pass
    return 1


def _leave(code: object) -> None:
    """End a one-submission command now: the fork server stopped (its lent folder deleted), the
    output flushed, then os._exit, without the interpreter's teardown."""
    status = exit_status(code)
    from ..sandbox.spawn import stop_fork_server
    stop_fork_server(reap=False)  # killed; whoever adopts it reaps it (its namespaces' teardown is not waited for)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away: the command said so already, or had nothing to say
            pass
    os._exit(status)


def _main(cli, one_submission: bool) -> None:
    if not one_submission:
        _run(cli, False)
        return
    try:
        _run(cli, True)
    except SystemExit as exc:
        _leave(exc.code)
    _leave(None)


def main() -> None:
    """`mha`: see grader/cli/commands.py for the commands."""
    one_submission = _start(sys.argv[1:])
    from .commands import main as cli
    _main(cli, one_submission)


def student() -> None:
    """`mha` in the student bundle: the same student commands over the bundle's seed cases
    (grader/cli/student_commands.py), with the same early start for `mha check`."""
    one_submission = _start(sys.argv[1:])
    from .student_commands import bundle as cli
    _main(cli, one_submission)
