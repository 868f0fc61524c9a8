"""The commands a student runs, `mha check`, `show`, `init`, `list` and `train`, and the student bundle's `mha`.

The installed `mha` (commands.py) and the student bundle's `mha` (`bundle` below) are the same
commands over different sources of cases (source.py): a course folder, or the seed cases the
bundle was released with. The command reads its source from the click context object, so both
print the same output for the same submission.
"""
from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import click

from .. import reports
from ..distribution import DISTRIBUTION
from ..errors import ExitCode, GraderError
from .base import CONTEXT, Group, echo_report, fail, limit_options, traceback_option
from .source import STUDENT_ENV, BundleSource, Listing, Source, missing_submission

student_option = click.option(
    "--student", default=None, metavar="ID", envvar=STUDENT_ENV,
    help="Use this student's numbers (their seed): their email, or their sid when the course keys seeds by "
         "sid (seed_key in course.yaml). In a course folder it needs the course secret (course.yaml or "
         f"MHA_COURSE_SECRET) [env: {STUDENT_ENV}].")


@click.command(context_settings=CONTEXT)
@click.argument("problems", nargs=-1)
@click.option("--path", "path", type=click.Path(path_type=Path), default=None,
              help="Your attention.py (default: attention.py in the working folder; in a course folder, the one "
                   "beside assignment.yaml).")
@click.option("--format", "fmt", type=click.Choice(reports.names(check=True)), default="text", show_default=True,
              help=reports.help_text(check=True))
@limit_options
@student_option
@click.pass_obj
def check(source: Source, problems: tuple[str, ...], path: Path | None, fmt: str, limits, student: str | None) -> None:
    """Check your work on the public cases, with hints; exit 1 if any case fails.

    Quiz answers are read from answers.yaml beside your attention.py: public items are
    graded with feedback, hidden items only have the form of their answer checked.

    \b
    Example:
      mha check                        # every problem and quiz item
      mha check softmax merge_heads    # just these
    """
    from ..sandbox.spawn import prestart
    prestart()  # student processes' Python and numpy load while this one loads the cases
    from ..grading.grade import early_session, grade_seed_cases, known_ids
    from ..grading.submission import read_submission
    try:
        chosen = path or source.default_submission()
        if path is None and not chosen.exists():
            raise missing_submission(chosen)
        submission = read_submission(chosen)
        private = source.private()
        with early_session(submission, limits, private) as session:  # it starts while the cases are read
            seed_cases = source.cases(student)
            known_ids(seed_cases, problems)
            result = grade_seed_cases(seed_cases, submission, include_hidden=False, problem_ids=problems,
                                      limits=limits, private=private, session=session)
    except GraderError as exc:
        fail(exc)
    echo_report(result, fmt)
    sys.exit(int(ExitCode.OK if result.passed else ExitCode.FAILED))


@click.command(context_settings=CONTEXT)
@click.argument("problem")
@student_option
@click.pass_obj
def show(source: Source, problem: str, student: str | None) -> None:
    """Print a problem's prompt, signature and public cases, or a quiz item with its choices.

    \b
    Example:
      mha show attention_reading
      mha show count_routing_distributions --student s1234   # with that student's numbers
    """
    try:
        text = source.text(problem, student)
    except GraderError as exc:
        fail(exc)
    click.echo(text, nl=False)


@click.command(context_settings=CONTEXT)
@click.argument("folder", required=False, default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace attention.py and answers.yaml when FOLDER already has them.")
@click.pass_obj
def init(source: Source, folder: Path, force: bool) -> None:
    """Write a student's starter files into FOLDER (default: the current one): attention.py with
    a stub per problem and a blank answers.yaml, made from the course, and .mha, which lets
    `pytest` there run the checks of `mha check` (docs/students.md).

    \b
    Example:
      mha init my-work && cd my-work && mha check
    """
    from ..paths import STUDENT_MARKER, STUDENT_MARKER_TEXT
    from ..starter import write_starters
    try:
        written = write_starters({**source.starter_files(), STUDENT_MARKER: STUDENT_MARKER_TEXT}, folder, force)
    except GraderError as exc:
        fail(exc)
    there = "" if folder.resolve() == Path.cwd().resolve() else f"cd {folder}, "
    click.echo(f"wrote {', '.join(str(p) for p in written)}; next: {there}edit them, then `mha check`")


def _row(prefix: str, title: str, width: int) -> list[str]:
    """`prefix` then `title`, the title wrapped in the room left so no line is wider than `width`;
    with too little room, the title goes on lines of its own below."""
    room = width - len(prefix)
    if room >= 20:
        lines = textwrap.wrap(title, room, break_on_hyphens=False) or [""]
        return [prefix + lines[0], *(" " * len(prefix) + line for line in lines[1:])]
    return [prefix.rstrip(), *textwrap.wrap(title, max(width - 6, 20), initial_indent=" " * 6,
                                            subsequent_indent=" " * 6)]


def listing_lines(listing: Listing, width: int) -> list[str]:
    """`mha list`'s lines: a problem or quiz item a row, none wider than `width` columns."""
    lines = textwrap.wrap(listing.title, width) or [""]
    idw = max([len(p.id) for p in listing.problems] + [len(i.id) for i in listing.items], default=4)
    cases = [f"{p.public} public / {p.hidden} hidden" if p.hidden is not None else f"{p.public} public"
             for p in listing.problems]
    casew = max((len(c) for c in cases), default=0)
    for p, count in zip(listing.problems, cases):
        lines += _row(f"  {p.id:<{idw}}  {p.points:>4g} pts  {count:<{casew}}  ", p.title, width)
    if listing.items:
        lines += textwrap.wrap(f"{listing.quiz_title or 'Quiz'} (answers in answers.yaml)", width)
    for i in listing.items:
        lines += _row(f"  {i.id:<{idw}}  {i.points:>4g} pts  {i.visibility:<6} {i.kind:<16}  ", i.title, width)
    lines.append(f"  total {listing.total:g} points")
    if listing.optional:
        lines += textwrap.wrap(f"optional, switched off in assignment.yaml ('optional:'; docs/authoring.md): "
                               f"{', '.join(listing.optional)}", width, break_on_hyphens=False)
    return lines


@click.command("list", context_settings=CONTEXT)
@click.pass_obj
def list_(source: Source) -> None:
    """List the problems and quiz items with their points and case counts, fitted to the terminal's
    width (stderr: which course, and why).

    \b
    Example:
      mha list
    """
    try:
        listing = source.listing()
    except GraderError as exc:
        fail(exc)
    if (where := source.where()) is not None:
        click.echo(where, err=True)
    width = shutil.get_terminal_size((100, 24)).columns  # COLUMNS first, then the terminal, else 100
    click.echo("\n".join(listing_lines(listing, max(width, 40))))


def _every(ctx: click.Context, param: click.Parameter, value: int) -> int:
    from ..training import SETUP
    if value % SETUP.every:
        raise click.BadParameter(f"must be a multiple of {SETUP.every} (got {value})", ctx, param)
    return value


@click.command(context_settings=CONTEXT)
@click.argument("seed", type=click.IntRange(min=0))
@click.option("--every", type=click.IntRange(min=100), default=100, show_default=True, callback=_every,
              help="Print the head scores every this many steps (a multiple of 100).")
def train(seed: int, every: int) -> None:
    """Train the course's two-head model from SEED (numpy, a few seconds), printing each head's
    previous-token and first-token scores as it learns, then which head took which role.

    Every draw comes from SEED, so the same seed gives the same run on any machine: the quiz
    items that name your seed are graded on the course's own run of it.

    \b
    Example:
      mha train 17                 # the seed your quiz item names
      mha train 17 --every 200     # fewer lines
    """
    from ..training import run_and_print
    run_and_print(seed, every)


STUDENT_COMMANDS = (check, show, init, list_, train)


@click.group(cls=Group, context_settings=CONTEXT)
@click.version_option(package_name=DISTRIBUTION)
@traceback_option
@click.pass_context
def bundle(ctx: click.Context, traceback: bool) -> None:
    """Multi-head attention exercises: check your work with instant feedback.

    \b
    Example:
      mha init                  # your starter files: attention.py and answers.yaml
      mha check                 # every problem, public cases, with hints
      mha train 17              # watch a model's heads take roles as it trains
    """
    ctx.obj = BundleSource()


for _command in STUDENT_COMMANDS:
    bundle.add_command(_command)
