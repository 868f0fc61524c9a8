"""Human-readable report for students (`mha check`) and instructors (`mha grade`, grade-all feedback).

Made to be read at a glance: an attention.py that cannot be imported is told once (its line
and a caret), not once per case; each problem gets one "likely mistake" paragraph, however
many cases the mistake explains; passing cases share one line, and so do unanswered and
recorded quiz items; a closing summary gives each problem's score and the first thing to fix.
Colour, width and shade characters come from the `Style` the caller hands in (the default:
no colour, 100 columns), so a file or a test gets the same text whatever the terminal.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..grading.results import (
    NOT_IMPORTED,
    RETURNED_NONE,
    CaseResult,
    CaseStatus,
    GradeResult,
    LoadError,
    ProblemResult,
    WeightGrid,
)
from .terminal import Style, grid_lines, wrap

__all__ = ["render", "first_fix", "problem_lines", "case_lines", "one_case_lines", "feedback", "why"]

MARK = {"pass": "PASS", "fail": "FAIL", "todo": "TODO"}
NOT_IMPLEMENTED = "not implemented yet: the function still raises NotImplementedError"
CASES_SHOWN = 3      # failing public cases told in full; further ones are named on one line
CASES_NAMED = 2      # the same, when one named mistake explains every failing public case
IND, SUB = "      ", "            "
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # in what student code printed: no terminal escapes


def _pts(x: float) -> str:
    return f"{round(x, 2):g}"


Figure = Callable[[Sequence[WeightGrid], Style, str], list[str]]


class _Out:
    def __init__(self, style: Style, figure: Figure):
        self.style, self.figure = style, figure
        self.lines: list[str] = []

    def text(self, text: str, indent: str = "", hanging: str | None = None, role: str | None = None) -> None:
        for line in wrap(text, self.style.width, indent, hanging):
            body = line[len(indent):] if line.startswith(indent) else line.lstrip()
            pad = line[:len(line) - len(body)]
            self.lines.append(pad + (self.style.paint(body, role) if role else body))

    def marked(self, mark: str, text: str, indent: str = "", hanging: str = IND) -> None:
        """A line that starts with a PASS/FAIL/TODO mark, painted, the rest wrapped under it."""
        plain = wrap(f"{MARK[mark]}  {text}", self.style.width, indent, hanging)
        first = plain[0][len(indent):]
        self.lines.append(indent + self.style.paint(first[:4], mark) + first[4:])
        self.lines.extend(plain[1:])

    def labelled(self, label: str, text: str, role: str, indent: str = IND) -> None:
        """A paragraph that starts with `label` (painted in `role`'s colour), wrapped under it."""
        start = len(self.lines)
        self.text(f"{label} {text}", indent, indent + "  ")
        first = self.lines[start]
        if first.startswith(indent + label):
            self.lines[start] = indent + self.style.paint(label, role) + first[len(indent) + len(label):]

    def heading(self, text: str) -> None:
        self.lines += ["", self.style.paint(text, "bold")]


def _first_sentence(text: str, limit: int = 90) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[:limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def first_fix(problem: ProblemResult, limit: int = 90) -> str:
    """The first thing to fix in a failing problem, in a few words (a sentence cut to `limit` columns)."""
    if problem.not_implemented:
        return "not implemented yet"
    if problem.message:
        return _first_sentence(problem.message, limit)
    failing = [c for c in problem.cases if not c.passed and c.status is not CaseStatus.ON_SUBMISSION]
    named = next((c for c in failing if c.mistake), None)
    if named is not None:
        head = f"likely {named.mistake}: "
        return head + _first_sentence(named.mistake_message, max(20, limit - len(head)))
    first = failing[0] if failing else None
    if first is None:
        return ""
    if problem.quiz:
        return first.summary
    return f"{'[hidden] ' if first.hidden else ''}{first.name}: {first.summary}"


def _not_run(result: GradeResult) -> list[ProblemResult]:
    """The problems no case of which could run because attention.py failed its import."""
    if result.load_error is None:
        return []
    return [p for p in result.problems if not p.quiz and p.cases and all(c.summary == NOT_IMPORTED for c in p.cases)]


def _import_failure(out: _Out, error: LoadError) -> None:
    """What stopped attention.py's import: a FAIL line, the message, the line with a caret."""
    what = {"syntax": "has a syntax error", "timeout": "took too long to import",
            "crashed": "stopped the process while being imported"}.get(error.kind, f"raised {error.kind} while being imported")
    where = f" on line {error.line}" if error.line else ""
    # Python's words (a syntax error) or the grader's (a crash) on a line of their own; an exception's
    # message is the student's, so it follows the grader's words on their line, never starts one
    own = error.kind in ("syntax", "crashed")
    said = f": {error.message}" if error.message and not own and error.kind != "timeout" else ""
    out.marked("fail", f"attention.py {what}{where}{said}", hanging="      ")
    if error.message and own:
        out.text(error.message, IND)
    if error.source:
        number = str(error.line)
        out.lines.append(f"{IND}{number} | {error.source}")
        if error.column and error.kind == "syntax":
            out.lines.append(f"{IND}{' ' * len(number)} | {' ' * (error.column - 1)}" + out.style.paint("^", "fail"))


def _load_error(out: _Out, error: LoadError, problems: list[ProblemResult], unrun: list[ProblemResult]) -> None:
    """The import failure, once: what happened, the line with a caret, and what the problems
    it kept from running (`unrun`, of `problems`) cost."""
    out.lines.append("")
    _import_failure(out, error)
    points = sum(p.max_score for p in unrun)
    if len(unrun) == len(problems):
        out.text(f"No problem could run, so none was checked ({len(problems)} problems, 0 of {_pts(points)} points). "
                 "Fix this first; the cases then run as usual.", IND)
    else:  # a later process of the submission failed its import: the problems before it ran
        out.text(f"{len(unrun)} of {len(problems)} problems could not run ({_pts(points)} points); the others "
                 "ran and are below. Fix this first; the cases then run as usual.", IND)


def _hidden_line(out: _Out, hidden: list[CaseResult], total: int) -> None:
    if hidden:
        shown = "; ".join(f"{c.name} ({c.summary})" for c in hidden)  # names may hold commas
        out.text(f"hidden cases failing, {len(hidden)} of {total}: {shown}", IND, SUB)


def _mistakes(out: _Out, failing: list[CaseResult]) -> bool:
    """One paragraph per named mistake, with the cases it explains unless it explains them all."""
    named: dict[tuple[str, str], list[str]] = {}
    for c in failing:
        if c.mistake:
            named.setdefault((c.mistake, c.mistake_message), []).append(("[hidden] " if c.hidden else "") + f"'{c.name}'")
    for (mistake, message), names in named.items():
        where = "" if len(names) == len(failing) or len(failing) == 1 else f", on {', '.join(names)}"
        out.labelled(f"likely mistake ({mistake}){where}:", message, "mistake")
    return bool(named)


def _case(out: _Out, case: CaseResult) -> None:
    out.marked("fail", f"{'[hidden] ' if case.hidden else ''}{case.name}: {case.summary}", IND, SUB)
    if case.inputs:
        out.text(f"inputs: {case.inputs}", SUB, SUB + "  ", role="dim")
    if case.detail:
        out.text(case.detail, SUB, SUB + "  ")


def _failing_cases(out: _Out, failing: list[CaseResult], public: list[CaseResult], hidden_total: int) -> None:
    """The first few failing public cases in full; a case that broke the same way as one shown
    (timed out, not run, raised the same error) only by name, on one line per cause; the other
    wrong answers on one line, public then hidden."""
    detailed: list[CaseResult] = []
    causes: set[CaseStatus] = set()   # one case in full per way of breaking (a timeout, an error...)
    named = bool(public) and public[0].mistake is not None and all(c.mistake == public[0].mistake for c in public)
    for c in public:
        if len(detailed) < (CASES_NAMED if named else CASES_SHOWN) and (c.status is CaseStatus.FAILED or c.status not in causes):
            detailed.append(c)
            causes.add(c.status)
    for c in detailed:
        _case(out, c)
    rest = [c for c in failing if all(c is not d for d in detailed)]
    broken: dict[tuple[CaseStatus, str], list[str]] = {}
    for c in rest:
        if c.status is not CaseStatus.FAILED:
            broken.setdefault((c.status, c.summary), []).append(("[hidden] " if c.hidden else "") + c.name)
    wrong = [c for c in rest if c.status is CaseStatus.FAILED and not c.hidden]
    if wrong:
        out.text("also failing: " + "; ".join(f"{c.name} ({c.summary})" for c in wrong), IND, SUB)
    for (status, summary), names in broken.items():
        out.text(f"{'also ' if status in causes else ''}{summary}: {'; '.join(names)}", IND, SUB)
    _hidden_line(out, [c for c in rest if c.hidden and c.status is CaseStatus.FAILED], hidden_total)


def _hint_helps(failing: Sequence[CaseResult]) -> bool:
    """The problem's hint is worth showing: some case gave a wrong answer or raised (not one that
    returned None, which its own line explains), and no named mistake says more."""
    return any(c.status in (CaseStatus.FAILED, CaseStatus.ERROR) and c.summary != RETURNED_NONE for c in failing)
def _on_submission(p: ProblemResult) -> list[str]:
    """The names of the problem's cases whose value is graded on submission (the student bundle's withheld cases)."""
    return [c.name for c in p.cases if c.status is CaseStatus.ON_SUBMISSION]


def _on_submission_line(out: _Out, p: ProblemResult) -> None:
    names = _on_submission(p)
    if names:
        out.text(f"graded on submission ({len(names)} of {len(p.cases)}, the form of each answer is right; "
                 f"their expected values are not in your copy): " + "; ".join(names), IND, SUB)


def _right_once(out: _Out, helpers: tuple[str, ...], problems: list[ProblemResult]) -> None:
    """Problems whose own code is right, failing only through the student's helpers: one block for
    all of them, their cases and pictures left out (the helper's own block shows what to fix)."""
    names = [p.id for p in problems]
    lost = sum(p.max_score - p.score for p in problems)
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    helper = helpers[0] if len(helpers) == 1 else ", ".join(helpers[:-1]) + " and " + helpers[-1]
    out.marked("fail", f"{said}  [-{_pts(lost)}]: right once your {helper} {'is' if len(helpers) == 1 else 'are'} "
               f"fixed (graded again with the course's {helper} in place of yours, "
               f"{'it passes' if len(names) == 1 else 'each passes'} every public case)")


def _problem(out: _Out, p: ProblemResult, show_hints: bool) -> None:
    score = f"[{_pts(p.score)}/{_pts(p.max_score)}]" if p.counted else "[graded on submission]"
    if p.passed:
        out.marked("pass", f"{p.id}: {p.title}  {score}")
        _on_submission_line(out, p)
        return
    if p.not_implemented:
        out.marked("todo", f"{p.id}: {p.title}  {score}  not implemented yet")
        return
    out.marked("fail", f"{p.id}: {p.title}  {score}")
    _on_submission_line(out, p)
    failing = [c for c in p.cases if not c.passed and c.status is not CaseStatus.ON_SUBMISSION]
    # one cause for every failing case (an import failure, a missing function): told once
    one_cause = len(failing) > 1 and len({c.summary for c in failing}) == 1 and (
        failing[0].summary == RETURNED_NONE or all(c.status is not CaseStatus.FAILED for c in failing))
    if p.message and (one_cause or all(c.summary != p.message for c in failing)):  # else a case shown says it
        out.text(p.message, IND)
    if one_cause:
        if failing[0].summary != p.message:
            out.text(f"{'every case' if len(failing) == len(p.cases) else f'{len(failing)} cases'}: "
                     f"{failing[0].summary}", IND, SUB)
        return
    public = [c for c in failing if not c.hidden]
    _failing_cases(out, failing, public, sum(c.hidden for c in p.cases))
    passed = [c.name for c in p.cases if c.passed]
    if passed:
        out.text("passed: " + "; ".join(passed), IND, SUB, role="dim")
    named = _mistakes(out, failing)
    drawn = max((c for c in public if c.grids), default=None, key=lambda c: sum(map(len, c.grids[0].got)))
    if drawn is not None:
        out.text(f"weights in '{drawn.name}' (row: query, column: key; darker = more weight):", IND)
        out.lines.extend(out.figure(drawn.grids, out.style, IND + "  "))
    if show_hints and p.hints and not named and _hint_helps(failing):
        out.labelled("hint:", p.hints[0], "code")
    if p.stdout.strip():
        out.lines.append(f"{IND}your code printed:")
        out.lines.extend(f"{IND}  | {_CONTROL.sub('?', line[:160])}" for line in p.stdout.strip().splitlines()[:5])


def _quiz_item(out: _Out, p: ProblemResult, brief: bool = False) -> None:
    """A quiz item's block; `brief`: a right answer is its header line only (the text report)."""
    case = p.cases[0]
    score = f"[{_pts(p.score)}/{_pts(p.max_score)}]" if p.counted else "[hidden: graded by `mha grade`]"
    if p.passed:
        out.marked("pass", f"{p.id}: {p.title}  {score}")
        if p.message and not brief:
            out.text(p.message, IND, role="dim")
        return
    out.marked("fail", f"{p.id}: {p.title}  {score}")
    out.text(case.summary, IND)
    if case.mistake:
        out.labelled(f"likely mistake ({case.mistake}):", case.mistake_message, "mistake")
    elif case.mistake_message:
        out.text(case.mistake_message, IND)
    elif p.hints:
        out.labelled("hint:", p.hints[0], "code")


def _quiz(out: _Out, items: list[ProblemResult]) -> None:
    blank = [p for p in items if p.cases[0].status is CaseStatus.NOT_ANSWERED]
    recorded = [p for p in items if p.cases[0].status is CaseStatus.RECORDED]
    errors: dict[str, list[ProblemResult]] = {}
    for p in items:
        if p.cases[0].status is CaseStatus.ERROR:
            errors.setdefault(p.cases[0].summary, []).append(p)
    right = [p for p in items if p.counted and p.passed]
    if len(right) > 1:  # a right answer needs no feedback: one line for all of them
        out.marked("pass", f"{len(right)} items right, {_pts(sum(p.score for p in right))} points: "
                           + ", ".join(p.id for p in right))
    # by identity: `in` on the lists would compare whole records (every case of every item), field by field
    said_apart = {id(p) for p in blank + recorded + (right if len(right) > 1 else [])}
    for p in items:
        if id(p) not in said_apart and not (p.cases[0].status is CaseStatus.ERROR
                                            and len(errors[p.cases[0].summary]) > 1):
            _quiz_item(out, p, brief=True)
    for summary, same in errors.items():
        if len(same) > 1:  # the answers file as a whole is unusable: said once
            out.marked("fail", f"{summary} ({len(same)} quiz items, 0 of "
                               f"{_pts(sum(p.max_score for p in same if p.counted))} points)")
    if blank:
        note = re.search(r"\(([^)]*)\)$", blank[0].cases[0].summary)
        why = f" ({note.group(1)})" if note else ""
        points = sum(p.max_score for p in blank if p.counted)
        names = ", ".join(p.id + ("" if p.counted else " (hidden)") for p in blank)
        out.marked("todo", f"not answered yet{why}, 0 of {_pts(points)} points: {names}")
    if recorded:
        out.text(f"{len(recorded)} hidden item{'s' if len(recorded) > 1 else ''} recorded: graded later by "
                 "`mha grade`, not in this score", "", IND)


def _written(out: _Out, items: list[ProblemResult]) -> None:
    """Written items: whether each was recorded; the text itself is the grader's to read, not echoed.
    Their points are pending, never a zero: the heading says how many are still to be given by hand."""
    out.heading(f"Written answers: plus {_pts(sum(p.max_score for p in items))} points graded by hand "
                "(pending, not in this score)")
    recorded = [p for p in items if p.cases[0].status not in (CaseStatus.ERROR, CaseStatus.NOT_ANSWERED)]
    blank = [p for p in items if p.cases[0].status is CaseStatus.NOT_ANSWERED]
    for p in items:
        if p.cases[0].status is CaseStatus.ERROR:
            out.marked("fail", f"{p.id}: {p.title}  [{_pts(p.max_score)} points by hand]")
            out.text(p.cases[0].summary, IND)
    if blank:  # one line for all of them, as for the quiz
        out.marked("todo", f"not answered yet, {_pts(sum(p.max_score for p in blank))} points by hand: "
                           + ", ".join(p.id for p in blank))
    if recorded:  # one line for all: the text is the grader's to read, not echoed
        sizes = [re.search(r"\((\d+) characters?\)", p.cases[0].summary) for p in recorded]
        out.text("recorded: " + ", ".join(p.id + (f" ({m.group(1)} characters)" if m else "")
                                          for p, m in zip(recorded, sizes)), "", IND)


def _summary(out: _Out, result: GradeResult, problems: list[ProblemResult], quiz: list[ProblemResult]) -> None:
    out.heading("Summary")
    unrun = _not_run(result)
    ran = [p for p in problems if all(p is not u for u in unrun)]
    passed = [p for p in ran if p.passed and not _on_submission(p)]
    later = [p for p in ran if p.passed and _on_submission(p)]  # right so far, the rest graded on submission
    # what to fix first, then what is done (several right problems on one line)
    behind: dict[tuple[str, ...], list[ProblemResult]] = {}  # right once these helpers are fixed: one row
    for p in ran:
        if p.right_once and not p.passed:
            behind.setdefault(p.right_once, []).append(p)
    rows = [p for p in ran if not p.passed and not p.right_once] + later + (passed if len(passed) < 2 else [])
    done = f"{len(passed)} problems" if len(passed) > 1 else ""
    width = max([len(p.id) for p in rows] + [len(done)] + [len(f"{len(g)} problems") for g in behind.values()],
                default=4)
    room = out.style.width - (8 + width + 2 + 7 + 2)
    if unrun and result.load_error is not None:  # unrun is empty without a load error
        out.marked("fail", f"{len(unrun)} problems not run, 0 of {_pts(sum(p.max_score for p in unrun))} "
                           f"points: fix attention.py line {result.load_error.line or '?'} first", "  ", "        ")
    for p in rows:
        mark = "pass" if p.passed else "todo" if p.not_implemented else "fail"
        score = f"{_pts(p.score)}/{_pts(p.max_score)}" if p.counted else "-"
        fix = ("  " + first_fix(p, room) if not p.passed
               else f"  {len(_on_submission(p))} of {len(p.cases)} cases graded on submission" if _on_submission(p) else "")
        out.marked(mark, f"{p.id:<{width}}  {score:>7}{fix}", "  ", " " * (8 + width + 2 + 7 + 2))
    for helpers, group in behind.items():
        label = group[0].id if len(group) == 1 else f"{len(group)} problems"
        score = f"{_pts(sum(p.score for p in group))}/{_pts(sum(p.max_score for p in group))}"
        out.marked("fail", f"{label:<{width}}  {score:>7}  right once {', '.join(helpers)} "
                           f"{'is' if len(helpers) == 1 else 'are'} fixed", "  ", " " * (8 + width + 2 + 7 + 2))
    if done:
        score = f"{_pts(sum(p.score for p in passed))}/{_pts(sum(p.max_score for p in passed))}"
        out.marked("pass", f"{done:<{width}}  {score:>7}  every case right", "  ", " " * (8 + width + 2 + 7 + 2))
    counted = [p for p in quiz if p.counted]
    if counted:
        status = [p.cases[0].status for p in counted]
        parts = [f"{sum(s is CaseStatus.PASSED for s in status)} right",
                 f"{sum(s in (CaseStatus.FAILED, CaseStatus.ERROR) for s in status)} wrong",
                 f"{sum(s is CaseStatus.NOT_ANSWERED for s in status)} not answered"]
        quiz_score = sum(p.score for p in counted)
        wrong = any(s in (CaseStatus.FAILED, CaseStatus.ERROR) for s in status)
        blank = all(s is CaseStatus.NOT_ANSWERED for s in status)
        # as the items above are marked: FAIL only for a wrong answer, TODO while some are unanswered
        out.marked("pass" if all(p.passed for p in counted) else "fail" if wrong else "todo",
                   f"{'quiz':<{width}}  {_pts(quiz_score) + '/' + _pts(sum(p.max_score for p in counted)):>7}  "
                   f"{len(counted)} items" + (" not answered yet" if blank else f": {', '.join(parts)}"),
                   "  ", " " * (8 + width + 2 + 7 + 2))
    hidden = len(quiz) - len(counted)
    if hidden and not any(p.cases[0].status is CaseStatus.RECORDED for p in quiz):  # else the quiz said it
        out.text(f"{hidden} hidden quiz item(s) are graded later and not in this score", "  ")
    done_p = sum(p.passed and not _on_submission(p) for p in problems)
    done_q = sum(p.passed for p in counted)
    quiz_part = f" and {done_q} of {len(counted)} quiz items" if counted else ""
    out.lines.append("")
    graded_later = sum(len(_on_submission(p)) for p in problems)
    out.text(f"Score: {_pts(result.score)}/{_pts(result.max_score)} ({result.percent:.0f}%), {done_p} of {len(problems)} "
             f"problems{quiz_part} fully correct" + ("" if result.include_hidden else " (public cases only)")
             + (f"; {graded_later} case{'s' if graded_later > 1 else ''} graded on submission" if graded_later else ""),
             role="bold")


UNWRAPPED = Style(width=100_000)  # for platforms that wrap text themselves (Gradescope, GitHub, otter)


def problem_lines(problem: ProblemResult, style: Style | None = None) -> list[str]:
    """One problem's block (its first line is the PASS/FAIL header), as other reports quote it:
    unwrapped unless `style` says otherwise."""
    out = _Out(style or UNWRAPPED, grid_lines)
    if problem.quiz:
        _quiz_item(out, problem)
    else:
        _problem(out, problem, True)
    return out.lines


def why(problem: ProblemResult) -> str:
    """Why a problem that did not pass lost its points, in one line: the problem's note (an import
    failure, a missing function, a time-out) or its first failing case's summary; "" if it passed."""
    if problem.passed:
        return ""
    if problem.not_implemented:
        return NOT_IMPLEMENTED
    failing = next(c for c in problem.cases if not c.passed and c.status is not CaseStatus.ON_SUBMISSION)
    return problem.message or failing.summary or failing.status.value


def feedback(problem: ProblemResult) -> str:
    """A problem's block without its header line, for reports that name the problem themselves
    (Gradescope, GitHub): never empty, and "All cases passed." only when every case did."""
    body = "\n".join(problem_lines(problem)[1:]).strip()
    return body or why(problem) or "All cases passed."


def case_lines(case: CaseResult, style: Style | None = None) -> list[str]:
    """One case's lines: ok, or FAIL with its inputs, expected vs got and a likely mistake (unwrapped)."""
    out = _Out(style or UNWRAPPED, grid_lines)
    if case.passed:
        out.text(f"ok    {case.name}", "    ")
        return out.lines
    _case(out, case)
    if case.mistake:
        out.labelled(f"likely mistake ({case.mistake}):", case.mistake_message, "mistake")
    return out.lines


def one_case_lines(result: GradeResult, problem: ProblemResult, case: CaseResult,
                   style: Style | None = None) -> list[str]:
    """One case of `problem` as `mha check` words it, for a runner that reports each case on its
    own (the pytest plugin): what stopped attention.py's import, or the problem's note when it is
    the case's cause; the case; its likely mistake, else the problem's first hint. A quiz item is
    its block of the report."""
    if problem.quiz:
        return problem_lines(problem, style)
    out = _Out(style or UNWRAPPED, grid_lines)
    if result.load_error is not None and case.summary == NOT_IMPORTED:
        _import_failure(out, result.load_error)
        return out.lines
    if problem.message and problem.message != case.summary and not case.passed:
        out.text(problem.message, IND)
    out.lines += case_lines(case, style)
    if not case.passed and not case.mistake and problem.hints and _hint_helps([case]):
        out.labelled("hint:", problem.hints[0], "code")
    return out.lines


def render(result: GradeResult, style: Style | None = None, show_hints: bool = True,
           figure: Figure = grid_lines) -> str:
    """The report as text; `style` sets colour, width and shade characters (default: plain, 100
    columns); `figure` draws a case's weight grids as lines (default: shade blocks)."""
    out = _Out(style or Style(), figure)
    out.lines += [out.style.paint(result.title, "bold"), "=" * len(result.title)]
    if not result.include_hidden:
        out.text("Public cases only: hidden cases and hidden quiz items are graded later by `mha grade`.",
                 role="dim")
    error = result.load_error
    notes = [m for m in result.messages if error is None or m != error.describe()]
    for note in notes:
        out.text(note)
    problems = [p for p in result.problems if not p.quiz]
    quiz = [p for p in result.problems if p.quiz and not p.manual]
    written = [p for p in result.problems if p.manual]
    unrun = _not_run(result)
    ran = [p for p in problems if all(p is not u for u in unrun)]
    if error is not None and problems:
        _load_error(out, error, problems, unrun)
    if ran:
        out.heading("Problems")
        passed = [p for p in ran if p.passed and not _on_submission(p)]
        behind: dict[tuple[str, ...], list[ProblemResult]] = {}  # right once these helpers are fixed
        for p in ran:
            if p.right_once and not p.passed:
                behind.setdefault(p.right_once, []).append(p)
        for p in ran:
            if p.right_once and not p.passed:
                group = behind[p.right_once]
                if p is group[0]:  # one line for every problem that only its helpers break
                    _right_once(out, p.right_once, group)
            elif not (len(passed) > 1 and any(p is q for q in passed)):
                _problem(out, p, show_hints)
        if len(passed) > 1:  # a right problem needs no feedback: one line for all (every one not named above)
            out.marked("pass", f"the {len(passed)} other problems: every case right" if len(passed) < len(ran)
                       else f"all {len(passed)} problems: every case right")
    if quiz:
        out.heading("Quiz (answers.yaml)")
        _quiz(out, quiz)
    if written:
        _written(out, written)
    _summary(out, result, problems, quiz)
    return "\n".join(out.lines) + "\n"
