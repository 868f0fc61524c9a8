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
little cyclic garbage (answers are decoded into plain values).
"""
from __future__ import annotations

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


def _start(argv: list[str]) -> None:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    if command_of(argv) in EARLY_START:
        gc.disable()  # one submission, a fraction of a second: collections would only walk what the imports made
        from ..sandbox.spawn import prestart
        prestart()


def main() -> None:
    """`mha`: see grader/cli/commands.py for the commands."""
    _start(sys.argv[1:])
    from .commands import main as cli
    cli(prog_name="mha")


def student() -> None:
    """`mha` in the student bundle (grader/cli/student.py): the same early start for `mha check`."""
    _start(sys.argv[1:])
    from .student import main as cli
    cli(prog_name="mha")
