"""What every `mha` command line shares: help options, printing an error once, the error boundary,
and printing `mha check`'s report."""
from __future__ import annotations

import sys

import click

from ..errors import ExitCode, GraderError

CONTEXT = {"help_option_names": ["-h", "--help"]}


def fail(exc: GraderError) -> None:
    """Print a GraderError once, on stderr, and exit with its code."""
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


class Group(click.Group):
    """Maps any error that escapes a command to its exit code: never a bare traceback.

    `lazy`: commands imported only when used (name -> module of this package, attribute), so
    `mha grade` does not load the code of `mha export` and the like."""

    lazy: dict[str, tuple[str, str]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str):
        if name in self.lazy and name not in self.commands:
            import importlib
            module, attribute = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module, __package__), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GraderError as exc:
            fail(exc)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # the grader's own bug
            import traceback  # here: it costs a cold start 6 ms
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            click.echo(f"internal error: {detail}", err=True)
            sys.exit(int(ExitCode.INTERNAL))
