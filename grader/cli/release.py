"""`mha release`: write the student and autograder bundles."""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import GraderError
from .commands import CONTEXT, Ctx, fail


@click.command(context_settings=CONTEXT)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write student/ and autograder/ into (they must not exist yet): anywhere but the course "
                   "folder itself or a folder it reads from, such as problems/ (dist/ inside it is fine).")
@click.option("--roster", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Each student's id (their email, or sid with 'seed_key: sid' in course.yaml), one per "
                   "line, or a CSV whose header names that column: a seed cases file per student. Required "
                   "with a course secret.")
@click.pass_obj
def release(obj: Ctx, out: Path, roster: Path | None) -> None:
    """Write the student bundle (no reference, solutions or hidden cases) and the autograder bundle.

    With a course secret each student has their own numbers, so --roster is required: the
    student bundle then holds every listed student's numbers (`mha check --student ID`).

    \b
    Example:
      MHA_COURSE_SECRET=... mha release --out release --roster roster.csv
    """
    from ..classroom.bundles import read_roster, release as run_release
    try:
        course = obj.course()
        settings = obj.settings()
        students = read_roster(roster, settings.seed_key) if roster else []
        written = run_release(course, out, students, settings.secret, settings.seed_key)
    except GraderError as exc:
        fail(exc)
    except OSError as exc:
        from ..outputs import one_line
        fail(GraderError(f"cannot write the bundles: {one_line(exc)}"))
    click.echo(f"student bundle:    {written['student']} ({len(written['seed_cases'])} seed cases file(s))")
    click.echo(f"autograder bundle: {written['autograder']}")
