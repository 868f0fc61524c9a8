"""`mha export ...`: the course in the formats other platforms read.

Thin wrappers: load the course, call one exporter of grader.exports, write its output
atomically. Errors are GraderErrors with their exit codes (grader.cli.commands' group prints them).
"""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import InternalError, SpecError, SubmissionError
from .base import Aliased
from .commands import CONTEXT, Ctx

_OUT_DIR = click.Path(file_okay=False, path_type=Path)
_OUT_FILE = click.Path(dir_okay=False, path_type=Path)


def _write(path: Path, data: str | bytes, private: bool = False) -> None:
    """Write an export; `private`: it holds the course secret, so mode 0600 whatever the umask."""
    from ..paths import write_atomically
    try:
        write_atomically(path, data, mode=0o600 if private else None)
    except OSError as exc:
        raise InternalError(f"cannot write {path}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {path}", err=True)


def _refuse_reading(course, *targets: Path, what: str = "--out") -> None:
    """An output the export would read from (the course folder, a folder of its files) is refused."""
    from ..outputs import refuse_reading
    refuse_reading(course, targets, what)


def _quiz(obj: Ctx, out: Path):
    course = obj.course()
    _refuse_reading(course, out)
    if course.quiz is None:
        raise SpecError(str(course.root / "assignment.yaml"), None, "this assignment has no quiz to export")
    return course.quiz


def _draw_options(command):
    command = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                           help="Seed of the questions' numbers (with --draws: of the first draw).")(command)
    return click.option("--draws", "--variants", "draws", cls=Aliased,  # --variants: its older name
                        type=click.IntRange(min=2, max=100), default=None,
                        metavar="N", help="Make N randomized draws of every item with params (default: one "
                                          "version).")(command)


@click.group(context_settings=CONTEXT)
def export() -> None:
    """Export the course for another platform: Gradescope, PrairieLearn, otter, nbgrader, Jupyter, GitHub
    Classroom, Canvas, Moodle, Autolab.

    \b
    Example:
      mha export notebook --out attention.ipynb
      mha export qti --out quiz.zip --draws 5
    """


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_DIR, required=True, help="Folder to write tests/ and the master notebook into.")
@click.option("--solutions", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The model answers (default: solutions/attention.py beside the course folder).")
@click.pass_obj
def otter(obj: Ctx, out: Path, solutions: Path | None) -> None:
    """Write otter-grader tests (one file per problem) and an `otter assign` master notebook.

    Each otter test case grades with this package's checks, so otter's scores equal
    `mha grade`'s; the grading environment needs this package installed (requirements.txt,
    installable from OUT or from otter's zip). Students get the notebook, the student wheel and
    the trained models' weights (models/). `otter assign` needs otter-grader[grading].

    \b
    Example:
      mha export otter --out otter && cd otter && otter assign mha-exercises.ipynb dist
    """
    from ..exports import otter as exporter
    course = obj.course()
    _refuse_reading(course, out)
    solutions = solutions or course.root.parent / "solutions" / "attention.py"
    if not solutions.is_file():
        raise SubmissionError(f"{solutions}: no model answers there (give them with --solutions)")
    try:
        written = exporter.write(out, course, solutions)
    except OSError as exc:
        raise InternalError(f"cannot write into {out}: {exc.strerror or exc}") from exc
    tests = sum(p.parent == out / "tests" for p in written)
    copied = sum(p.parent == out / exporter.MODELS for p in written)
    models = f"{copied} model files in {out / exporter.MODELS}, " if copied else ""
    click.echo(f"wrote {tests} test files, {models}{', '.join(p.name for p in written[-4:-1])} and {written[-1]}",
               err=True)


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_DIR, required=True,
              help="The nbgrader course folder to write: nbgrader_config.py, source/NAME/, the grader's wheel.")
@click.option("--name", "assignment", default="mha-exercises", show_default=True, metavar="NAME",
              help="The nbgrader assignment's name: its folder under source/ and its notebook's name.")
@click.option("--solutions", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The model answers (default: solutions/attention.py beside the course folder).")
@click.pass_obj
def nbgrader(obj: Ctx, out: Path, assignment: str, solutions: Path | None) -> None:
    """Write an nbgrader course folder: solution cells, autograded test cells per problem and quiz item,
    and the written answers as manually graded cells with their rubric.

    Each test cell grades with this package's checks and ends in the points earned, which nbgrader
    takes as the cell's score, so nbgrader's scores equal `mha grade`'s; hidden cases sit between
    nbgrader's hidden-tests markers. The grading environment needs this package installed
    (`pip install -r requirements.txt` in OUT); students get the student wheel and models/ with
    the release.

    \b
    Example:
      mha export nbgrader --out course && cd course && nbgrader generate_assignment mha-exercises
    """
    from ..exports import nbgrader as exporter
    course = obj.course()
    _refuse_reading(course, out)
    exporter.check_assignment_name(assignment)
    solutions = solutions or course.root.parent / "solutions" / "attention.py"
    if not solutions.is_file():
        raise SubmissionError(f"{solutions}: no model answers there (give them with --solutions)")
    try:
        written = exporter.write(out, course, solutions, assignment)
    except OSError as exc:
        raise InternalError(f"cannot write into {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {len(written)} files into {out}; the source notebook is {written[-1]}", err=True)


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_FILE, required=True, help="The notebook to write (.ipynb).")
@click.option("--student", default=None, metavar="ID",
              help="Make the notebook for this student: their numbers and their order of the choices (their "
                   "seed, from the course secret) [default: the default seed, one notebook for all].")
@click.pass_obj
def notebook(obj: Ctx, out: Path, student: str | None) -> None:
    """Write a student notebook: each prompt, a stub cell and a check cell per problem.

    The trained models' weights (*.npz) go into models/ beside the notebook, where the notebook's
    `load_model` finds them. Students submit the notebook; `mha grade NOTEBOOK.ipynb` grades its
    definitions (with `--student ID`, on that student's numbers and letters).

    \b
    Example:
      mha export notebook --out attention.ipynb
      MHA_COURSE_SECRET=... mha export notebook --out s1234.ipynb --student s1234
    """
    from ..classroom.bundles import copy_models
    from ..exports import jupyter as exporter
    course = obj.course()
    _refuse_reading(course, out)
    _write(out, exporter.render(course, obj.seed(student)))
    if not out.is_file():  # written to a device or a stream (/dev/stdout): no folder to put models/ in
        return
    there = set((out.parent / "models").glob("*"))
    try:
        models = copy_models(course.root, out.parent)
    except OSError as exc:  # the notebook without its models would not run: take back what was written
        for path in [out, *(set((out.parent / "models").glob("*")) - there)]:
            path.unlink(missing_ok=True)
        raise InternalError(f"cannot write into {out.parent / 'models'}: {exc.strerror or exc}; nothing was "
                            "written") from exc
    if models:
        click.echo(f"wrote {len(models)} model files into {models[0].parent}: give them to students with the "
                   "notebook, in a models/ folder beside it", err=True)


@export.command("github-classroom", context_settings=CONTEXT)
@click.option("--out", type=_OUT_DIR, required=True,
              help="The starter repository folder: the workflow and what `mha release` gives a student.")
@click.option("--install", default=None, metavar="REQUIREMENT",
              help="Where the workflow installs the grader from: pip arguments, read by bash, for a grader you keep "
                   "private (e.g. git+https://... of a private repository, or a private index). Required, unless "
                   "--vendor-grader.")
@click.option("--install-token-secret", "token_secret", default=None, metavar="NAME",
              help="A GitHub Actions secret given to the install step alone as $NAME, for a REQUIREMENT that needs a "
                   "token (write $NAME in it, in single quotes).")
@click.option("--vendor-grader", is_flag=True, default=False,
              help="Put the whole grader in the repository's .mha/ instead of --install: every student can then read "
                   "the hidden cases, the reference and the quiz key.")
@click.option("--grader-wheel", type=_OUT_DIR, default=None, metavar="FOLDER",
              help="Also write the grader's wheel, the course packaged in it, into FOLDER (outside --out): for you to "
                   "keep where --install can reach it and students cannot.")
@click.option("--fractional/--all-or-nothing", default=True, show_default=True,
              help="Partial credit: each step reports mha's fractional score, so the points equal every other "
                   "platform's; --all-or-nothing: each step is GitHub's command grader, full points or none.")
@click.pass_obj
def github_classroom(obj: Ctx, out: Path, install: str | None, token_secret: str | None, vendor_grader: bool,
                     grader_wheel: Path | None, fractional: bool) -> None:
    """Write a GitHub Classroom starter repository: one graded step per problem and quiz item.

    The repository holds what `mha release` gives a student (stubs, blank answers, the public
    checks, the models' weights) and the workflow; the workflow installs the grader, with the
    hidden cases and the reference, from --install when it runs. Without --install the export
    refuses, unless --vendor-grader.

    \b
    Example:
      mha export github-classroom --out starter --grader-wheel private \\
        --install 'git+https://x-access-token:$GRADER_TOKEN@github.com/ORG/grader.git' \\
        --install-token-secret GRADER_TOKEN
    """
    from ..exports import github_classroom as exporter
    course = obj.course()  # an invalid course is refused first (exit 3)
    _refuse_reading(course, out)
    if grader_wheel is not None:
        _refuse_reading(course, grader_wheel, what="--grader-wheel")
    exporter.check_source(install, vendor_grader, token_secret)
    if grader_wheel is not None and grader_wheel.resolve().is_relative_to(out.resolve()):
        raise SubmissionError(f"--grader-wheel {grader_wheel} is inside the starter repository {out}: students "
                              "could read it there; give a folder outside it")
    try:
        written = exporter.write(out, course, install=install, vendor_grader=vendor_grader,
                                 token_secret=token_secret, fractional=fractional)
    except OSError as exc:
        raise InternalError(f"cannot write into {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote the starter repository {out} ({len(written)} files)", err=True)
    if vendor_grader:
        click.echo(exporter.VENDOR_WARNING, err=True)
    if grader_wheel is not None:
        from ..exports import wheel
        name, data = wheel.build(course)
        _write(grader_wheel / name, data)


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_FILE, required=True, help="The QTI zip to write, for Canvas' quiz import.")
@_draw_options
@click.pass_obj
def qti(obj: Ctx, out: Path, draws: int | None, seed: int) -> None:
    """Write the concept quiz as a QTI 1.2 zip for Canvas (Settings > Import Course Content).

    \b
    Example:
      mha export qti --out quiz.zip --draws 5
    """
    from ..exports import qti as exporter
    _write(out, exporter.render(_quiz(obj, out), draws=draws, seed=seed))


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_FILE, required=True, help="The Moodle XML file to write.")
@_draw_options
@click.pass_obj
def moodle(obj: Ctx, out: Path, draws: int | None, seed: int) -> None:
    """Write the concept quiz as Moodle XML (Question bank > Import > Moodle XML format).

    \b
    Example:
      mha export moodle --out quiz.xml --draws 5
    """
    from ..exports import moodle as exporter
    _write(out, exporter.render(_quiz(obj, out), draws=draws, seed=seed))


def _wheels(python: str) -> dict[str, bytes]:
    """The dependency wheels for `python`, saying on stderr which versions differ from the ones here."""
    from ..exports import wheelhouse
    wheels, notes = wheelhouse.resolve(python)
    for note in notes:
        click.echo(note, err=True)
    return wheels


def _python_version(python: str | None) -> str:
    import re

    from ..exports import wheelhouse
    python = python or wheelhouse.running_python()
    if not re.fullmatch(r"3\.\d{1,2}", python):
        raise SubmissionError(f"--python must be a version like 3.11 (got {python!r})")
    return python


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_DIR, required=True,
              help="The course folder to write (new or empty): infoCourse.json, questions/, courseInstances/, "
                   "serverFilesCourse/.")
@click.option("--python", "python", default=None, metavar="X.Y",
              help="Python version of the grading image (its python3): the wheels in serverFilesCourse are for it "
                   "[default: this Python's version].")
@click.option("--image", default="prairielearn/grader-python", show_default=True,
              help="Docker image of the external grader (Linux x86_64, with python3 of the --python version).")
@click.option("--draws", "--variants", "draws", cls=Aliased,  # --variants: its older name
              type=click.IntRange(min=1, max=100), default=10, show_default=True,
              metavar="N", help="Precomputed draws of each question with numbers; PrairieLearn's variant_seed picks "
                                "one.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the first draw.")
@click.pass_obj
def prairielearn(obj: Ctx, out: Path, python: str | None, image: str, draws: int, seed: int) -> None:
    """Write a PrairieLearn course folder: one externally graded question per problem, the quiz as
    native elements, and a Homework assessment listing them.

    The entry point (serverFilesCourse/mha/grade.sh) installs this grader and its dependencies
    from the wheels beside it, with no network, and writes /grade/results/results.json. Each
    question offers --draws draws of its numbers and PrairieLearn's variant_seed picks one; a
    code problem is graded on the seed its page showed (params.mha_seed).

    \b
    Example:
      mha export prairielearn --out pl-course --python 3.12
    """
    from ..exports import prairielearn as exporter
    python = _python_version(python)
    course = obj.course()
    _refuse_reading(course, out)
    files = exporter.build(course, _wheels(python), python, image=image, draws=draws, seed=seed)
    try:
        written = exporter.write(out, files)
    except OSError as exc:
        raise InternalError(f"cannot write into {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {len(written)} files into {out}", err=True)


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_FILE, required=True, help="The autograder zip to upload to Gradescope.")
@click.option("--python", "python", default=None, metavar="X.Y",
              help="Python version of the Gradescope image (its python3): the wheels in the zip are for it "
                   "[default: this Python's version].")
@click.option("--hidden-visibility", type=click.Choice(["after_due_date", "hidden"]), default="after_due_date",
              show_default=True,
              help="What students see of hidden cases and hidden quiz items: tests of their own, counted in the "
                   "score, shown after the due date (after_due_date) or never (hidden); before then the visible "
                   "output only says they were recorded.")
@click.pass_obj
def gradescope(obj: Ctx, out: Path, python: str | None, hidden_visibility: str) -> None:
    """Write a Gradescope autograder zip (setup.sh, run_autograder, wheels, the assignment).

    The image is built with no network: the zip carries this grader as a wheel and its
    dependencies as wheels pinned to the versions installed here, for Linux x86_64 and one
    Python version (the export downloads them once, from the package index or pip's cache).
    setup.sh refuses, with a clear message, an image whose python3 is another version.
    The course secret (course.yaml or MHA_COURSE_SECRET) goes in, so each student is graded on
    their own seed, identified by the first user's email in submission_metadata.json (or the
    sid, with 'seed_key: sid' in course.yaml); metadata that names no student is an
    "autograder failed" result, never the default seed. Written quiz items are shown as
    recorded (0 of 0 points); their rubric goes to OUT's name with -written-rubric.md, for
    grading them by hand in Gradescope.

    \b
    Example:
      MHA_COURSE_SECRET=... mha export gradescope --out autograder.zip --python 3.10
    """
    import os

    from ..course.seeds import course_secret
    from ..exports import gradescope as exporter
    python = _python_version(python)
    course = obj.course()
    rubric_path = out.with_name(out.stem + "-written-rubric.md")
    _refuse_reading(course, out, rubric_path)
    wheels = _wheels(python)
    secret = course_secret(course.root, os.environ)
    _write(out, exporter.build(course, secret, wheels, python, hidden=hidden_visibility),
           private=secret is not None)
    rubric = exporter.written_rubric(course)
    if rubric:  # written items: graded by hand in Gradescope, with this rubric
        try:
            _write(rubric_path, rubric)
        except InternalError:  # both files or neither
            if out.is_file():
                out.unlink()
            raise


@export.command(context_settings=CONTEXT)
@click.option("--out", type=_OUT_DIR, required=True,
              help="Folder to write autograde.tar, autograde-Makefile and assessment.yml into (new or empty).")
@click.option("--python", "python", default=None, metavar="X.Y",
              help="Python version of the Autolab grading image (its python3): the wheels in the tar are for it "
                   "[default: this Python's version].")
@click.pass_obj
def autolab(obj: Ctx, out: Path, python: str | None) -> None:
    """Write an Autolab autograder: autograde.tar and autograde-Makefile, as Tango runs them.

    Tango copies both and the student's attention.py into an empty job folder and runs make: the
    tar installs this grader from its own wheels (no network) and grades the file, printing the
    feedback and, last, the scores line with one key per problem. assessment.yml lists those
    problems and their points for the assessment's configuration. The handin is one file, so the
    quiz goes to a quiz platform (mha export qti or moodle). Tango names no student, so everyone
    is graded on the default numbers.

    \b
    Example:
      mha export autolab --out autolab --python 3.11
    """
    from ..exports import autolab as exporter
    from ..outputs import staged_folder
    python = _python_version(python)
    course = obj.course()
    _refuse_reading(course, out)
    tar, makefile, config = exporter.build(course, _wheels(python), python)
    try:
        with staged_folder(out) as staged:
            (staged / "autograde.tar").write_bytes(tar)
            (staged / "autograde-Makefile").write_text(makefile)
            (staged / "assessment.yml").write_text(config)
    except OSError as exc:
        raise InternalError(f"cannot write into {out}: {exc.strerror or exc}") from exc
    click.echo(f"wrote {out}/autograde.tar, autograde-Makefile and assessment.yml", err=True)
