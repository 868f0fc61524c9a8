"""What every `mha` command line shares: help options, printing an error once, the error boundary,
and printing `mha check`'s report."""
from __future__ import annotations

import functools
import os
import sys
from typing import NoReturn

import click

from ..errors import ExitCode, GraderError

CONTEXT = {"help_option_names": ["-h", "--help"]}
DEBUG_ENV = "MHA_DEBUG"  # MHA_DEBUG=1: as --traceback


def debugging() -> bool:
    """Whether the whole traceback of a grader failure goes to stderr: `mha --traceback` or MHA_DEBUG=1."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().params.get("traceback"):
        return True
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def traceback_text(exc: BaseException) -> str:
    """The whole traceback of `exc` (its causes included), as Python prints it."""
    import traceback  # here: only a failure pays for it
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def traceback_option(command):
    """--traceback: print the whole traceback of a grader failure on stderr (as MHA_DEBUG=1)."""
    return click.option("--traceback", is_flag=True, default=False, is_eager=True,
                        help=f"On a grader failure, print the whole traceback on stderr (also: {DEBUG_ENV}=1).")(command)


def closed_stdout() -> NoReturn:
    """Exit 0 without a word: whoever read stdout has stopped reading. stdout now points at the null
    device, so Python's own flush at exit cannot fail on the closed pipe again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test runner's buffer): nothing to redirect
        pass
    sys.exit(int(ExitCode.OK))


def fail(exc: GraderError) -> NoReturn:
    """Print a GraderError once, on stderr, and exit with its code; with --traceback or MHA_DEBUG=1,
    the traceback of the grader failure behind an internal error first."""
    if exc.exit_code is ExitCode.INTERNAL and exc.__cause__ is not None and debugging():
        click.echo(traceback_text(exc.__cause__).rstrip("\n"), err=True)
    click.echo(str(exc), err=True)
    sys.exit(int(exc.exit_code))


def echo_report(result, fmt: str = "text") -> None:
    """`mha check`'s report on stdout: text for a terminal (colour kept only when the style has
    it), or an HTML fragment with pictures of the weights (the notebook's check cells)."""
    from ..reports.terminal import Style
    if fmt == "html":
        from ..reports import html
        click.echo(html.fragment(result), nl=False)
        return
    from ..reports import text
    style = Style.detect(sys.stdout)
    click.echo(text.render(result, style), nl=False, color=style.color)


def limit_options(command):
    """The sandbox limits as options (the same on `check` and `grade`), passed on as `limits=Limits(...)`."""
    from ..sandbox.limits import Limits
    default = Limits()

    @functools.wraps(command)
    def with_limits(*args, timeout: float | None, total_timeout: float, import_timeout: float, memory_mb: int,
                    **kwargs):
        limits = Limits(problem_seconds=timeout or default.problem_seconds, submission_seconds=total_timeout,
                        load_seconds=import_timeout, memory_bytes=memory_mb << 20)
        return command(*args, limits=limits, **kwargs)

    options = (
        click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
                     help=f"Seconds allowed per problem, all its cases together [default: {default.problem_seconds:g}; "
                          "a problem file's own `timeout` wins]."),
        click.option("--total-timeout", type=click.FloatRange(min=1), default=default.submission_seconds,
                     show_default=True, help="Seconds allowed for the whole submission, imports included."),
        click.option("--import-timeout", type=click.FloatRange(min=0.5), default=default.load_seconds,
                     show_default=True, help="Seconds allowed to import attention.py."),
        click.option("--memory-mb", type=click.IntRange(min=256), default=default.memory_bytes >> 20,
                     show_default=True, help="Memory (address space) allowed to each student process, in MiB."),
    )
    for option in reversed(options):
        with_limits = option(with_limits)
    return with_limits


def hoist(args: list[str], options: frozenset[str]) -> list[str]:
    """`args` with each of the group's `options` (taking one value) that follows the sub-command
    moved before it: `mha grade SUB --course DIR` reads as `mha --course DIR grade SUB`.
    Nothing after `--` is touched."""
    front: list[str] = []
    rest: list[str] = []
    i, seen_command = 0, False
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        name = arg.split("=", 1)[0]
        if name in options:
            taken = [arg] if "=" in arg else args[i:i + 2]
            (front if seen_command else rest).extend(taken)
            i += len(taken)
            continue
        if not arg.startswith("-"):
            seen_command = True
        rest.append(arg)
        i += 1
    return front + rest


class Aliased(click.Option):
    """An option whose first name is its only documented one: the others are older names, still
    accepted and never shown in help."""

    def get_help_record(self, ctx: click.Context):
        shown, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


class Group(click.Group):
    """Maps any error that escapes a command to its exit code: never a bare traceback.

    `lazy`: commands imported only when used (name -> module of this package, attribute), so
    `mha grade` does not load the code of `mha export` and the like."""

    lazy: dict[str, tuple[str, str]] = {}
    aliases = {"variant": "numbers", "compile": "prepare"}  # older names of commands: still accepted, never listed

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str):
        name = self.aliases.get(name, name)
        if name in self.lazy and name not in self.commands:
            import importlib
            module, attribute = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module, __package__), attribute), name)
        return super().get_command(ctx, name)

    global_options: frozenset[str] = frozenset()  # options of the group that may also follow the sub-command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None and self.global_options:
            args = hoist(args, self.global_options)
        return super().parse_args(ctx, args)

    def make_context(self, *args, **kwargs) -> click.Context:
        try:  # `mha --help` and `mha --version` print here, before any command runs
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            closed_stdout()

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GraderError as exc:
            fail(exc)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader went away (`mha list | head -2`): a quiet exit, as for any Unix tool
            closed_stdout()
        except Exception as exc:  # the grader's own bug
            import traceback  # here: only a failure pays for it
            if debugging():
                click.echo(traceback_text(exc).rstrip("\n"), err=True)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            click.echo(f"internal error: {detail}", err=True)
            sys.exit(int(ExitCode.INTERNAL))
