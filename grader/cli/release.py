"""`mha release`: write the student and autograder bundles."""
from __future__ import annotations

import os
from pathlib import Path

import click

from .commands import CONTEXT, Ctx, fail
from ..errors import GraderError


@click.command(context_settings=CONTEXT)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write student/ and autograder/ into (they must not exist yet).")
@click.option("--roster", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Student ids, one per line (or the first CSV column): a fixtures file per student.")
@click.pass_obj
def release(obj: Ctx, out: Path, roster: Path | None) -> None:
    """Write the student bundle (no reference, solutions or hidden cases) and the autograder bundle.

    \b
    Example:
      MHA_COURSE_SECRET=... mha release --out release --roster roster.csv
    """
    from ..classroom.release import read_roster, release as run_release
    from ..assignment.variants import course_secret
    try:
        assignment = obj.assignment()
        students = read_roster(roster) if roster else []
        written = run_release(assignment, out, students, course_secret(assignment.root, os.environ))
    except GraderError as exc:
        fail(exc)
    except OSError as exc:
        fail(GraderError(f"cannot write the bundles: {exc}"))
    click.echo(f"student bundle:    {written['student']} ({len(written['fixtures'])} fixture file(s))")
    click.echo(f"autograder bundle: {written['autograder']}")
