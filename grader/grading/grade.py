"""Grade one submission: build each case's inputs, run the student's code in the sandbox,
compute expected values with the reference, compare, name known mistakes, and score.

Data flows one way: problems -> cases -> sandbox runs -> verdicts -> ProblemResult.
"""
from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..course.functions import ReturnKind
from ..course.model import Course, Draw, Problem
from ..course.seeds import DEFAULT_SEED
from ..sandbox.isolation import private_paths
from ..sandbox.session import CaseRun, Limits, ProblemRun, RunStatus, Session, StandIns
from ..sandbox.student_text import student_text
from .answers import grade_draws
from .cascade import ReferenceServer, grade_behind_helpers
from .checks import Verdict, check, check_form, describe
from .diagnosis import diagnose, name_mistakes, point_at_callees
from .grids import weight_grids
from .prepared import PreparedCase, PreparedCases, prepare, summarize_inputs
from .results import NOT_IMPORTED, CaseResult, CaseStatus, GradeResult, LoadError, ProblemResult, one_line
from .submission import SubmissionFiles, read_submission

# what every case of a problem whose function left processes running shows (the grader's words)
LEFT_BEHIND = ("it left processes running after it returned (they were stopped): a function must end "
               "every process it starts")
# what a failing public case with `reveal: false` shows instead of expected vs got
UNREVEALED = "got {}; this answer is yours to work out, so the expected value is not shown"
# what a withheld case of the student bundle (its expected value is not there) shows when the
# answer has the right form: its value is graded when the work is submitted
ON_SUBMISSION = "graded on submission"
ON_SUBMISSION_DETAIL = ("got {}, of the right form; the value is graded on submission (its expected value is not "
                        "in your copy of the assignment)")


def _exception_kind(bases: tuple[str, ...]) -> str:
    """The first built-in exception among an exception's classes: a kind from a fixed list,
    where the student's own class name could spell out anything (a hidden input included)."""
    for name in bases:
        known = getattr(builtins, name, None)
        if isinstance(known, type) and issubclass(known, BaseException):
            return name
    return "an exception"


def _hidden_summary(run: CaseRun) -> str:
    """What a hidden case that did not return shows: the kind of failure, never student text
    (an exception's message, an exit code or signal the student chose, what it printed)."""
    if run.status is RunStatus.RAISED and run.error is not None:
        return f"raised {_exception_kind(run.error.bases)}"
    if run.status is RunStatus.TIMEOUT:
        return f"timed out ({run.detail})"  # the grader's own words: which time limit
    if run.status is RunStatus.CRASHED:
        return "crashed" + (f": {run.detail}" if run.detail.startswith("not run:") or run.detail == LEFT_BEHIND else "")
    return "returned a value that could not be read"


def judge(problem: Problem, prepared: PreparedCase, run: CaseRun) -> CaseResult:
    """Turn one sandbox run into a CaseResult, hiding details of hidden cases (they show the kind
    of failure only: no exception text, no values, nothing the student wrote); a failed case is
    told the mistake this case alone shows (judged_problem weighs all the problem's cases together)."""
    result = _judged(problem, prepared, run)
    return result if result.passed else name_mistakes((result,), diagnose(problem, (prepared,), (run,), (result,)))[0]


def _judged(problem: Problem, prepared: PreparedCase, run: CaseRun) -> CaseResult:
    case, fn = prepared.case, problem.function
    base: dict[str, Any] = dict(name=case.name, hidden=case.hidden, weight=case.weight,
                inputs="" if case.hidden else prepared.inputs if prepared.inputs is not None
                else summarize_inputs(fn, prepared.args))
    error = run.error
    if run.status is RunStatus.RAISED and error is not None:
        if "NotImplementedError" in error.bases:
            return CaseResult(status=CaseStatus.NOT_IMPLEMENTED, summary="not implemented yet", **base)
        where = f" at {error.where}" if error.where else ""
        if case.raises and case.raises in error.bases:
            return CaseResult(status=CaseStatus.PASSED, **base)
        expected = f", expected {case.raises}" if case.raises else ""
        said = _hidden_summary(run) if case.hidden else one_line(
            f"raised {error.type}{where}" + (f": {error.message}" if error.message.strip() else ""))
        return CaseResult(status=CaseStatus.ERROR, summary=said + expected, **base)
    if run.status is not RunStatus.RETURNED:
        status = {RunStatus.TIMEOUT: CaseStatus.TIMEOUT, RunStatus.CRASHED: CaseStatus.CRASHED}.get(run.status, CaseStatus.ERROR)
        summary = {RunStatus.TIMEOUT: f"timed out ({run.detail})", RunStatus.CRASHED: f"crashed: {run.detail}",
                   RunStatus.NO_FUNCTION: f"attention.py defines no function {fn.name}",
                   RunStatus.LOAD_FAILED: NOT_IMPORTED}.get(run.status, run.detail)
        if case.hidden and run.status in (RunStatus.TIMEOUT, RunStatus.CRASHED, RunStatus.BAD_RESULT, RunStatus.RAISED):
            summary = _hidden_summary(run)
        return CaseResult(status=status, summary=one_line(summary), **base)
    if case.raises:
        return CaseResult(status=CaseStatus.FAILED, summary=f"should raise {case.raises}",
                          detail="" if case.hidden
                          else f"expected {case.raises} to be raised, but it returned {describe(run.value)}",
                          **base)
    parts = fn.outputs if fn.returns is ReturnKind.ARRAY_PAIR else ()
    if prepared.form is not None:  # a withheld case: its form is checked here, its value on submission
        form = check_form(problem.compare, prepared.form, run.value, parts)
        if not form.passed:
            return CaseResult(status=CaseStatus.FAILED, summary=form.kind, detail=form.detail, **base)
        return CaseResult(status=CaseStatus.ON_SUBMISSION, summary=ON_SUBMISSION,
                          detail=ON_SUBMISSION_DETAIL.format(describe(run.value)), **base)
    verdict: Verdict = check(problem.compare, prepared.expected, run.value, parts)
    if verdict.passed:
        return CaseResult(status=CaseStatus.PASSED, **base)
    if case.hidden:
        return CaseResult(status=CaseStatus.FAILED, summary=verdict.kind, **base)
    if not case.reveal:  # an answer to work out: the student's own value, never the expected one
        return CaseResult(status=CaseStatus.FAILED, summary=verdict.kind, detail=UNREVEALED.format(describe(run.value)),
                          **base)
    return CaseResult(status=CaseStatus.FAILED, summary=verdict.kind, detail=verdict.detail,
                      grids=weight_grids(problem, prepared.expected, run.value), **base)


def _problem_message(results: Iterable[CaseResult], session: Session, runs: tuple[CaseRun, ...]) -> str:
    results = list(results)
    if session.load_failure is not None and any(r is not None and r.status is RunStatus.LOAD_FAILED for r in runs):
        failure = session.load_failure
        return one_line(LoadError(failure.kind, failure.message, failure.line).describe())
    if any(r is not None and r.status is RunStatus.CRASHED and r.detail == LEFT_BEHIND for r in runs):
        return LEFT_BEHIND[0].upper() + LEFT_BEHIND[1:] + "."
    if runs and all(r.status is RunStatus.NO_FUNCTION for r in runs):
        return results[0].summary
    if results and all(r.status is CaseStatus.NOT_IMPLEMENTED for r in results):
        return "not implemented yet"
    if any(r.status is CaseStatus.TIMEOUT for r in results):
        return next(r.summary for r in results if r.status is CaseStatus.TIMEOUT)
    return ""


def judged_problem(problem: Problem, prepared: Sequence[PreparedCase], runs: Sequence[CaseRun], session: Session,
                   shown: str = "") -> ProblemResult:
    """Judge a problem's runs (one per prepared case) together; `shown`: what it printed that the
    student may see (nothing printed after a hidden case's inputs were sent)."""
    runs = tuple(runs)
    results = tuple(_judged(problem, p, r) for p, r in zip(prepared, runs))
    diagnosis = diagnose(problem, prepared, runs, results)
    results = name_mistakes(results, diagnosis)
    # every case graded on submission: nothing of the problem is scored here
    counted = not results or any(r.status is not CaseStatus.ON_SUBMISSION for r in results)
    return ProblemResult(id=problem.id, title=problem.title, max_score=problem.points, cases=results,
                         hints=problem.hints, message=_problem_message(results, session, runs) or diagnosis.note,
                         stdout=student_text(shown, 4000, lines=True), counted=counted)


class WatchedSession(Session):
    """A Session that tells whether a problem's run left processes of its own running. The session
    stops them and serves the next problem with a fresh process; the problem pays for them.

    While a problem runs, the next problem's request may already be on its way to the same
    process (Session's `then`), which may have started on it: processes found then could be
    either problem's. That process is kept until it has answered the next problem too (so the
    next problem is judged on what the process that served the earlier ones answered); then
    every process of the session is stopped, and each problem whose processes were in doubt is
    run once more, alone in a fresh process, which decides only whether it pays for processes
    left behind: `earlier_left_behind` then says it of the problem before the one just run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._watching = False
        self.left_behind = False
        self.earlier_left_behind = False
        self._maybe = False  # processes were found, but the next problem's request was out too
        self._owed: tuple | None = None  # (function, args, seconds) of a problem whose processes are in doubt
        super().__init__(*args, **kwargs)

    def run(self, function: str, args: Sequence[Sequence[Any]], seconds: float,
            then: tuple[str, Sequence[Sequence[Any]]] | None = None) -> ProblemRun:
        """Session.run; `left_behind` then says whether this problem left processes running."""
        owed, self._owed, self.earlier_left_behind = self._owed, None, False
        run = self._watched(function, args, seconds, None if owed is not None else then)
        if owed is not None:  # answered by the process the earlier problem may have left processes in
            found = self.left_behind  # its own processes, or the earlier problem's
            self._retire()
            self.earlier_left_behind = self._alone(*owed)
            self.left_behind = found and run.rest is None and self._alone(function, args, seconds)
        elif self._maybe and run.rest is None:
            self._owed = (function, args, seconds)  # decided once the next problem has its answers
        return run

    def _alone(self, function, args, seconds) -> bool:
        """Whether the problem, run alone in a fresh process (its answers unused), leaves processes."""
        self._retire()
        self._watched(function, args, seconds, None)
        return self.left_behind

    def _watched(self, function, args, seconds, then) -> ProblemRun:
        self._watching, self.left_behind, self._maybe = True, False, False
        try:
            return super().run(function, args, seconds, then=then)
        finally:
            self._watching = False

    def _retire(self) -> None:
        worker = self._worker
        if self._watching and worker is not None and worker.proc.returncode is None \
                and worker.others_running():
            if self._ahead is not None and self._ahead.worker is worker:
                self._maybe = True
                return  # kept: it is on the next problem, whose answers are collected from it
            self.left_behind = True
        super()._retire()


def _left_behind(run: ProblemRun) -> ProblemRun:
    """A run whose every case answered, but which left processes running: each case crashed."""
    return replace(run, cases=tuple(CaseRun(RunStatus.CRASHED, detail=LEFT_BEHIND) for _ in run.cases))


def _in_turn(problems: Sequence[Problem], chosen: Callable[[Problem], list[PreparedCase]], session: Session,
             seconds: Callable[[Problem], float]) -> dict[str, tuple[list[PreparedCase], ProblemRun]]:
    """Run the `chosen` cases of each problem (none chosen: not run), one problem after another,
    the next one's request sent ahead; `chosen` is called just before it is needed."""
    pending = iter(problems)

    def following() -> tuple[Problem, list[PreparedCase]] | None:
        for problem in pending:
            picked = chosen(problem)
            if picked:
                return problem, picked
        return None

    done: dict[str, tuple[list[PreparedCase], ProblemRun]] = {}
    current = following()
    while current is not None:
        problem, picked = current
        then = following()
        ahead = (then[0].function.name, [p.args for p in then[1]]) if then is not None else None
        run = session.run(problem.function.name, [p.args for p in picked], seconds(problem), then=ahead)
        if getattr(session, "left_behind", False) and run.rest is None:
            run = _left_behind(run)  # (a run that stopped early has already cost its cases)
        if getattr(session, "earlier_left_behind", False) and done:
            before = next(reversed(done))  # the problem run just before, whose processes were in doubt
            done[before] = done[before][0], _left_behind(done[before][1])
        done[problem.id] = picked, run
        current = then
    return done


def run_problems(problems: Sequence[Problem], cases: Callable[[Problem], list[PreparedCase]], session: Session,
                 limits: Limits) -> tuple[ProblemResult, ...]:
    """Every problem's public cases, then every problem's hidden cases. Student code can keep what
    it is passed and hand it back later; in this order no public case (whose answers, messages
    and output the feedback shows) is ever answered by a process that has seen a hidden input.
    A problem's time limit covers both its parts; once its public part stopped (a time-out, a
    crash, no such function...), its hidden cases are not run but get what a later case would."""
    limit = {p.id: p.timeout or limits.problem_seconds for p in problems}
    prepared: dict[str, list[PreparedCase]] = {}
    skipped: dict[str, CaseRun] = {}

    def public(problem: Problem) -> list[PreparedCase]:
        prepared[problem.id] = cases(problem)  # prepared while earlier problems run
        return [p for p in prepared[problem.id] if not p.case.hidden]

    def hidden(problem: Problem) -> list[PreparedCase]:
        picked = [p for p in prepared[problem.id] if p.case.hidden]
        before = first.get(problem.id)
        if picked and before is not None and before[1].rest is not None:
            skipped[problem.id] = before[1].rest
        elif picked and before is not None and before[1].seconds >= limit[problem.id]:
            skipped[problem.id] = CaseRun(RunStatus.TIMEOUT, detail=f"time limit of {limit[problem.id]:g} s for this problem")
        return [] if problem.id in skipped else picked

    first = _in_turn(problems, public, session, lambda p: limit[p.id])
    second = _in_turn(problems, hidden, session,
                      lambda p: limit[p.id] - (first[p.id][1].seconds if p.id in first else 0.0))
    session.stop()  # every answer is in: the student process ends while they are judged
    results = []
    for problem in problems:
        run_of: dict[int, CaseRun] = {}
        parts = [part[problem.id] for part in (first, second) if problem.id in part]
        left = any(r.status is RunStatus.CRASHED and r.detail == LEFT_BEHIND for _, run in parts for r in run.cases)
        for picked, problem_run in parts:  # processes left in either part cost the whole problem
            run_of.update(zip(map(id, picked), (_left_behind(problem_run) if left else problem_run).cases))
        runs = [run_of[id(p)] if id(p) in run_of else skipped[problem.id] for p in prepared[problem.id]]
        shown = first[problem.id][1] if problem.id in first else None
        results.append(judged_problem(problem, prepared[problem.id], runs, session,
                                      shown.stdout + shown.stderr if shown is not None else ""))
    return tuple(results)


def grade(course: Course, submission: Path | SubmissionFiles, *, include_hidden: bool = True,
          problem_ids: Iterable[str] | None = None, limits: Limits | None = None,
          seed: int = DEFAULT_SEED, cache: PreparedCases | None = None) -> GradeResult:
    """Grade `submission` (a path to attention.py) on the assignment's problems and, if the
    assignment has a quiz, the answers.yaml beside it; `seed` picks the quiz's numbers.
    `cache`: cases prepared for earlier submissions of the same course (a batch)."""
    from ..course.quiz import draw  # draws numbers and computes answers: the autograder's side only
    wanted = set(problem_ids) if problem_ids else None
    get = cache.get if cache is not None else prepare
    draw_item = cache.quiz_item if cache is not None else draw
    items = course.quiz.items if course.quiz else ()
    off = course.quiz.optional if course.quiz else ()  # an answer to a switched-off item: ignored, not unknown
    quiz = [draw_item(i, seed) for i in items if wanted is None or i.id in wanted]
    return grade_prepared(course.title, [p for p in course.problems if wanted is None or p.id in wanted],
                          lambda p: [get(p, case, seed) for case in p.visible_cases(include_hidden)],
                          quiz, [i.id for i in (*items, *off)], submission, include_hidden=include_hidden, limits=limits,
                          private=private_paths(course.root))


def not_read(problem: Problem, prepared: list[PreparedCase], reason: str) -> ProblemResult:
    """A problem of a submission whose code was not read (a link, too large...): every case an
    error saying why; no student process is started."""
    cases = tuple(CaseResult(name=p.case.name, hidden=p.case.hidden, weight=p.case.weight, status=CaseStatus.ERROR,
                             summary=reason) for p in prepared)
    return ProblemResult(id=problem.id, title=problem.title, max_score=problem.points, cases=cases, message=reason)


def grade_prepared(title: str, problems: Sequence[Problem], cases: Callable[[Problem], list[PreparedCase]],
                   quiz: Sequence[Draw], quiz_ids: Sequence[str], submission: Path | SubmissionFiles, *,
                   include_hidden: bool, limits: Limits | None = None, private: Sequence[Path] = (),
                   session: WatchedSession | None = None) -> GradeResult:
    """Grade `submission` on `problems`, each on `cases(problem)` (called once the student process
    is starting, so preparing them overlaps its start), and on quiz items whose numbers are
    drawn; `quiz_ids`: every quiz item of the assignment (answers to others are reported as
    unknown). The path shared by `mha grade` (fresh or from the seed cache) and the bundle's `mha check`.

    `submission`: the files already read (submission.read_submission), or a path to read them
    from (attention.py, with answers.yaml beside it). `session`: one `early_session` started for
    those files, used for the first run (its budget starting then) and closed here either way."""
    try:
        return _grade_prepared(title, problems, cases, quiz, quiz_ids, submission, include_hidden, limits, private,
                               session)
    finally:
        if session is not None:
            session.close()  # not needed after all (nothing to run), or closed already (which does nothing)


@contextmanager
def early_session(files: SubmissionFiles, limits: Limits | None, private: Sequence[Path]) -> Iterator[WatchedSession | None]:
    """A session for `files` started now, before the cases are read, so that its student process
    starts (forked, confined, the submission imported) while the grader reads them: for
    grade_prepared's `session`. None when there is no code to run; closed on leaving, used or not."""
    session = WatchedSession(files.source.data, limits, private=private) if files.source.data is not None else None
    try:
        yield session
    finally:
        if session is not None:
            session.close()


def _grade_prepared(title: str, problems: Sequence[Problem], cases: Callable[[Problem], list[PreparedCase]],
                    quiz: Sequence[Draw], quiz_ids: Sequence[str], submission: Path | SubmissionFiles,
                    include_hidden: bool, limits: Limits | None, private: Sequence[Path],
                    early: WatchedSession | None) -> GradeResult:
    limits = limits or Limits()
    start = time.monotonic()
    files = submission if isinstance(submission, SubmissionFiles) else read_submission(Path(submission))
    # the answers were read before any student code ran (an early session's may be running now,
    # on its own copy); grading them runs no student code
    quiz_results = grade_draws(quiz, files.answers, quiz_ids, include_hidden=include_hidden)
    results: tuple[ProblemResult, ...] = ()
    messages: tuple[str, ...] = files.notes
    load_error: LoadError | None = None
    # read before any student code runs (it could rewrite its own copy): which of its functions
    # call which, for pointing a failing problem at the failing function it calls; whether it
    # has any code at all; the line an import failure names
    source = files.source.text() if files.source.data is not None else None
    if problems and files.source.data is None:
        reason = files.source.problem or f"no {files.source.name} was submitted"
        results = tuple(not_read(p, cases(p), reason) for p in problems)
    elif problems:
        # a notebook's function whose cell is not Python was left out: it costs its problem only
        left_out = {p.id: files.not_valid(p.function.name) for p in problems}
        runnable = [p for p in problems if left_out[p.id] is None]
        ran: tuple[ProblemResult, ...] = ()
        if runnable:
            if early is not None:
                early.begin()  # its budget starts now: the time it waited for the grader is not the student's
            with early or WatchedSession(files.source.data, limits, private=private) as session:
                ran = run_problems(runnable, cases, session, limits)
                if session.load_failure is not None:
                    load_error = _load_error(session.load_failure, source)
                    messages += (one_line(load_error.describe()),)
        by_id = {r.id: r for r in ran}
        results = tuple(by_id[p.id] if p.id in by_id else not_read(p, cases(p), _left_out(p, left_out[p.id]))
                        for p in problems)
        if load_error is None:
            again = grade_behind_helpers(problems, results, source, files.source.data or b"", cases, limits, start,
                                         lambda data, group, chosen, left, server: _graded_again(
                                             data, group, chosen, left, private, server))
            results = point_at_callees(problems, results, source, again)
    return GradeResult(title=title, submission=student_text(files.label, 300), problems=results + quiz_results.items,
                       execution_time=round(time.monotonic() - start, 3), messages=messages + quiz_results.messages,
                       include_hidden=include_hidden, load_error=load_error, empty=_no_code(source))


def _left_out(problem: Problem, cell) -> str:
    """Why a problem whose function is in a notebook cell that is not Python was not run."""
    return one_line(f"{cell.describe()}; {problem.function.name} is defined in that cell, which is not valid "
                    f"Python, so it was not run")


def _graded_again(submission: bytes, problems: Sequence[Problem], cases: Callable[[Problem], list[PreparedCase]],
                  limits: Limits, private: Sequence[Path], server: ReferenceServer) -> tuple[ProblemResult, ...] | None:
    """`problems` graded on `submission` in a fresh session whose student process calls the grader
    for the functions `server` answers (cascade.py); None when it did not import."""
    stand_ins = StandIns(server.names, server)
    with WatchedSession(submission, limits, private=private, stand_ins=stand_ins) as session:
        results = run_problems(problems, cases, session, limits)
        return None if session.load_failure is not None else results


def _source_line(source: str | None, line: int | None) -> str:
    """Line `line` of the submission's text (read before it ran, never run here), cut short."""
    if not source or line is None or line <= 0:
        return ""
    lines = source.splitlines()
    return lines[line - 1].expandtabs(4)[:200] if line <= len(lines) else ""


def _load_error(failure, source: str | None) -> LoadError:
    """The session's load failure as plain result data, with the text of the line it names."""
    return LoadError(kind=one_line(failure.kind), message=one_line(failure.message), line=failure.line,
                     column=failure.column, source=one_line(_source_line(source, failure.line)))


def _no_code(source: str | None) -> bool:
    """attention.py holds nothing but blank lines and comments (False when it could not be read)."""
    return source is not None and all(not line.strip() or line.lstrip().startswith("#")
                                      for line in source.splitlines())


def grade_seed_cases(seed_cases, submission: Path | SubmissionFiles, *, include_hidden: bool,
                     problem_ids: Iterable[str] | None = None, limits: Limits | None = None,
                     private: Sequence[Path] = (), session: WatchedSession | None = None) -> GradeResult:
    """Grade `submission` on precomputed seed cases (seed_cases.py): the student bundle's public ones,
    or the autograder's seed cache (seed_cache.py), which has the hidden cases too. `session`: one
    `early_session` started for these files (grade_prepared)."""
    wanted = set(problem_ids) if problem_ids else None
    of = {p.id: cases for p, cases in seed_cases.problems}  # each problem's decoded when first asked for

    def prepared(problem: Problem) -> list[PreparedCase]:
        return [c for c in of[problem.id] if include_hidden or not c.case.hidden]

    return grade_prepared(seed_cases.title, [p for p, _ in seed_cases.problems if wanted is None or p.id in wanted],
                          prepared, [v for v in seed_cases.quiz if wanted is None or v.item.id in wanted],
                          seed_cases.quiz_ids + seed_cases.quiz_off, submission, include_hidden=include_hidden,
                          limits=limits, private=private, session=session)


def known_ids(seed_cases, ids: Iterable[str]) -> None:
    """Raise SubmissionError for an id that is neither a problem nor a quiz item of `seed_cases`."""
    check_known([p.id for p, _ in seed_cases.problems] + list(seed_cases.quiz_ids), ids)


def check_known(known: Sequence[str], ids: Iterable[str]) -> None:
    """Raise SubmissionError for the first of `ids` not in `known`, with the closest known id
    when one is near ("did you mean 'softmax'?"), else every known one."""
    unknown = [i for i in ids if i not in known]
    if unknown:
        import difflib  # only for a mistyped id

        from ..errors import SubmissionError
        near = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"did you mean {near[0]!r}? (`mha list` lists them all)" if near else f"known: {', '.join(known)}"
        raise SubmissionError(f"unknown problem {unknown[0]!r}: {hint}")
