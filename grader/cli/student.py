"""`mha` in the student bundle: check, show and list from precomputed public fixtures.

The bundle has no reference, no wrong variants, no hidden cases and no quiz answer key: every
expected answer was computed by the instructor's `mha release` and stored in fixtures/*.json.
Student code still runs in the same sandbox as in the autograder.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import CONTEXT, Group, echo_report, fail
from ..errors import ExitCode, GraderError, SubmissionError
from ..grading.grade import known_ids
BUNDLE = Path(__file__).resolve().parents[2]  # grader/cli/student.py -> the bundle's folder


def _bundle_root() -> Path:
    """The bundle folder: the current folder or one above it holding fixtures/, else the installed one."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "fixtures" / "default.json").is_file():
            return folder
    return BUNDLE


def load(student: str | None):
    from ..grading.fixtures import Fixtures
    from ..assignment.variants import student_token
    root = _bundle_root()
    name = "default" if student is None else student_token(student)
    path = root / "fixtures" / f"{name}.json"
    if not path.is_file():
        raise SubmissionError(f"no variant for student {student!r} in this bundle ({path.name} is missing); "
                              "ask your instructor")
    return root, Fixtures.load(path)


_fail = fail


@click.group(cls=Group, context_settings=CONTEXT)
@click.version_option(package_name="mha-exercises-student")
def main() -> None:
    """Multi-head attention exercises: check your work with instant feedback.

    \b
    Example:
      mha check                 # every problem, public cases, with hints
      mha show softmax          # read one problem
    """


student_option = click.option("--student", default=None, metavar="ID",
                              help="Your student id, if your instructor gave you personal numbers.")


@main.command(context_settings=CONTEXT)
@click.argument("problems", nargs=-1)
@click.option("--path", type=click.Path(path_type=Path), default=None,
              help="Your attention.py (default: attention.py in this bundle).")
@click.option("--format", "fmt", type=click.Choice(["text", "html"]), default="text", show_default=True,
              help="text for a terminal (colour unless NO_COLOR; FORCE_COLOR for a pipe), or an HTML "
                   "fragment with pictures of the attention weights (what a notebook's check cell shows).")
@student_option
def check(problems: tuple[str, ...], path: Path | None, fmt: str, student: str | None) -> None:
    """Check your work on the public cases; exit 1 if any case fails.

    \b
    Example:
      mha check softmax merge_heads
    """
    from ..grading.grade import grade_fixtures
    from ..sandbox.isolation import private_paths
    from ..grading.submission import read_submission
    try:
        root, fixtures = load(student)
        known_ids(fixtures, problems)
        submission = read_submission(path or root / "attention.py")
        result = grade_fixtures(fixtures, submission, include_hidden=False, problem_ids=problems,
                                private=private_paths(root))
    except GraderError as exc:
        _fail(exc)
    echo_report(result, fmt)
    sys.exit(int(ExitCode.OK if result.passed else ExitCode.FAILED))


@main.command(context_settings=CONTEXT)
@click.argument("problem")
@student_option
def show(problem: str, student: str | None) -> None:
    """Print a problem's prompt (with your numbers) or a quiz item.

    \b
    Example:
      mha show count_routing_distributions
    """
    try:
        _, fixtures = load(student)
        known_ids(fixtures, (problem,))
    except GraderError as exc:
        _fail(exc)
    if problem in fixtures.texts:
        click.echo(fixtures.texts[problem], nl=False)
        return
    v = next(v for v in fixtures.quiz if v.item.id == problem)
    lines = [f"{v.item.title} ({v.item.points:g} points)", "", v.prompt.strip(), ""]
    lines += [f"  {c.letter}) {c.text}" for c in v.choices]
    click.echo("\n".join(lines).rstrip() + "\n")


@main.command("list", context_settings=CONTEXT)
@student_option
def list_(student: str | None) -> None:
    """List the problems and quiz items with their points.

    \b
    Example:
      mha list
    """
    try:
        _, fixtures = load(student)
    except GraderError as exc:
        _fail(exc)
    click.echo(fixtures.title)
    for p, prepared in fixtures.problems:
        click.echo(f"  {p.id:<30} {p.points:>4g} pts  {len(prepared)} public cases  {p.title}")
    for v in fixtures.quiz:
        click.echo(f"  {v.item.id:<30} {v.item.points:>4g} pts  quiz ({v.item.visibility.value})  {v.item.title}")


if __name__ == "__main__":  # pragma: no cover
    main()
