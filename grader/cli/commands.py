"""The installed `mha` command line: thin wrappers that load, grade, render and map errors to exit codes.

Its context object is a course folder (source.py's CourseSource); the student commands (check,
show, init, list) are student_commands.py's, the same the student bundle's `mha` runs."""
from __future__ import annotations

import functools
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import click

from .. import reports
from ..errors import ExitCode, GraderError, InternalError, SpecErrors
from .base import CONTEXT, Aliased, Group, fail, limit_options, traceback_option
from .course_source import CourseSource
from .student_commands import STUDENT_COMMANDS

Ctx = CourseSource  # the installed mha's context object: a course folder


def _student_options(command):
    """--student ID / --gradescope-metadata FILE: whose seed to use (default: the default seed)."""
    @functools.wraps(command)
    def with_student(*args, student: str | None, gradescope_metadata: Path | None, **kwargs):
        click.get_current_context().obj.gradescope_metadata = gradescope_metadata  # read by CourseSource.seed
        return command(*args, student=student, **kwargs)

    with_student = click.option(
        "--gradescope-metadata", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="Take the student id from Gradescope's submission_metadata.json (the first user's email, "
             "or sid with 'seed_key: sid' in course.yaml).")(with_student)
    return click.option("--student", default=None, metavar="ID",
                        help="Use this student's numbers (their seed): their email, or sid with 'seed_key: sid' in "
                             "course.yaml (needs the course secret: course.yaml or MHA_COURSE_SECRET).")(with_student)


@click.group(cls=Group, context_settings=CONTEXT)
@click.option("--course", "--exercises", "--assignment", cls=Aliased,  # the older names: hidden aliases
              type=click.Path(file_okay=False, path_type=str),  # a str: `packaged` is not `./packaged`
              default=None, metavar="DIR",
              help="The course folder (the one holding assignment.yaml), or `packaged` for the course "
                   "packaged with mha, whatever folder it runs in (what exported platform scripts use). "
                   "Without it: $MHA_COURSE, else the working folder or the nearest one above it with "
                   "assignment.yaml or exercises/, else the packaged course (`mha list` says which one it uses).")
@click.version_option(package_name="mha-exercises")
@traceback_option
@click.pass_context
def main(ctx: click.Context, course: str | None, traceback: bool) -> None:
    """Exercises on multi-head attention, with instant feedback and a sandboxed grader.

    \b
    Example:
      mha check                 # check ./attention.py (mha init writes it) on the public cases
      mha grade solutions       # grade a submission on every case
    """
    ctx.obj = CourseSource(course)


COURSE_OPTIONS = frozenset({"--course", "--exercises", "--assignment"})  # --course and its older names
main.global_options = COURSE_OPTIONS
for _command in STUDENT_COMMANDS:
    main.add_command(_command)


@main.command(context_settings=CONTEXT)
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(reports.names()), default="text", show_default=True,
              help=reports.help_text())
@click.option("--problem", "problem_ids", multiple=True, metavar="ID",
              help="Grade only this problem or quiz item (repeatable); default: all.")
@_student_options
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report to this file (atomically, mode per the umask) instead of stdout; "
                   "a link, FIFO or device is refused, except a character device such as /dev/stdout.")
@click.option("--fail-under", type=click.FloatRange(0, 100), default=None,
              help="Exit 1 when the score is below this percentage (the report is still written).")
@click.option("--hidden-visibility", type=click.Choice(["visible", "after_due_date", "hidden"]),
              default="after_due_date",
              show_default=True,
              help="Gradescope format: what students see of hidden cases and hidden quiz items. visible: inside "
                   "each problem's test; after_due_date or hidden: tests of their own with that Gradescope "
                   "visibility, recorded and counted, with no score or feedback shown before then.")
@click.option("--prairielearn-data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PrairieLearn's data.json: grade the seed its params.mha_seed names (set by the export).")
@limit_options
@click.pass_obj
def grade(obj: Ctx, submission: Path, fmt: str, problem_ids: tuple[str, ...], output: Path | None,
          fail_under: float | None, hidden_visibility: str, limits, student: str | None,
          prairielearn_data: Path | None) -> None:
    """Grade SUBMISSION (attention.py, or a folder holding it) on every case, hidden ones included.

    Exit 0 when a report was written whatever the score; 1 below --fail-under; 2 usage error;
    3 invalid problem files; 4 grader failure (a Gradescope report still says so).

    \b
    Example:
      mha grade solutions --format gradescope --output results.json
    """
    from ..sandbox import zygote_start
    from ..sandbox.spawn import prestart
    from .chosen import quiz_only
    try:
        runs_code = not quiz_only(obj.root, problem_ids)
    except GraderError:  # no course there: said below, in the report asked for
        runs_code = True
    if runs_code:
        prestart()  # student processes' Python and numpy load while this one loads the course
    else:
        zygote_start.discard()  # quiz items only: no student code runs, so the launcher's zygote is not needed
    from ..sandbox.doctor import unprotected_warning
    if (warning := unprotected_warning()) is not None:
        click.echo(warning, err=True)
    from ..grading.submission import read_submission
    start = time.monotonic()
    try:
        try:
            if output is not None:
                from ..paths import check_output
                check_output(output)  # a link, a FIFO...: refused before any grading
            path = read_submission(submission)  # every file read once, before anything else
            from ..course.seeds import prairielearn_seed
            from ..grading.grade import early_session, grade_seed_cases, known_ids
            from ..sandbox.isolation import private_paths
            if obj.gradescope_metadata is not None and os.geteuid() == 0:
                # it holds earlier submissions' results, hidden feedback and all: the student uid (an
                # "other") may not read it (in namespaces it is not in its file system anyway)
                from ..sandbox.isolation import protect
                protect((obj.gradescope_metadata,))
            private = private_paths(obj.root)
            # a session starts while the cases are read; quiz items only: none
            with early_session(path, limits, private) if runs_code else nullcontext() as session:
                seed_cases = obj.seed_cases(prairielearn_seed(prairielearn_data) if prairielearn_data
                                            else obj.seed(student))
                known_ids(seed_cases, problem_ids)
                result = grade_seed_cases(seed_cases, path, include_hidden=True, problem_ids=problem_ids,
                                          limits=limits, private=private, session=session)
            if fmt == "gradescope":
                from ..reports import gradescope
                report = gradescope.render(result, hidden_visibility)
            else:
                report = _terminal_text(result) if fmt == "text" and output is None else reports.render(fmt, result)
        except GraderError:
            raise
        except Exception as exc:  # the grader's own failure: its last line (the traceback with --traceback)
            import traceback
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            raise InternalError(f"internal error: {detail}") from exc
        _emit(report, output)
    except GraderError as exc:
        # the report that was asked for is still written, saying why nothing could be graded; text on the
        # terminal would only repeat the message below
        if fmt != "text" or output is not None:
            try:
                _emit(_failure_report(fmt, exc, submission, round(time.monotonic() - start, 3)), output)
            except GraderError:
                pass  # the output cannot be written either; the exit code still says what happened
        fail(exc)
    if fail_under is not None and result.percent < fail_under:
        click.echo(f"score {result.percent:.1f}% is below --fail-under {fail_under:g}%", err=True)
        sys.exit(int(ExitCode.FAILED))


def _failure_report(fmt: str, exc: GraderError, submission: Path, execution_time: float) -> str:
    """The report of a submission that could not be graded, in the format asked for."""
    if fmt == "gradescope":  # its own wording: the student must see whether to resubmit
        from ..reports.gradescope import failure
        return failure(str(exc), submission_fault=exc.exit_code is ExitCode.USAGE)
    if fmt == "prairielearn":  # not gradable: PrairieLearn does not count the attempt
        from ..reports.prairielearn import failure as pl_failure
        return pl_failure(str(exc), submission_fault=exc.exit_code is ExitCode.USAGE)
    from ..grading.results import GradeResult
    from ..sandbox.student_text import student_text
    title = "submission not gradable" if exc.exit_code is ExitCode.USAGE else "grader failed"
    return reports.render(fmt, GradeResult(title=title, submission=student_text(submission, 300), problems=(),
                                           execution_time=execution_time, messages=(str(exc),)))


def _terminal_text(result) -> str:
    """The text report as the terminal can show it: its width, and colour unless NO_COLOR."""
    from ..reports import text
    from ..reports.terminal import Style
    return text.render(result, Style.detect(sys.stdout))


def _emit(report: str, output: Path | None) -> None:
    from ..paths import write_atomically
    if output is None:
        click.echo(report, nl=False)
        return
    try:
        write_atomically(output, report)  # OutputError (exit 2) for a link, a FIFO...
    except OSError as exc:
        raise InternalError(f"cannot write {output}: {exc.strerror or exc}") from exc


@main.command(context_settings=CONTEXT)
@click.argument("path", type=click.Path(exists=True, path_type=Path), required=False)
@click.pass_obj
def validate(obj: Ctx, path: Path | None) -> None:
    """Validate problem files: every error as `file:line: message`; exit 3 if any.

    PATH is a course folder (default: the current one) or a single problem file. One run
    reports every error of every file, sorted by file and line: keys, names, explicit `expect`
    values checked against the reference, the quiz's numbers, and the placeholders `mha new
    problem` leaves until they are written.

    \b
    Example:
      mha validate exercises/problems/softmax.yaml
    """
    from ..course.loader import load_problem
    from ..grading.validation import course_errors, reference_errors
    quiz = None
    try:
        if path is not None and path.is_file():
            from ..course.code import course_of
            home = path.resolve().parent.parent  # a problem file inside a course's problems/, else the located course
            problems = [load_problem(path, course_of(home if (home / "assignment.yaml").is_file() else obj.root))]
            errors = reference_errors(problems)
        else:
            root = path if path is not None else obj.root
            if path is not None and path.name == "problems" and not (root / "assignment.yaml").exists():
                root = path.parent
            course, errors = course_errors(root)
            if course is not None:
                problems, quiz = list(course.problems), course.quiz
        if errors:
            raise SpecErrors(errors)
    except GraderError as exc:
        fail(exc)
    cases = [c for p in problems for c in p.cases]
    hidden = sum(c.hidden for c in cases)
    items = quiz.items if quiz else ()
    note = f"; quiz: {len(items)} items ({sum(not i.hidden for i in items)} public, {sum(i.hidden for i in items)} hidden)" \
        if quiz else ""
    click.echo(f"OK: {len(problems)} problem(s), {len(cases)} cases ({len(cases) - hidden} public, {hidden} hidden){note}")


@main.command("prepare", context_settings=CONTEXT)
@click.option("--student", default=None, metavar="ID", help="Prepare this student's seed (needs the course secret).")
@click.pass_obj
def prepare(obj: Ctx, student: str | None) -> None:
    """Prepare every case and quiz item of a seed now, so cold grades skip it.

    `mha grade` and `mha check` do this on their first run and reuse it while the problem
    files and the grader are unchanged (docs/performance.md); an autograder image runs it
    once when it is built. The result is kept where only this user can read it.

    \b
    Example:
      mha prepare
    """
    from ..grading.seed_cache import cache_dir
    try:
        seed_cases = obj.seed_cases(obj.seed(student))
    except GraderError as exc:
        fail(exc)
    cases = sum(len(prepared) for _, prepared in seed_cases.problems)
    folder = cache_dir()
    where = f"into {folder}" if folder else "but kept nothing: this user has no home folder (set MHA_CACHE_DIR)"
    click.echo(f"prepared {len(seed_cases.problems)} problem(s), {cases} cases and {len(seed_cases.quiz)} quiz items {where}")


@main.command(context_settings=CONTEXT)
@click.argument("student")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the student's assignment to this Markdown file instead of stdout.")
@click.pass_obj
def numbers(obj: Ctx, student: str, output: Path | None) -> None:
    """Print STUDENT's version of the assignment: every prompt and quiz item with their numbers.

    The numbers come from a keyed hash of the course secret (course.yaml or MHA_COURSE_SECRET)
    and the student's id: their email, or sid with 'seed_key: sid' in course.yaml (spaces
    around it and case do not matter). They match `mha check --student`, `mha grade --student`,
    the released bundle and the Gradescope autograder.

    \b
    Example:
      MHA_COURSE_SECRET=... mha numbers s1234 --output s1234.md
    """
    from ..course.render import render_assignment
    try:
        text = render_assignment(obj.course(), obj.seed(student))
        _emit(text, output)
    except GraderError as exc:
        fail(exc)


@main.command(context_settings=CONTEXT)
def doctor() -> None:
    """Say how student code is isolated here: run a one-line submission and print its mode.

    Modes: namespaces (root; its own file system, network, IPC and process ids), uid (root,
    where namespaces do not work or MHA_NAMESPACES=off), same user (not root). See the security
    model, docs/security.md.

    \b
    Example:
      sudo mha doctor                  # the mode a root grader gets here
    """
    from ..sandbox.doctor import confinement, sandbox_mode, unprotected_warning
    try:
        mode, text = sandbox_mode()
        limits = confinement()
    except GraderError as exc:
        fail(exc)
    click.echo(f"sandbox: {mode}: {text}")
    for line in limits:
        click.echo(line)
    click.echo(f"python: {sys.executable} ({sys.version.split()[0]})")
    if (warning := unprotected_warning()) is not None:
        click.echo(warning, err=True)


main.lazy = {"grade-all": (".grade_all", "grade_all"), "export": (".export", "export"),
             "release": (".release", "release"), "new": (".new", "new"), "merge": (".merge", "merge")}
