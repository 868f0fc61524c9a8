"""Grade a student's `answers.yaml` against the concept quiz.

The file is untrusted student data: it is read with a size bound, parsed by the safe,
line-tracking YAML loader, inspected only shallowly (its values are shown through a bounded
repr) and never evaluated. Every quiz item becomes a ProblemResult with one case, so every
report shows quiz items like problems. A wrong choice or a known-wrong number sets
CaseResult.mistake to the misconception's id and shows its feedback.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from ..course.model import MAX_WRITTEN, Choice, Draw, Quiz, QuizKind
from ..course.yamlio import BriefRepr, line_of, load_yaml
from ..errors import SpecError
from ..records import record
from ..sandbox.student_text import StudentText, student_text
from .results import CaseResult, CaseStatus, ProblemResult
from .scoring import choices_credit, in_range
from .student_files import StudentFile, open_folder, read_student_file

__all__ = ["ANSWERS_NAME", "MAX_BYTES", "MAX_WRITTEN", "RECORDED_BY_HAND", "AnswerSheet", "QuizResults",
           "read_answers", "grade_item", "grade_quiz", "your_numbers"]

ANSWERS_NAME = "answers.yaml"
RECORDED_BY_HAND = "recorded, graded by hand"
MAX_BYTES = 64 * 1024
# values the file may stand for once its aliases are written out: more than MAX_BYTES of YAML
# can write without aliases, far fewer than an alias bomb's
MAX_VALUES = 1 << 16
NOT_ANSWERED = "not answered yet"


_repr = BriefRepr()
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxlevel = 40, 40, 4, 4, 2


class _BadAnswer(ValueError):
    """An answer of the wrong form; the message says what was expected and what was got."""


def _shown(value: Any) -> str:
    """A short description of a student's value; bounded, so an alias bomb cannot blow it up."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10 ** 15:  # {:g} of a huge int overflows
        return f"a number of {len(str(abs(value)))} digits"
    if isinstance(value, (int, float)):
        return f"the number {value:g}"
    kind = "a list " if isinstance(value, list) else "a mapping " if isinstance(value, dict) else \
        "" if isinstance(value, str) else f"{type(value).__name__} "
    text = _repr.repr(value)
    return kind + (text if len(text) <= 60 else text[:57] + "...")


@record
class AnswerSheet:
    """What a student wrote: raw answers by item id, with their lines, or why the file is unusable."""

    answers: Mapping[str, Any]
    lines: Mapping[str, int | None]
    error: str | None = None         # the whole file is unusable (too large, invalid YAML...)
    missing: bool = False            # there is no answers file at all
    unknown: tuple[str, ...] = ()    # one note per answer to an item that does not exist
    duplicates: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # item id -> its lines: it costs that item


def read_answers_file(path: Path) -> StudentFile:
    """answers.yaml at `path` read as any student file (student_files): no link, a regular
    file, at most MAX_BYTES. The folder holding it is the caller's."""
    path = Path(path)
    try:
        folder = open_folder(path.parent, follow=True)
    except OSError:
        return StudentFile(path.name)
    try:
        return read_student_file(folder, path.name, MAX_BYTES)
    finally:
        os.close(folder)


def read_answers(path: Path | StudentFile, item_ids: Iterable[str]) -> AnswerSheet:
    """Read answers.yaml (a path, or the file already read); never raises for anything the student wrote."""
    file = path if isinstance(path, StudentFile) else read_answers_file(path)
    name = file.name
    if file.problem is not None:
        return AnswerSheet({}, {}, error=file.problem)
    raw = file.data
    if raw is None:  # neither read nor refused: there is no answers file
        return AnswerSheet({}, {}, missing=True)
    try:
        node = load_yaml(Path(name), raw.decode("utf-8"), max_values=MAX_VALUES, duplicates=True)
    except UnicodeDecodeError:
        return AnswerSheet({}, {}, error=f"{name} is not UTF-8 text")
    except SpecError as exc:
        where = f"{name}:{exc.line}" if exc.line is not None else name
        return AnswerSheet({}, {}, error=f"{where}: {exc.message}")
    except RecursionError:
        return AnswerSheet({}, {}, error=f"{name} is nested too deeply")
    if node is None:
        return AnswerSheet({}, {})
    if not isinstance(node, dict):
        return AnswerSheet({}, {}, error=f"{name}:{line_of(node, default=1)}: must map quiz item ids to answers, "
                                         f"like `pruning: b` (got {_shown(node)})")
    nested = _nested_duplicate(node.values())
    if nested is not None:  # inside one answer: that answer's form is unclear, and so is the file's
        key, lines = nested
        return AnswerSheet({}, {}, error=f"{name}:{lines[1]}: duplicate key {_repr.repr(key)}")
    known = list(item_ids)
    unknown = []
    for key in node:
        if key not in known:
            import difflib  # only for a misspelt item id
            close = difflib.get_close_matches(str(key), known, n=1)
            advice = f"did you mean {close[0]!r}?" if close else "see `mha list`"
            unknown.append(f"{name}:{line_of(node, key)}: unknown quiz item {_repr.repr(key)} ({advice})")
    answers = {k: v for k, v in node.items() if k in known}
    twice = {k: tuple(lines) for k, lines in getattr(node, "duplicates", {}).items() if k in known}
    return AnswerSheet(answers, {k: line_of(node, k) for k in answers}, unknown=tuple(unknown), duplicates=twice)


def _nested_duplicate(values: Iterable[Any]) -> tuple[Any, list[int]] | None:
    """The first key written twice in a mapping inside the answers, with its lines (None if none)."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, lines in getattr(value, "duplicates", {}).items():
                return key, lines
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


# ---------------------------------------------------------------- reading one answer

def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def _letter(value: Any, choices: tuple[Choice, ...], expected: str, where: str = "") -> str:
    last = choices[-1].letter
    if isinstance(value, str) and re.fullmatch(r"\s*[A-Za-z]\s*", value):
        letter = value.strip().lower()
        if letter > last:
            raise _BadAnswer(f"answer must be {expected} (got {value.strip()!r}{where}: there is no choice {letter})")
        return letter
    raise _BadAnswer(f"answer must be {expected} (got {_shown(value)}{where})")


def _parse(v: Draw, value: Any) -> Any:
    """The answer in its graded form (a letter, a tuple of letters, a float), or _BadAnswer."""
    kind, span = v.item.kind, f"a to {v.choices[-1].letter}" if v.choices else ""
    if kind is QuizKind.MULTIPLE_CHOICE:
        expected = f"one letter from {span}"
        if isinstance(value, list):
            raise _BadAnswer(f"answer must be {expected} (got {_shown(value)}); this item has one correct choice")
        return _letter(value, v.choices, expected)
    if kind is QuizKind.MULTIPLE_ANSWERS:
        expected = f"a list of letters from {span}, like [a, c]"
        if isinstance(value, str):  # "a, c" or a single letter
            value = [part for part in re.split(r"[\s,]+", value) if part]
        if not isinstance(value, list):
            raise _BadAnswer(f"answer must be {expected} (got {_shown(value)})")
        letters = [_letter(x, v.choices, expected, " in the list") for x in value]
        twice = next((x for i, x in enumerate(letters) if x in letters[:i]), None)
        if twice:
            raise _BadAnswer(f"answer lists choice {twice} twice")
        return tuple(sorted(letters))
    if kind is QuizKind.WRITTEN:
        if not isinstance(value, str):
            raise _BadAnswer(f"answer must be text in your own words, in quotes (got {_shown(value)})")
        text = value.strip()
        if len(text) > MAX_WRITTEN:
            raise _BadAnswer(f"answer is {len(text)} characters long; at most {MAX_WRITTEN} are accepted")
        return student_text(text, MAX_WRITTEN, lines=True)  # inert from here on: a lone surrogate is an escape
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", value):
        value = float(value)  # a quoted number is still a number
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _BadAnswer(f"answer must be a number, like 0.25 (got {_shown(value)})")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not math.isfinite(number):
        raise _BadAnswer(f"answer must be a finite number (got {value if isinstance(value, float) else _shown(value)})")
    return number


# ---------------------------------------------------------------- judging

def your_numbers(v: Draw) -> str:
    """The item's numbers as this student sees them ("your numbers: p=75"), or "" if it has none."""
    return "your numbers: " + ", ".join(f"{k}={v.params[k]}" for k in sorted(v.params)) if v.params else ""


def _result(v: Draw, status: CaseStatus, *, hidden: bool, name: str = "answer", summary: str = "",
            mistake: str | None = None, mistake_message: str = "", message: str = "",
            credit: float | None = None, written: StudentText | None = None) -> ProblemResult:
    item = v.item
    case = CaseResult(name=name, hidden=hidden, weight=1.0, status=status, summary=summary,
                      mistake=mistake, mistake_message=mistake_message, credit=credit)
    numbers = your_numbers(v)  # graded on these: a student who answered other numbers sees why
    message = f"{message} ({numbers})" if message and numbers else message or numbers
    return ProblemResult(id=item.id, title=item.title, max_score=item.points, cases=(case,),
                         hints=(v.hint,) if v.hint and status is CaseStatus.FAILED else (), message=message,
                         quiz=True, counted=not item.manual, manual=item.manual, written=written)


def _judge_choices(v: Draw, chosen: tuple[str, ...], hidden: bool) -> ProblemResult:
    if chosen == v.correct_letters:
        return _result(v, CaseStatus.PASSED, hidden=hidden,
                       message=" ".join(c.feedback for c in v.choices if c.correct))
    picked_wrong = [c for c in v.choices if c.letter in chosen and not c.correct]
    left_out = [c for c in v.choices if c.correct and c.letter not in chosen]
    if v.item.kind is QuizKind.MULTIPLE_CHOICE:
        summary, feedback = f"you chose {chosen[0]}", picked_wrong[0].feedback
    else:  # the feedback of each false statement chosen; true ones left out are counted, not named
        summary = f"you chose [{', '.join(chosen)}]"
        if left_out:
            summary += f"; {len(left_out)} true statement{'s' if len(left_out) > 1 else ''} left out"
        feedback = " ".join(f"({c.letter}) {c.feedback}" for c in picked_wrong) or \
            "Every statement you chose is true, but you left out at least one more true statement."
    mistake = next((c.mistake for c in picked_wrong + left_out if c.mistake), None)
    credit = None
    if v.item.kind is QuizKind.MULTIPLE_ANSWERS:  # partial credit with penalty (grading/scoring.py)
        credit = float(choices_credit(chosen, v.correct_letters))
        summary += f"; partial credit {credit:.0%}" if credit else ""
    return _result(v, CaseStatus.FAILED, hidden=hidden, summary=summary, mistake=mistake, mistake_message=feedback,
                   credit=credit)


def _judge_number(v: Draw, got: float, hidden: bool) -> ProblemResult:
    tolerance = v.item.tolerance
    if in_range(got, v.number, tolerance):  # the range every export writes (grading/scoring.py)
        return _result(v, CaseStatus.PASSED, hidden=hidden, message=v.feedback)
    known = next((w for w in v.wrong if abs(got - w.value) <= tolerance), None)
    numbers = your_numbers(v)  # the student may have answered for other numbers than their own
    return _result(v, CaseStatus.FAILED, hidden=hidden,
                   summary=f"{got:g} is not the answer" + (f" ({numbers})" if numbers else ""),
                   mistake=known.mistake if known else None, mistake_message=known.feedback if known else "")


def grade_item(v: Draw, value: Any, line: int | None, *, include_hidden: bool) -> ProblemResult:
    """One item's result. Without include_hidden, a hidden item's answer is only checked for form."""
    hidden = v.item.hidden and include_hidden
    if _blank(value):
        return _result(v, CaseStatus.NOT_ANSWERED, hidden=hidden, summary=NOT_ANSWERED)
    try:
        answer = _parse(v, value)
    except _BadAnswer as exc:
        return _result(v, CaseStatus.ERROR, hidden=hidden, summary=f"{ANSWERS_NAME}:{line}: {exc}")
    if v.item.manual:
        return _result(v, CaseStatus.RECORDED, hidden=False, name="written answer", written=answer,
                       summary=f"{RECORDED_BY_HAND} ({len(answer)} characters)")
    if v.item.hidden and not include_hidden:
        return _result(v, CaseStatus.RECORDED, hidden=False, name="answer format",
                       message="answer recorded; this hidden item is graded by `mha grade`")
    if v.item.kind is QuizKind.NUMERIC:
        return _judge_number(v, answer, hidden)
    return _judge_choices(v, answer if isinstance(answer, tuple) else (answer,), hidden)


def _no_file(result: ProblemResult, name: str) -> ProblemResult:
    case = replace(result.cases[0], summary=f"{NOT_ANSWERED} (no {name} beside attention.py)")
    return replace(result, cases=(case,))


@record
class QuizResults:
    items: tuple[ProblemResult, ...]
    messages: tuple[str, ...] = ()   # notes about the answers file as a whole (unknown item ids)


def grade_quiz(quiz: Quiz, answers_path: Path, *, seed: int, include_hidden: bool = True,
               item_ids: Iterable[str] | None = None) -> QuizResults:
    """Grade `answers_path` on the quiz items (all, or those in item_ids) drawn for `seed`."""
    from ..course.quiz import draw  # draws numbers and computes answers: the autograder's side only
    wanted = None if item_ids is None else set(item_ids)
    draws = [draw(i, seed) for i in quiz.items if wanted is None or i.id in wanted]
    known = [i.id for i in (*quiz.items, *quiz.optional)]  # an answer to a switched-off item: not graded, not an error
    return grade_draws(draws, answers_path, known, include_hidden=include_hidden)


def grade_draws(draws: Iterable[Draw], answers: Path | StudentFile, known_ids: Iterable[str], *,
                include_hidden: bool = True) -> QuizResults:
    """Grade the answers (answers.yaml's path, or the file already read) on items whose numbers
    are already drawn (as the student bundle stores them)."""
    draws = list(draws)
    if not draws:
        return QuizResults(())
    sheet = read_answers(answers, list(known_ids))
    results = []
    for v in draws:
        item = v.item
        if sheet.error is not None:
            results.append(_result(v, CaseStatus.ERROR, hidden=item.hidden and include_hidden, summary=sheet.error))
        elif item.id in sheet.duplicates:  # two answers to one item: that item only is not graded
            lines = sheet.duplicates[item.id]
            on = ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"
            results.append(_result(v, CaseStatus.ERROR, hidden=item.hidden and include_hidden,
                                   summary=f"{answers.name}:{lines[1]}: duplicate key {item.id!r}, on lines {on}: "
                                           f"answer each item once (keep one line)"))
        else:
            result = grade_item(v, sheet.answers.get(item.id), sheet.lines.get(item.id), include_hidden=include_hidden)
            results.append(_no_file(result, answers.name) if sheet.missing else result)
        if item.hidden and not include_hidden:  # graded by `mha grade` only: left out of this score
            results[-1] = replace(results[-1], counted=False)
    return QuizResults(tuple(results), sheet.unknown)
