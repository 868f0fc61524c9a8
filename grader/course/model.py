"""Frozen data types for an assignment: problems, their cases, comparisons and hints."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from ..records import record
from .functions import FunctionSpec


class Visibility(Enum):
    """Who sees a case's details: public cases show expected vs got (unless the case sets
    `reveal: false`), hidden ones never do."""

    PUBLIC = "public"
    HIDDEN = "hidden"


class CompareKind(Enum):
    """How a student's return value is compared with the expected one."""

    ALLCLOSE = "allclose"          # float arrays (or pairs of them) within rtol/atol
    EQUAL = "equal"                # integers, exactly
    SHAPES = "shapes"              # dict of shape tuples, exactly
    HEAD_PATTERN = "head_pattern"  # (W_Q, W_K) judged by the attention weights they produce
    HEAD_PAIR = "head_pair"        # (W_Q, W_K) of two heads: head 0 previous-token, head 1 sink


# Defaults chosen so a correct float32 implementation passes (float32 eps is 1.2e-7).
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6


@record
class Comparison:
    kind: CompareKind
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    pattern: str | None = None     # head_pattern: "previous" or "sink"
    min_weight: float = 0.9        # head_pattern: weight the target position must get


@record
class Case:
    name: str
    args: Mapping[str, Any]        # parameter name -> literal or generator spec (validated)
    visibility: Visibility
    weight: float = 1.0
    expect: Any = None
    has_expect: bool = False
    raises: str | None = None      # expected exception class name, e.g. "ValueError"
    line: int | None = None
    let: Mapping[str, Any] = field(default_factory=dict)  # integer variables for shapes
    seed: int | None = None
    reveal: bool = True            # False: a failing public case shows what was got, never the expected answer

    @property
    def hidden(self) -> bool:
        return self.visibility is Visibility.HIDDEN


@record
class Mistake:
    """A named misconception: a known-wrong implementation (a bug) and what to tell the student."""

    id: str
    message: str
    bug: str                       # name of a function of the course code: a bug or a detector
    line: int | None = None
    detector: bool = False         # a predicate (args, answer) -> bool rather than a wrong implementation


@record
class Problem:
    id: str
    title: str
    points: float
    function: FunctionSpec
    prompt: str
    compare: Comparison
    cases: tuple[Case, ...]
    hints: tuple[str, ...] = ()
    mistakes: tuple[Mistake, ...] = ()
    timeout: float | None = None   # seconds for all of this problem's cases
    path: Path | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # per-student integers ({name} / $name)
    code: Path | None = None       # the course code holding the reference and the named mistakes

    def visible_cases(self, include_hidden: bool) -> tuple[Case, ...]:
        return self.cases if include_hidden else tuple(c for c in self.cases if not c.hidden)


class QuizKind(Enum):
    """The kinds of quiz item, each of which maps onto a Canvas QTI and a Moodle question type."""

    MULTIPLE_CHOICE = "multiple_choice"    # exactly one correct choice; answered with a letter
    MULTIPLE_ANSWERS = "multiple_answers"  # one or more correct choices; answered with a list of letters
    NUMERIC = "numeric"                    # a number within an absolute tolerance
    WRITTEN = "written"                    # a short text answer, graded by hand against a rubric


# Characters of a written answer accepted: a few sentences, with room to spare.
MAX_WRITTEN = 2000

# Absolute tolerance of a numeric item that does not set one.
DEFAULT_TOLERANCE = 1e-6

# A number in a quiz file: a literal, the name of one of the item's params, or the name of an
# answer function of the course code (called with the params it names). Never text to evaluate.
NumberSource = float | str


@record
class Choice:
    """One choice of a choice item. `letter` is its position (a, b, c...): in the file for the item
    itself, in the student's own order for a seed's draw (quiz.choice_order)."""

    letter: str
    text: str
    correct: bool
    feedback: str                  # why this choice is right or wrong
    mistake: str | None = None     # misconception shown by choosing it (wrong) or leaving it out (correct)
    line: int | None = None


@record
class WrongValue:
    """A known-wrong numeric answer and the misconception that produces it."""

    value: NumberSource
    feedback: str
    mistake: str
    line: int | None = None


@record
class RubricEntry:
    """One criterion of a written item's rubric and the points a grader gives for meeting it."""

    points: float
    text: str
    line: int | None = None


@record
class DrawnWrongValue(WrongValue):
    """A known-wrong value as one seed draws it: its number computed, its feedback filled in."""

    value: float


@record
class QuizItem:
    id: str
    title: str
    kind: QuizKind
    points: float
    visibility: Visibility
    prompt: str                    # Markdown with {param} placeholders
    choices: tuple[Choice, ...] = ()
    answer: NumberSource | None = None   # numeric items
    tolerance: float = DEFAULT_TOLERANCE
    feedback: str = ""             # numeric items: why the right answer is right
    wrong: tuple[WrongValue, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)  # integer variables, `let` grammar
    hint: str | None = None
    line: int | None = None
    code: Path | None = None       # the course code holding the answer functions
    rubric: tuple[RubricEntry, ...] = ()  # written items: what a grader looks for
    shuffle: bool = True           # choice items: False pins the choices in the file's order for everyone

    @property
    def hidden(self) -> bool:
        return self.visibility is Visibility.HIDDEN

    @property
    def manual(self) -> bool:
        """Graded by hand (a written item): its points are never in the automatic score."""
        return self.kind is QuizKind.WRITTEN


@record
class Quiz:
    title: str
    items: tuple[QuizItem, ...]
    path: Path | None = None
    optional: tuple[QuizItem, ...] = ()  # items assignment.yaml switches off: validated, never asked

    @property
    def max_score(self) -> float:
        """The automatic points: written items are graded by hand and left out."""
        return float(sum(i.points for i in self.items if not i.manual))

    @property
    def manual_points(self) -> float:
        """The points reserved for written items, which a grader gives by hand."""
        return float(sum(i.points for i in self.items if i.manual))

    def item(self, item_id: str) -> QuizItem | None:
        return next((i for i in self.items if i.id == item_id), None)

    def with_optional(self) -> Quiz:
        """This quiz with its optional items switched on, in the file's order."""
        items = sorted((*self.items, *self.optional), key=lambda item: item.line or 0)
        return replace(self, items=tuple(items), optional=())


@record
class Course:
    title: str
    root: Path
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    quiz: Quiz | None = None
    code: Path | None = None       # the course's own module (assignment.yaml 'code')
    optional: tuple[Problem, ...] = ()  # problems assignment.yaml switches off: validated, never graded

    @property
    def max_score(self) -> float:
        return float(sum(p.points for p in self.problems)) + (self.quiz.max_score if self.quiz else 0.0)

    def with_optional(self) -> Course:
        """This course with every optional problem and quiz item switched on (in file order after
        the core), as an instructor who lists them all would have it: what the contract tests check."""
        quiz = self.quiz.with_optional() if self.quiz is not None else None
        return replace(self, problems=self.problems + self.optional, quiz=quiz, optional=())

    def problem(self, problem_id: str) -> Problem | None:
        return next((p for p in self.problems if p.id == problem_id), None)


@record
class Draw:
    """One item with its numbers drawn from a seed: what a student sees and what is graded."""

    item: QuizItem
    seed: int
    params: Mapping[str, int]
    prompt: str
    choices: tuple[Choice, ...]     # text and feedback with the params filled in, in the seed's own order
    answer: float | None            # numeric items
    feedback: str
    wrong: tuple[DrawnWrongValue, ...]
    hint: str | None

    @property
    def number(self) -> float:
        """A numeric item's answer; an InternalError where it is not known (another kind of item,
        or a hidden one in a student's seed cases)."""
        if self.answer is None:
            from ..errors import InternalError
            raise InternalError(f"quiz item {self.item.id!r} has no numeric answer here")
        return self.answer

    @property
    def correct_letters(self) -> tuple[str, ...]:
        return tuple(c.letter for c in self.choices if c.correct)
