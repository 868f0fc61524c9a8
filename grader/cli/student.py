"""`mha` in the student bundle: check, show and list from precomputed public seed cases.

The bundle has no reference, no bugs (known-wrong implementations), no hidden cases and no quiz
answer key: every expected answer was computed by the instructor's `mha release` and stored in
grader/_seed_cases/*.json, installed with the package, but for the withheld cases, whose value
the grader never shows: their form is checked here, their value on submission.
Student code still runs in the same sandbox as in the autograder.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ..distribution import DISTRIBUTION
from ..errors import ExitCode, GraderError, SubmissionError
from ..grading.grade import known_ids
from .base import CONTEXT, Group, echo_report, fail, traceback_option

PACKAGE = Path(__file__).resolve().parents[1]  # grader/cli/student.py -> the bundle's grader package
BUNDLE = PACKAGE.parent                          # the bundle's folder, when it is run from there


def _seed_cases_folder() -> Path:
    from ..grading.seed_cases import BUNDLE_FOLDER
    return PACKAGE / BUNDLE_FOLDER  # installed with the package: found from any folder


def _index() -> dict:
    """index.json: whether every student has their own numbers, and which id names them."""
    import json

    from ..grading.seed_cases import INDEX
    try:
        data = json.loads((_seed_cases_folder() / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(student: str | None, own_numbers: bool = True):
    """The seed cases of `student` (the default numbers without one), and their folder. `own_numbers`:
    when every student has their own numbers, a command that shows or checks them needs the id."""
    from ..course.seeds import student_token
    from ..grading.seed_cases import SeedCases
    student = student if student and student.strip() else None
    index, folder = _index(), _seed_cases_folder()
    key = index.get("seed_key") or index.get("variant_key") or "id"  # variant_key: the key's older name
    if student is None and index.get("personal") and own_numbers:
        raise SubmissionError(f"every student has their own numbers in this assignment: add --student YOUR_{key.upper()} "
                              f"(your {key}, as your instructor has it), or set MHA_STUDENT")
    path = folder / f"{'default' if student is None else student_token(student)}.json"
    if not path.is_file():
        if student is None:
            raise SubmissionError(f"{path} is missing: this grader package was not installed from a student bundle "
                                  "(`pip install .` in the folder your instructor gave you)")
        raise SubmissionError(f"no numbers for {key} {student!r} in this bundle: check the spelling, "
                              "or ask your instructor")
    return folder, SeedCases.load(path)


def _submission(path: Path | None):
    """--path, else attention.py in the current folder, else the bundle's own (run from the bundle)."""
    from ..grading.submission import read_submission
    if path is not None:
        return read_submission(path)
    for candidate in (Path.cwd() / "attention.py", BUNDLE / "attention.py"):
        if candidate.is_file():
            return read_submission(candidate)
    raise SubmissionError(f"no attention.py in {Path.cwd()}: run `mha check` in the folder of your attention.py, "
                          "or give --path FILE")


_fail = fail


@click.group(cls=Group, context_settings=CONTEXT)
@click.version_option(package_name=DISTRIBUTION)
@traceback_option
def main(traceback: bool) -> None:
    """Multi-head attention exercises: check your work with instant feedback.

    \b
    Example:
      mha check                 # every problem, public cases, with hints
      mha show softmax          # read one problem
    """


student_option = click.option("--student", default=None, metavar="ID", envvar="MHA_STUDENT",
                              help="Your id (email or student number, as your instructor says), when every "
                                   "student has their own numbers [env: MHA_STUDENT].")


@main.command(context_settings=CONTEXT)
@click.argument("problems", nargs=-1)
@click.option("--path", type=click.Path(path_type=Path), default=None,
              help="Your attention.py (default: attention.py in the current folder).")
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
    from ..grading.grade import grade_seed_cases
    from ..sandbox.isolation import private_paths
    try:
        folder, seed_cases = load(student)
        known_ids(seed_cases, problems)
        submission = _submission(path)
        result = grade_seed_cases(seed_cases, submission, include_hidden=False, problem_ids=problems,
                                private=private_paths(folder))
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
        _, seed_cases = load(student)
        known_ids(seed_cases, (problem,))
    except GraderError as exc:
        _fail(exc)
    if problem in seed_cases.texts:
        click.echo(seed_cases.texts[problem], nl=False)
        return
    v = next(v for v in seed_cases.quiz if v.item.id == problem)
    lines = [f"{v.item.title} ({v.item.points:g} points)", "", v.prompt.strip(), ""]
    lines += [f"  {c.letter}) {c.text}" for c in v.choices]
    click.echo("\n".join(lines).rstrip() + "\n")


@main.command(context_settings=CONTEXT)
@click.argument("folder", required=False, default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace attention.py and answers.yaml when FOLDER already has them.")
def init(folder: Path, force: bool) -> None:
    """Write your starter files into FOLDER (default: the current one): attention.py with a stub
    per problem and a blank answers.yaml.

    \b
    Example:
      mha init my-work && cd my-work && mha check
    """
    from types import SimpleNamespace

    from ..starter import starter_files, write_starters
    try:
        _, seed_cases = load(None, own_numbers=False)
        course = SimpleNamespace(title=seed_cases.title, problems=[p for p, _ in seed_cases.problems], root=None)
        written = write_starters(starter_files(course, seed_cases.quiz_title, [v.item for v in seed_cases.quiz]), folder, force)
    except GraderError as exc:
        fail(exc)
    click.echo(f"wrote {', '.join(str(p) for p in written)}; next: edit them, then `mha check`")


@main.command("list", context_settings=CONTEXT)
@student_option
def list_(student: str | None) -> None:
    """List the problems and quiz items with their points.

    \b
    Example:
      mha list
    """
    try:
        _, seed_cases = load(student, own_numbers=False)  # titles and points: the same for everyone
    except GraderError as exc:
        _fail(exc)
    click.echo(seed_cases.title)
    for p, prepared in seed_cases.problems:
        click.echo(f"  {p.id:<30} {p.points:>4g} pts  {len(prepared)} public cases  {p.title}")
    for v in seed_cases.quiz:
        click.echo(f"  {v.item.id:<30} {v.item.points:>4g} pts  quiz ({v.item.visibility.value})  {v.item.title}")


if __name__ == "__main__":  # pragma: no cover
    main()
