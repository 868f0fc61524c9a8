"""Results of grading: plain frozen data that reporters read; the scores by the rules of scoring.py."""
from __future__ import annotations

from dataclasses import field
from enum import Enum
from functools import cached_property

from ..records import record
from ..sandbox.student_text import EMPTY, StudentText, student_text
from .scoring import points_earned, weighted_share


def one_line(text: str) -> StudentText:
    """A line of the grader's own words holding student text (an exception's message...), made
    inert as `student_text` makes it (line breaks and every control, bidirectional override and
    lone surrogate as visible escapes), so it cannot start a line of its own in a report (a fake
    "Score: 142/142" or "PASS" line) nor drive a terminal. Not cut short: its parts were."""
    return student_text(text, limit=max(len(text), 1))


NOT_IMPORTED = "attention.py could not be imported"  # the summary of a case whose process failed its import
# no answer is None: a function that returns it has most likely lost its `return`
RETURNED_NONE = "returned None: missing return?"


class CaseStatus(Enum):
    PASSED = "passed"
    FAILED = "failed"              # returned a wrong answer
    ERROR = "error"                # raised an exception or returned something unreadable
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    NOT_IMPLEMENTED = "not implemented"
    NOT_ANSWERED = "not answered"  # a quiz item left blank
    RECORDED = "recorded"          # a hidden quiz item's answer in `mha check`: well formed, graded later
    # a withheld case in the student bundle's `mha check` (its expected value is not there): the
    # answer has the right form, and its value is graded on submission; not in this score
    ON_SUBMISSION = "graded on submission"


class Status(Enum):
    """A whole submission's outcome, as the gradebook and the class report show it."""

    GRADED = "graded"
    SYNTAX_ERROR = "syntax error"      # attention.py is not valid Python: no problem could run
    IMPORT_FAILURE = "import failure"  # importing attention.py raised or stopped the process
    TIMEOUT = "timeout"                # the import or some problem ran out of time
    EMPTY = "empty"                    # nothing to run: no attention.py, or one with no code
    ERROR = "error"                    # the grader itself failed on this submission


@record
class LoadError:
    """Why attention.py could not be imported: told once, with the line it points at."""

    kind: StudentText          # "syntax", "timeout", "crashed" or the exception's type name
    message: StudentText
    line: int | None = None
    column: int | None = None  # 1-based, syntax errors only
    source: StudentText = EMPTY  # the text of that line of attention.py

    def describe(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        if self.kind == "syntax":
            return f"attention.py has a syntax error{where}: {self.message}"
        if self.kind == "timeout":
            return "importing attention.py did not finish within the time limit"
        if self.kind == "crashed":
            return f"the process stopped while importing attention.py: {self.message}"
        return f"importing attention.py raised {self.kind}{where}: {self.message}"


@record
class WeightGrid:
    """A public case's attention weights beside the expected ones (rows: queries, columns: keys),
    rounded and cut to a few rows and columns, for a picture in a report."""

    label: str                                 # e.g. "head 0"; "" for a single grid
    got: tuple[tuple[float, ...], ...]
    expected: tuple[tuple[float, ...], ...]
    shape: tuple[int, int] = (0, 0)            # the full size, before it was cut


@record
class CaseResult:
    """One case's outcome. For hidden cases `detail` and `inputs` are always empty."""

    name: str
    hidden: bool
    weight: float
    status: CaseStatus
    summary: str = ""          # the kind of failure, safe for hidden cases
    detail: str = ""           # expected vs got (public cases only)
    inputs: str = ""           # short input summary (public cases only)
    mistake: str | None = None  # id of the named misconception the answer matches
    mistake_message: str = ""
    grids: tuple[WeightGrid, ...] = ()  # returned weights vs expected ones (failing public cases only)
    credit: float | None = None  # partial credit of a case that did not pass (grading/scoring.py)

    @property
    def passed(self) -> bool:
        return self.status is CaseStatus.PASSED

    @property
    def earned(self) -> float:
        """The share of the case's weight earned: 1 when it passed, else its partial credit (or 0)."""
        return 1.0 if self.passed else self.credit or 0.0


@record
class ProblemResult:
    id: str
    title: str
    max_score: float
    cases: tuple[CaseResult, ...]
    hints: tuple[str, ...] = ()
    message: str = ""          # problem-level note (not implemented, import failed...)
    stdout: StudentText = EMPTY  # what its public cases printed (several lines)
    counted: bool = True       # False: not graded here (a hidden quiz item in `mha check`, a written
                               # item graded by hand), not in the score
    quiz: bool = False         # a quiz item (answers.yaml), not a coding problem
    manual: bool = False       # a written item: graded by hand, never in the automatic score
    written: StudentText | None = None  # a written item's text (several lines; still escape it for HTML)
    right_once: tuple[str, ...] = ()  # the student's failing helpers it calls: graded again with the
                                      # course's in their place, it passes every public case

    # A result never changes once made (a record is frozen), so what is worked out of its cases is
    # kept on first use: a class's feedback, record and report ask a problem's score some five times.
    @cached_property
    def fraction(self) -> float:
        """The weighted share earned over the cases graded here (a case graded on submission is not)."""
        return weighted_share((c.weight, c.earned) for c in self.cases if c.status is not CaseStatus.ON_SUBMISSION)

    @cached_property
    def score(self) -> float:
        return points_earned(self.max_score, self.fraction)

    @property
    def passed(self) -> bool:
        return all(c.passed or c.status is CaseStatus.ON_SUBMISSION for c in self.cases)

    @property
    def not_implemented(self) -> bool:
        return bool(self.cases) and all(c.status is CaseStatus.NOT_IMPLEMENTED for c in self.cases)

    @property
    def mistakes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.mistake for c in self.cases if c.mistake))

    @property
    def pending(self) -> bool:
        """A written item: its points are given by hand, so here it has no score at all (not 0)."""
        return self.manual


@record
class GradeResult:
    title: str
    submission: StudentText    # the submission's name (a path, a student id): the student may have chosen it
    problems: tuple[ProblemResult, ...]
    execution_time: float = 0.0
    messages: tuple[str, ...] = field(default_factory=tuple)
    include_hidden: bool = True
    load_error: LoadError | None = None
    empty: bool = False        # attention.py has no code at all (blank, or comments only)

    @cached_property
    def score(self) -> float:
        return round(sum(p.score for p in self.problems if p.counted), 4)

    @cached_property
    def max_score(self) -> float:
        return round(sum(p.max_score for p in self.problems if p.counted), 4)

    @property
    def passed(self) -> bool:
        """Every problem and item graded here passed; an item only recorded here (not scored) passes
        unless its answer has the wrong form."""
        return all(p.passed if p.counted else all(c.status is not CaseStatus.ERROR for c in p.cases)
                   for p in self.problems)

    @property
    def status(self) -> Status:
        if self.empty:
            return Status.EMPTY
        if self.load_error is not None:
            return {"syntax": Status.SYNTAX_ERROR, "timeout": Status.TIMEOUT}.get(self.load_error.kind,
                                                                                 Status.IMPORT_FAILURE)
        if any(c.status is CaseStatus.TIMEOUT for p in self.problems for c in p.cases):
            return Status.TIMEOUT
        return Status.GRADED

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    @property
    def pending_points(self) -> float:
        """The points of the written items, which a grader gives by hand: in no automatic score."""
        return round(sum(p.max_score for p in self.problems if p.pending), 4)
