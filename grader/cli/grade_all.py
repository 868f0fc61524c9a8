"""`mha grade-all`: grade a whole class, then write the gradebook, feedback and item analysis.

Registered on `mha` as a lazy command (`main.lazy` in commands.py).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from ..errors import ExitCode, GraderError, InternalError, SubmissionError
from ..paths import SUBMISSION_NAME
from .base import debugging
from .commands import CONTEXT, Ctx, fail, limit_options


def _default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use (Linux)
    except AttributeError:
        return os.cpu_count() or 1


def _zygotes_needed(obj: Ctx, submissions: Path, out: Path, jobs: int, force: bool) -> int:
    """The zygotes to start ahead for the batch, as it will share the class out (batch.grade_all):
    one per grader process, one when a single submission is graded in this process; none for no
    submissions (or when they cannot be found: the command says why, after the course), and none
    for a run after an earlier one into the same folder, where most submissions are usually read
    back, not graded (each grader process then starts its own zygote if it grades one)."""
    from ..classroom import batch
    try:
        if not force and any((out / batch.RESULTS_DIR).iterdir()):
            return 0
    except OSError:  # no earlier results
        pass
    try:
        found = len(batch.discover(submissions, exclude=out, settings=obj.settings()))
    except Exception:
        return 0
    return min(jobs, found) if found > 1 and batch.FORK else min(found, 1)


class ShardParam(click.ParamType):
    """--shard: K/N (1 <= K <= N), or auto (read from a Slurm job array or a Kubernetes Indexed Job)."""

    name = "K/N|auto"

    def convert(self, value, param, ctx):
        from ..classroom.shards import parse
        if isinstance(value, tuple) or value == "auto":
            return value
        shard = parse(str(value))
        if shard is None:
            self.fail(f"{value!r} is not K/N with 1 <= K <= N (such as 2/3), nor auto", param, ctx)
        return shard


def _seeds(source: Ctx) -> Callable[[str], int]:
    """Each student's seed; without a course secret, the default one (with a warning that says
    where to set it: never inside the installed package)."""
    from ..course.seeds import DEFAULT_SEED, course_secret, student_seed
    secret = course_secret(source.root, os.environ)
    if secret is None:
        click.echo(f"warning: no course secret ({source.secret_place()}): every student is graded on the "
                   "default seed", err=True)
        return lambda student: DEFAULT_SEED
    return lambda student: student_seed(secret, student)


@contextlib.contextmanager
def _progress(total: int, wanted: bool | None) -> Iterator[Callable]:
    """Progress on stderr: a bar on a terminal; with --progress elsewhere, one line per student."""
    terminal = sys.stderr.isatty()
    if wanted is False or (wanted is None and not terminal):
        yield lambda outcome: None
    elif terminal:
        with click.progressbar(length=total, label="grading", file=sys.stderr, show_pos=True,
                               item_show_func=lambda student: student) as bar:
            yield lambda outcome: bar.update(1, outcome.submission.student)
    else:
        done = itertools.count(1)
        yield lambda outcome: click.echo(f"[{next(done)}/{total}] {outcome.submission.student}: {outcome.status}"
                                         + (" (unchanged)" if outcome.resumed else ""), err=True)


@click.command("grade-all", context_settings=CONTEXT)
@click.argument("submissions", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for gradebook.csv, feedback/, results/, the item analysis and report.html.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Submissions graded at the same time [default: the number of CPUs].")
@click.option("--force", is_flag=True,
              help="Grade every submission again, even those graded before and unchanged since.")
@click.option("--progress/--no-progress", default=None,
              help="Show progress on stderr: a bar on a terminal, one line per student otherwise "
                   "[default: a bar when stderr is a terminal].")
@click.option("--written-scores", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A CSV file of hand scores for the written items (columns student, item, score; the "
                   "written.csv of a previous run, its points filled in, will do): the gradebook gets a "
                   "column per written item and total_with_written.")
@click.option("--shard", type=ShardParam(), default=None,
              help="Grade only the K-th of N slices of the class (1 <= K <= N; a student is always in the same "
                   "slice, whoever else is in SUBMISSIONS); `mha merge` joins the slices' --out folders. auto: K "
                   "and N from a Slurm job array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1 of "
                   "SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX + 1 of MHA_SHARD_COUNT).")
@limit_options
@click.pass_obj
def grade_all(obj: Ctx, submissions: Path, out: Path, jobs: int | None, force: bool, progress: bool | None,
              written_scores: Path | None, shard, limits) -> None:
    """Grade every student's submission in SUBMISSIONS; write a gradebook, feedback and an item analysis.

    SUBMISSIONS holds one folder (with attention.py and answers.yaml) or one <student>.py per
    student, or is a Gradescope "export submissions" download. A rerun grades only new or changed
    submissions (all of them with --force). Each student's seed comes from the course secret
    (MHA_COURSE_SECRET or course.yaml). Exit 0 when everything was written, 2 for a bad
    SUBMISSIONS folder, 3 for invalid problem files, 1 if the grader failed on some submission
    (the others are still graded, and the gradebook and report written, that one with a note).
    Written items are never scored here: their answers go to written.html and written.csv for
    grading by hand, and --written-scores adds the hand scores to the gradebook (a bad row is an
    error naming its file and line, exit 2).

    \b
    Example:
      mha grade-all submissions/ --out graded/ --jobs 4 --timeout 5
      mha grade-all submissions/ --out graded/ --written-scores graded/written.csv
      mha grade-all submissions/ --out graded-2/ --shard 2/3   # then: mha merge graded-*/ --out graded/
    """
    from ..classroom import batch
    hand = None
    from ..sandbox.spawn import prestart_spares
    prestart_spares(_zygotes_needed(obj, submissions, out, jobs or _default_jobs(), force))  # they load while the course does
    try:
        course = obj.course()
        seed_of = _seeds(obj)
        if out.resolve() == submissions.resolve():
            raise SubmissionError(f"{out}: --out must be another folder than SUBMISSIONS (or one inside it)")
        if (submissions / SUBMISSION_NAME).is_file():
            raise SubmissionError(f"{submissions} is one student's submission (it holds {SUBMISSION_NAME}): grade it "
                                  f"with `mha grade {submissions}`; grade-all takes the folder holding every "
                                  "student's folder or <student>.py")
        if shard is not None and written_scores is not None:
            raise SubmissionError("--written-scores is for the whole class: merge the slices (mha merge), then run "
                                  "grade-all with it on the merged folder (nothing is graded again)")
        found = batch.discover(submissions, exclude=out, settings=obj.settings())
        if shard is not None:
            from ..classroom import shards
            shard = shards.from_environment(os.environ) if shard == "auto" else shard
            found = [s for s in found if shards.slice_of(s.student, shard[1]) == shard[0]]
        from ..sandbox.doctor import unprotected_warning
        if (warning := unprotected_warning()) is not None:
            click.echo(warning, err=True)
        else:  # as root without namespaces, classmates' files stay out of reach by their mode
            from ..sandbox.isolation import protect
            out.mkdir(parents=True, exist_ok=True)
            protect([submissions, out])
        if not found and shard is None:
            raise SubmissionError(f"{submissions}: no submissions (expected one folder or <student>.py per "
                                  f"student, or a Gradescope export with {batch.GRADESCOPE_METADATA})")
        hand = _hand_scores(course, written_scores, [s.student for s in found])
        rows, resumed, failures = [], 0, []
        try:
            with _progress(len(found), progress) as step:
                for outcome in batch.grade_all(course, found, out, seed_of=seed_of, limits=limits,
                                               jobs=jobs or _default_jobs(), force=force):
                    rows.append(outcome.row)
                    resumed += outcome.resumed
                    step(outcome)
                    if outcome.error:
                        click.echo(f"{outcome.submission.student}: grading failed: {outcome.error}", err=True)
                        failures.append(outcome)
                        if outcome.traceback and debugging():
                            click.echo(outcome.traceback.rstrip("\n"), err=True)
            _write_error_log(out, failures)
            if shard is not None:
                _write_manifest(obj, course, out, shard, found, seed_of, limits)
            rows.sort(key=lambda r: r.student)  # the reports do not depend on which grading finished first
            report = write_reports(course, rows, out, hand)
        except OSError as exc:
            raise InternalError(f"cannot write to {out}: {exc.strerror or exc}") from exc
    except GraderError as exc:
        fail(exc)
    summary(rows, resumed, report, out)
    if hand is not None:
        given = sum(len(scores) for scores in hand.values())
        click.echo(f"hand scores: {given} written answer(s) scored by hand, in the gradebook's written columns "
                   "and total_with_written")


def _write_manifest(obj: Ctx, course, out: Path, shard: tuple[int, int], found, seed_of, limits) -> None:
    """OUT/shard.json, read by `mha merge`."""
    from ..classroom import batch, shards
    from ..sandbox.limits import Limits
    shards.write_manifest(out, shard, {s.student: s.key for s in found}, batch.fingerprint(course, Limits()),
                          batch.fingerprint(course, limits or Limits()), seed_of(shards.SEED_PROBE))


ERROR_LOG = "grader-errors.log"  # in --out: the traceback of every submission the grader failed on


def _write_error_log(out: Path, failures) -> None:
    """OUT/grader-errors.log: each failed submission's error and the grader's traceback, and a line
    on stderr saying where it is; none (an old one removed) when the grader failed on nothing."""
    from ..paths import write_atomically
    log = out / ERROR_LOG
    if not failures:
        log.unlink(missing_ok=True)
        return
    write_atomically(log, "".join(f"== {o.submission.student}: {o.error}\n"
                                  f"{o.traceback or '(no traceback: its grader process died)'}\n"
                                  for o in failures))
    click.echo(f"the grader's tracebacks: {log}", err=True)


def _hand_scores(course, path: Path | None, students: list[str]) -> dict[str, dict[str, float]] | None:
    """The written items' hand scores from --written-scores, checked before anything is graded."""
    if path is None:
        return None
    from ..classroom.written_scores import read_written_scores
    quiz_items = course.quiz.items if course.quiz else ()
    return read_written_scores(path, set(students), {i.id: float(i.points) for i in quiz_items if i.manual})


def write_reports(course, rows, out: Path, hand=None):
    """gradebook.csv, then the item analysis of every student graded (failures left out)."""
    from ..classroom import class_report
    from ..classroom.analysis import analyse, mistake_messages
    from ..classroom.batch import FAILED, write_gradebook
    quiz_items = course.quiz.items if course.quiz else ()
    items = [*course.problems, *(i for i in quiz_items if not i.manual)]  # written items: graded by hand
    write_gradebook(out / "gradebook.csv", [i.id for i in items], rows,
                    written=[i.id for i in quiz_items if i.manual], hand=hand)
    _write_written(out, [i for i in quiz_items if i.manual], rows, hand)
    analysis = analyse([r for r in rows if r.status not in FAILED], {i.id: float(i.points) for i in items})
    class_report.write(analysis, {i.id: i.title for i in items}, out, students=rows, messages=mistake_messages(course))
    return analysis


def _write_written(out: Path, items, rows, hand=None) -> None:
    """written.html and written.csv: every student's written answers, for grading by hand (the
    csv keeps the hand scores given, so --written-scores OUT/written.csv is never emptied)."""
    from ..paths import write_atomically
    from ..reports import written
    if not items:
        return
    write_atomically(out / written.FILES[0], written.render_html(items, rows))
    write_atomically(out / written.FILES[1], written.render_csv(items, rows, hand))


def summary(rows, resumed: int, analysis, out: Path) -> None:
    from ..classroom.batch import FAILED, GRADER_ERROR, STATUSES
    count = {s: sum(r.status == s for r in rows) for s in STATUSES}
    failed = sum(count[s] for s in FAILED)
    shown = ", ".join(f"{n} {status}" for status, n in count.items() if n and status not in FAILED)
    click.echo(f"{len(rows)} students: {shown + ', ' if shown else ''}{failed} failed ({resumed} unchanged since the last run, "
               f"not graded again); mean {analysis.mean_total:.1f} of {analysis.max_total:g}")
    click.echo(f"gradebook: {out / 'gradebook.csv'}\nreport: {out / 'report.html'}")
    if (out / "written.html").is_file():
        click.echo(f"written answers, to grade by hand: {out / 'written.html'} and {out / 'written.csv'}")
    if failed:  # the others are graded and every file is written: not the grader failing as a whole
        click.echo(f"the grader failed on {failed} submission(s) (status 'error' or '{GRADER_ERROR}' in the "
                   "gradebook, with a note); run again to retry those with status 'error' (a submission the "
                   f"grader failed on twice is '{GRADER_ERROR}', retried with --force)", err=True)
        sys.exit(int(ExitCode.FAILED))
