"""The concept quiz: load and validate `quiz.yaml`, draw an item's numbers from a seed, render it.

A quiz file is a mapping with an optional `title` and a list of `items`:

    - id: distributions_one_head           # also the key of the answer in answers.yaml
      title: One head, one query
      kind: numeric                        # multiple_choice | multiple_answers | numeric | written
      points: 2
      visibility: public                   # public: `mha check` grades it; hidden: `mha grade` only
      params: {W: {choice: [2, 64, 128]}}  # integer variables, the grammar of a case's `let`
      prompt: A head has value width {W}.  # Markdown; {name} is a param, {{ and }} are braces
      answer: one_head_distributions       # a number, a param, or an answer function of the course code
      tolerance: 0.001                     # absolute (default 1e-6)
      feedback: Why the answer is right.
      wrong:                               # known-wrong values and the misconception behind each
        - {value: W, mistake: counted_value_width, feedback: Why W is wrong.}
      hint: Shown after a wrong answer that no known-wrong value explains.

Choice items list `choices:` of {text, correct, feedback, mistake}, lettered as `choice_order` says;
every wrong choice names its misconception in `mistake`. A `written` item asks for a few
sentences and lists a `rubric:` of {points, text} whose points add up to the item's: it is
collected with the submission and graded by hand, never counted in the automatic score. No number is ever evaluated from text:
an answer is computed by a named function of the course's code (assignment.yaml `code:`), called
with the item's params as keyword arguments.
Grading a student's answers lives in grader.grading.answers.

Each student sees and answers a choice item's options in an order of their own, lettered a, b,
c... in that order (`choice_order`: from their seed, so only with a course secret; the default
seed keeps the file's order). `shuffle: false` pins an item's choices in the file's order for
everyone, for options that refer to each other or are ordered on purpose.
"""
from __future__ import annotations

import functools
import inspect
import math
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import starter
from ..errors import InternalError, SpecError, SpecErrors
from ..starter import ANSWER_FORMS
from . import generators as gen
from .code import CourseCode, course_function, course_of
from .fields import Errors, got, load_mapping, number_field, text_field, unknown_keys
from .model import (
    Choice,
    Draw,
    DrawnWrongValue,
    NumberSource,
    Quiz,
    QuizItem,
    QuizKind,
    RubricEntry,
    Visibility,
    WrongValue,
)
from .yamlio import line_of

__all__ = ["DEFAULT_SEED", "ANSWER_FORMS", "Draw", "load_quiz", "draw_params",
           "fill", "choice_order", "draw", "render_item", "answer_key", "answers_template", "check_quiz", "quiz_errors"]

DEFAULT_SEED = 0  # the seed everyone gets until a per-student one is passed
QUIZ_KEYS = {"title", "items"}
ITEM_KEYS = {"id", "title", "kind", "points", "visibility", "prompt", "params", "hint",
             "choices", "answer", "tolerance", "feedback", "wrong", "rubric", "shuffle"}
REQUIRED_ITEM_KEYS = ("id", "title", "kind", "points", "visibility", "prompt")
CHOICE_KEYS = {"text", "correct", "feedback", "mistake"}
WRONG_KEYS = {"value", "feedback", "mistake"}
RUBRIC_KEYS = {"points", "text"}
_NUMERIC_KEYS = ("answer", "tolerance", "feedback", "wrong")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_PLACEHOLDER = gen.PLACEHOLDER
LETTERS = string.ascii_lowercase



# ---------------------------------------------------------------- loading and validation

def _placeholders(node: Mapping, key: str, params: Mapping, errors: Errors) -> None:
    for match in _PLACEHOLDER.finditer(node[key]):
        name = match.group(1)
        if name and name not in params:
            known = ", ".join(params) or "none defined"
            errors.at(line_of(node, key), f"{key!r} uses {{{name}}}, which is not a parameter "
                      f"(params: {known}; write {{{{ and }}}} for literal braces)")


def _feedback_text(node: Mapping, key: str, params: Mapping, errors: Errors) -> str | None:
    text = text_field(node, key, errors)
    if text is not None:
        _placeholders(node, key, params, errors)
        return text.strip()
    return None


def _mistake_id(node: Mapping, errors: Errors) -> str | None:
    value = node["mistake"]
    if not isinstance(value, str) or not _ID.match(value):
        errors.at(line_of(node, "mistake"), f"'mistake' must be a short id like counted_value_width (got {got(value)})")
        return None
    return value


def _source(node: Mapping, key: str, params: Mapping, errors: Errors, course: CourseCode) -> NumberSource | None:
    """A number, a param name, or an answer function whose arguments are all params."""
    value = node[key]
    if gen.is_number(value) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and value in params:
        return value
    function = course.get(value) if isinstance(value, str) else None
    if isinstance(value, str) and function is not None:
        missing = [p for p in inspect.signature(function).parameters if p not in params]
        if missing:
            errors.at(line_of(node, key), f"answer function {value!r} needs parameter {missing[0]!r}, "
                      "which 'params' does not define")
            return None
        return value
    known = ", ".join(params) or "none defined"
    errors.at(line_of(node, key), f"{key!r} must be a number, a parameter (params: {known}) or an answer "
              f"function of the course code ({course.path.name if course.path else 'assignment.yaml names none'}) "
              f"(got {got(value)})")
    return None


def _choices(node: Any, line: int | None, kind: QuizKind, params: Mapping, errors: Errors) -> tuple[Choice, ...]:
    if not isinstance(node, list) or not 2 <= len(node) <= len(LETTERS):
        errors.at(line, f"'choices' must be a list of 2 to 26 choices (got {got(node)})")
        return ()
    found: list[Choice] = []
    for i, item in enumerate(node):
        item_line = line_of(node, i)
        if not isinstance(item, dict):
            errors.at(item_line, f"each choice must be a mapping with text, feedback and correct or mistake (got {got(item)})")
            continue
        before = len(errors.items)
        unknown_keys(item, CHOICE_KEYS, "a choice", errors)
        for key in ("text", "feedback"):
            if key not in item:
                errors.at(item_line, f"choice {LETTERS[i]} is missing required key {key!r}")
        correct = item.get("correct", False)
        if not isinstance(correct, bool):
            errors.at(line_of(item, "correct"), f"'correct' must be true or false (got {got(correct)})")
        if not correct and "mistake" not in item:
            errors.at(item_line, f"wrong choice {LETTERS[i]} needs 'mistake': a short id of the misconception it shows")
        if correct is True and "mistake" in item and kind is QuizKind.MULTIPLE_CHOICE:
            errors.at(line_of(item, "mistake"), "the correct choice of a multiple_choice item has no 'mistake'")
        if len(errors.items) > before:
            continue
        text = _feedback_text(item, "text", params, errors)
        feedback = _feedback_text(item, "feedback", params, errors)
        mistake = _mistake_id(item, errors) if "mistake" in item else None
        found.append(Choice(letter=LETTERS[i], text=text or "", correct=correct, feedback=feedback or "",
                            mistake=mistake, line=item_line))
    correct_letters = [c.letter for c in found if c.correct]
    if len(found) == len(node):
        if kind is QuizKind.MULTIPLE_CHOICE and len(correct_letters) != 1:
            errors.at(line, "a multiple_choice item needs exactly one correct choice "
                      f"(got {len(correct_letters)}{': ' + ', '.join(correct_letters) if correct_letters else ''})")
        if kind is QuizKind.MULTIPLE_ANSWERS and not correct_letters:
            errors.at(line, "a multiple_answers item needs at least one correct choice (got none)")
    return tuple(found)


def _wrong_values(node: Any, line: int | None, params: Mapping, errors: Errors, course: CourseCode) -> tuple[WrongValue, ...]:
    if not isinstance(node, list):
        errors.at(line, f"'wrong' must be a list of {{value, feedback, mistake}} (got {got(node)})")
        return ()
    found: list[WrongValue] = []
    for i, item in enumerate(node):
        item_line = line_of(node, i)
        if not isinstance(item, dict):
            errors.at(item_line, f"each wrong value must be a mapping with value, feedback, mistake (got {got(item)})")
            continue
        before = len(errors.items)
        unknown_keys(item, WRONG_KEYS, "a wrong value", errors)
        missing = [k for k in ("value", "feedback", "mistake") if k not in item]
        if missing:
            errors.at(item_line, f"wrong value is missing required key {missing[0]!r}")
            continue
        value = _source(item, "value", params, errors, course)
        feedback = _feedback_text(item, "feedback", params, errors)
        mistake = _mistake_id(item, errors)
        if len(errors.items) == before and value is not None and feedback is not None and mistake is not None:
            found.append(WrongValue(value=value, feedback=feedback, mistake=mistake, line=item_line))
    return tuple(found)


def _rubric(node: Any, line: int | None, points: float | None, errors: Errors) -> tuple[RubricEntry, ...]:
    if not isinstance(node, list) or not node:
        errors.at(line, f"'rubric' must be a non-empty list of {{points, text}} (got {got(node)})")
        return ()
    found: list[RubricEntry] = []
    for i, entry in enumerate(node):
        entry_line = line_of(node, i)
        if not isinstance(entry, dict):
            errors.at(entry_line, f"each rubric entry must be a mapping with points and text (got {got(entry)})")
            continue
        before = len(errors.items)
        unknown_keys(entry, RUBRIC_KEYS, "a rubric entry", errors)
        missing = [k for k in ("points", "text") if k not in entry]
        if missing:
            errors.at(entry_line, f"rubric entry is missing required key {missing[0]!r}")
            continue
        share = number_field(entry, "points", errors, positive=True)
        text = text_field(entry, "text", errors)
        if len(errors.items) == before and share is not None and text is not None:
            found.append(RubricEntry(points=share, text=text.strip(), line=entry_line))
    total = sum(e.points for e in found)
    if points is not None and len(found) == len(node) and not math.isclose(total, points):
        errors.at(line, f"the rubric's points add up to {total:g}, expected the item's points ({points:g})")
    return tuple(found)


def _params(node: Mapping, errors: Errors) -> dict[str, Any]:
    if "params" not in node:
        return {}
    params = node["params"]
    if not isinstance(params, dict):
        errors.at(line_of(node, "params"), f"'params' must be a mapping of parameter names (got {got(params)})")
        return {}
    gen.check_let(params, lambda key, msg: errors.at(line_of(params, key) or line_of(node, "params"), msg),
                  label="params")
    return dict(params)  # names stay known even when a spec is wrong: no cascade of errors


def _item(node: Any, line: int | None, errors: Errors, course: CourseCode) -> QuizItem | None:
    if not isinstance(node, dict):
        errors.at(line, f"each quiz item must be a mapping (got {got(node)})")
        return None
    before = len(errors.items)
    unknown_keys(node, ITEM_KEYS, "a quiz item", errors)
    for key in REQUIRED_ITEM_KEYS:
        if key not in node:
            errors.at(line, f"quiz item is missing required key {key!r}")
    if len(errors.items) > before:
        return None
    item_id = node["id"]
    if not isinstance(item_id, str) or not _ID.match(item_id):
        errors.at(line_of(node, "id"), f"'id' must be lower_case letters, digits and _ (got {got(item_id)})")
    kinds = [k.value for k in QuizKind]
    if node["kind"] not in kinds:
        errors.at(line_of(node, "kind"), f"'kind' must be one of {', '.join(kinds)} (got {got(node['kind'])})")
        return None
    kind = QuizKind(node["kind"])
    visibility = node["visibility"]
    if visibility not in ("public", "hidden"):
        errors.at(line_of(node, "visibility"), f"'visibility' must be public or hidden (got {got(visibility)})")
    points = number_field(node, "points", errors, positive=True)
    params = _params(node, errors)
    title = text_field(node, "title", errors)
    prompt = _feedback_text(node, "prompt", params, errors)
    hint = _feedback_text(node, "hint", params, errors) if "hint" in node else None
    fields: dict[str, Any] = {}
    if "shuffle" in node:
        if kind not in (QuizKind.MULTIPLE_CHOICE, QuizKind.MULTIPLE_ANSWERS):
            errors.at(line_of(node, "shuffle"), f"'shuffle' does not apply to a {kind.value} item "
                      "(only to multiple_choice and multiple_answers items)")
        elif not isinstance(node["shuffle"], bool):
            errors.at(line_of(node, "shuffle"), f"'shuffle' must be true or false (got {got(node['shuffle'])})")
        else:
            fields["shuffle"] = node["shuffle"]
    if kind is not QuizKind.WRITTEN and "rubric" in node:
        errors.at(line_of(node, "rubric"), f"'rubric' does not apply to a {kind.value} item (only to written items)")
    if kind is QuizKind.WRITTEN:
        for key in ("choices", "params", "hint", *_NUMERIC_KEYS):
            if key in node:
                errors.at(line_of(node, key), f"{key!r} does not apply to a written item")
        if "rubric" not in node:
            errors.at(line, "a written item is missing required key 'rubric'")
        else:
            fields["rubric"] = _rubric(node["rubric"], line_of(node, "rubric"), points, errors)
    elif kind is QuizKind.NUMERIC:
        if "choices" in node:
            errors.at(line_of(node, "choices"), "'choices' does not apply to a numeric item")
        for key in ("answer", "feedback"):
            if key not in node:
                errors.at(line, f"a numeric item is missing required key {key!r}")
        if "answer" in node:
            fields["answer"] = _source(node, "answer", params, errors, course)
        if "feedback" in node:
            fields["feedback"] = _feedback_text(node, "feedback", params, errors)
        if "tolerance" in node:
            tolerance = number_field(node, "tolerance", errors)
            if tolerance is not None and tolerance < 0:
                errors.at(line_of(node, "tolerance"), f"'tolerance' must be 0 or more (got {got(node['tolerance'])})")
            fields["tolerance"] = tolerance
        if "wrong" in node:
            fields["wrong"] = _wrong_values(node["wrong"], line_of(node, "wrong"), params, errors, course)
    else:
        for key in _NUMERIC_KEYS:
            if key in node:
                errors.at(line_of(node, key), f"{key!r} does not apply to a {kind.value} item")
        if "choices" not in node:
            errors.at(line, f"a {kind.value} item is missing required key 'choices'")
        else:
            fields["choices"] = _choices(node["choices"], line_of(node, "choices"), kind, params, errors)
    if len(errors.items) > before or title is None or points is None or prompt is None:
        return None
    return QuizItem(id=item_id, title=title, kind=kind, points=points, visibility=Visibility(visibility),
                    prompt=prompt + "\n", params=params, hint=hint, line=line, code=course.path, **fields)


def load_quiz(path: Path, course: CourseCode | None = None) -> Quiz:
    """Load one quiz file, its answer functions from `course` (by default the code that the
    assignment.yaml beside it names); raises SpecErrors listing everything wrong with it."""
    path = Path(path)
    if course is None:
        course = course_of(path.parent)
    errors = Errors(path)
    node = load_mapping(path, "a quiz file")
    unknown_keys(node, QUIZ_KEYS, "a quiz", errors)
    title = text_field(node, "title", errors) if "title" in node else "Concept quiz"
    entries = node.get("items")
    if not isinstance(entries, list) or not entries:
        errors.at(line_of(node, "items" if "items" in node else None, default=1),
                  f"'items' must be a non-empty list (got {got(entries)})")
        entries = []
    items: list[QuizItem] = []
    seen: dict[str, int | None] = {}
    for i, entry in enumerate(entries):
        item = _item(entry, line_of(entries, i), errors, course)
        if item is None:
            continue
        if item.id in seen:
            errors.at(line_of(entry, "id"), f"duplicate quiz item id {item.id!r} (first on line {seen[item.id]})")
            continue
        seen[item.id] = line_of(entry, "id")
        items.append(item)
    if errors.items or title is None:
        raise SpecErrors(errors.items)
    return Quiz(title=title, items=tuple(items), path=path)


# ---------------------------------------------------------------- draws

def draw_params(item: QuizItem, seed: int) -> dict[str, int]:
    """The item's integer params for `seed`; the same seed always gives the same numbers."""
    return gen.draw_shared(item.params, f"quiz/{item.id}/{seed}", seed)


fill = gen.fill


@functools.lru_cache(maxsize=256)
def _param_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names an answer function takes (read once per function: every draw calls it)."""
    return tuple(inspect.signature(fn).parameters)


def _resolve(source: NumberSource, params: Mapping[str, int], code: Path | None) -> float:
    value: float
    if isinstance(source, str) and source in params:
        value = params[source]
    elif isinstance(source, str):
        fn = course_function(code, source)
        if fn is None:
            raise ValueError(f"the course code has no answer function {source!r}")
        value = fn(**{name: params[name] for name in _param_names(fn)})
    else:
        value = source
    return round(float(value), 12)  # 18.000000000000004 -> 18.0: answers are decimals


def _numbers(item: QuizItem, params: Mapping[str, int]) -> tuple[float | None, tuple[float, ...]]:
    """The item's answer and known-wrong values for `params` (InternalError if the course code fails)."""
    try:
        answer = _resolve(item.answer, params, item.code) if item.answer is not None else None
        return answer, tuple(_resolve(w.value, params, item.code) for w in item.wrong)
    except Exception as exc:  # an answer function that fails is the quiz file's fault
        raise InternalError(f"quiz item {item.id!r} (line {item.line}): cannot compute its numbers for "
                            f"{params}: {type(exc).__name__}: {exc}") from exc


def choice_order(item: QuizItem, seed: int) -> tuple[int, ...]:
    """The order in which the student of `seed` sees the item's choices: for their a, b, c..., the
    position of each in the file. The file's order for the default seed (without a course secret
    every student has it: one order for all) and for an item with `shuffle: false`; otherwise a
    permutation decided by the item's id and the seed alone, so every command that shows or grades
    the item for that seed agrees. Ranked by a hash rather than drawn from a generator, so no
    library's change of its random streams can ever change a student's letters."""
    positions = tuple(range(len(item.choices)))
    if seed == DEFAULT_SEED or not item.shuffle or len(positions) < 2:
        return positions
    import hashlib  # here, not at the top: the default seed needs none of it
    return tuple(sorted(positions, key=lambda i: hashlib.sha256(f"choices/{item.id}/{seed}/{i}".encode()).digest()))


def draw(item: QuizItem, seed: int, *, student_order: bool = True) -> Draw:
    """Draw the item's params from `seed` and fill in its text and numbers. The choices come in the
    seed's own order (`choice_order`), lettered a, b, c... in it; each keeps its text, feedback and
    misconception. `student_order=False` keeps the file's order: for the platforms' exports, whose
    own engines shuffle the choices for each student."""
    params = draw_params(item, seed)
    answer, values = _numbers(item, params)
    wrong = tuple(DrawnWrongValue(value=value, feedback=fill(w.feedback, params), mistake=w.mistake, line=w.line)
                  for w, value in zip(item.wrong, values))
    choices = tuple(replace(c, text=fill(c.text, params), feedback=fill(c.feedback, params)) for c in item.choices)
    if student_order:
        choices = tuple(replace(choices[i], letter=LETTERS[k]) for k, i in enumerate(choice_order(item, seed)))
    return Draw(item=item, seed=seed, params=params, prompt=fill(item.prompt, params), choices=choices,
                   answer=answer, feedback=fill(item.feedback, params), wrong=wrong,
                   hint=fill(item.hint, params) if item.hint else None)


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.12g}"


def render_item(item: QuizItem, seed: int) -> str:
    """The student's view of one item (for `mha show`): prompt, choices and how to answer."""
    return starter.item_text(draw(item, seed))


def answer_key(quiz: Quiz, seed: int) -> dict[str, Any]:
    """The right answer of every automatically graded item for `seed`, in the form a student writes it."""
    key: dict[str, Any] = {}
    for item in quiz.items:
        v = draw(item, seed)
        if item.manual:
            continue  # graded by hand: no key
        if item.kind is QuizKind.NUMERIC:
            key[item.id] = int(v.number) if v.number.is_integer() else v.number
        elif item.kind is QuizKind.MULTIPLE_CHOICE:
            key[item.id] = v.correct_letters[0]
        else:
            key[item.id] = list(v.correct_letters)
    return key


def answers_template(quiz: Quiz, key: Mapping[str, Any] | None = None) -> str:
    """answers.yaml for students (blank) or the answer key (with `key`), one line per item."""
    return starter.answers_template(quiz.title, quiz.items, key)


def check_quiz(quiz: Quiz, seeds: Iterable[int] = range(64)) -> None:
    """Every draw's numbers can be computed and no known-wrong value equals the answer.

    An item's numbers depend on its params alone, so each set of params is computed once: every
    set the item can draw when there are at most CHECKED_PARAMS of them, else those `seeds` draw.
    A set that fails is reported as the first of `seeds` to draw it would see it."""
    errors = quiz_errors(quiz, seeds)
    if errors:
        raise SpecErrors(errors)


def quiz_errors(quiz: Quiz, seeds: Iterable[int] = range(64)) -> list[SpecError]:
    """What check_quiz refuses, as a list (empty when every item's numbers are right)."""
    seeds = tuple(seeds)
    errors: list[SpecError] = []
    for item in quiz.items:
        if item.kind is not QuizKind.NUMERIC:
            continue
        found = gen.let_values(item.params, CHECKED_PARAMS)
        if found is None:
            found = list({_key(p): p for p in (draw_params(item, seed) for seed in seeds)}.values())
        failed = {_key(params): error for params in found if (error := _numbers_error(quiz, item, params))}
        if failed:
            drawn = (failed.get(_key(draw_params(item, seed))) for seed in seeds)
            errors.append(next((e for e in drawn if e is not None), next(iter(failed.values()))))
    return errors


CHECKED_PARAMS = 256  # an item with more sets of params than this is checked on the sets the seeds draw


def _key(params: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(params.items())


def _numbers_error(quiz: Quiz, item: QuizItem, params: Mapping[str, int]) -> SpecError | None:
    """What is wrong with the item's numbers for `params`: an answer function that fails, or a
    known-wrong value equal to the answer; None when nothing is."""
    try:
        answer, values = _numbers(item, params)
    except InternalError as exc:
        return SpecError(str(quiz.path), item.line, str(exc))
    if answer is None:  # a numeric item always has an answer (the loader checks it)
        return None
    clash = next(((w, value) for w, value in zip(item.wrong, values) if abs(value - answer) <= item.tolerance), None)
    if clash is None:
        return None
    drawn = ", ".join(f"{k}={x}" for k, x in params.items()) or "no params"
    return SpecError(str(quiz.path), clash[0].line, f"known-wrong value {_number_text(clash[1])} "
                     f"equals the answer when {drawn}")
