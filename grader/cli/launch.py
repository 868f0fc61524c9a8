"""The `mha` console script: what a grading command needs is started before the CLI's imports.

A cold `mha grade` waits on two things: this process loading numpy, click, the problems and
the reference answers, and the zygote (`spawn.py`) loading Python and numpy for the student
processes. The zygote is the longer of the two, so it starts here, first thing, before
`click` and the rest of the grader are imported; both then load side by side on two cores.

Also first thing: the grader's own numpy uses one BLAS thread (unless the environment says
otherwise). Its matrices are tiny, and a BLAS thread pool only competes with the student
processes for the cores (and costs its start-up when numpy loads). And for those commands
(one submission, well under a second) the cyclic garbage collector is off: its passes only walk
the objects the imports made (about 8 ms of a cold grade), and grading one submission makes
little cyclic garbage (answers are decoded into plain values); and once the command is done,
the process ends without the interpreter's teardown (see `_leave`).
"""
from __future__ import annotations

import atexit
import gc
import os
import sys

__all__ = ["main", "student", "command_of"]

EARLY_START = frozenset({"check", "grade"})  # commands that run student code at once
OPTIONS_WITH_VALUE = frozenset({"--exercises"})  # the group's options that take a value


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


def _start(argv: list[str]) -> bool:
    """Set up the process for the command in `argv`; whether it is a one-submission command."""
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    if command_of(argv) not in EARLY_START:
        return False
    gc.disable()  # one submission, a fraction of a second: collections would only walk what the imports made
    from ..sandbox.spawn import prestart
    prestart()
    return True


def _run(cli, one_submission: bool) -> None:
    if not one_submission:
        cli(prog_name="mha")
        return
    try:
        cli(prog_name="mha")
        code = None
    except SystemExit as exc:
        code = exc.code
    _leave(code)


def _leave(code) -> None:
    """End a one-submission command at once, with exit status `code` (as SystemExit takes it).

    The exit handlers run (the fork server stops, the folder it was lent is deleted) and stdout
    and stderr are flushed, as at any exit; what is skipped is the interpreter's own teardown,
    which frees every module and object one by one: 15 to 20 ms of a cold grade that nobody
    waits for. Where exit handlers cannot be run early, the process exits as usual."""
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)  # CPython's own, as used at exit
    if run_exit_handlers is None:
        sys.exit(code)
    if code is None or isinstance(code, int):
        status = code or 0
    else:  # as Python does with sys.exit("message")
        print(code, file=sys.stderr)
        status = 1
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: a quiet exit (see base.closed_stdout)
            pass
        except OSError:  # as Python's own exit: the output was not all written
            status = status or 120
        except (ValueError, AttributeError):  # closed, or no stream at all
            pass
    os._exit(status)


def main() -> None:
    """`mha`: see grader/cli/commands.py for the commands."""
    one_submission = _start(sys.argv[1:])
    from .commands import main as cli
    _run(cli, one_submission)


def student() -> None:
    """`mha` in the student bundle (grader/cli/student.py): the same early start for `mha check`."""
    one_submission = _start(sys.argv[1:])
    from .student import main as cli
    _run(cli, one_submission)
