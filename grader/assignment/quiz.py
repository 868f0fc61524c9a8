"""The concept quiz: load and validate `quiz.yaml`, draw an item's numbers from a seed, render it.

A quiz file is a mapping with an optional `title` and a list of `items`:

    - id: distributions_one_head           # also the key of the answer in answers.yaml
      title: One head, one query
      kind: numeric                        # multiple_choice | multiple_answers | numeric
      points: 2
      visibility: public                   # public: `mha check` grades it; hidden: `mha grade` only
      params: {W: {choice: [2, 64, 128]}}  # integer variables, the grammar of a case's `let`
      prompt: A head has value width {W}.  # Markdown; {name} is a param, {{ and }} are braces
      answer: one_head_distributions       # a number, a param, or a function of ANSWER_FUNCTIONS
      tolerance: 0.001                     # absolute (default 1e-6)
      feedback: Why the answer is right.
      wrong:                               # known-wrong values and the misconception behind each
        - {value: W, mistake: counted_value_width, feedback: Why W is wrong.}
      hint: Shown after a wrong answer that no known-wrong value explains.

Choice items list `choices:` of {text, correct, feedback, mistake}, lettered a, b, c... in order;
every wrong choice names its misconception in `mistake`. No number is ever evaluated from text:
an answer is computed by a named Python function below, called with the item's params.
Grading a student's answers lives in grader.grading.answers.
"""
from __future__ import annotations

import inspect
import math
import re
import string
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..attention import reference
from ..errors import InternalError, SpecError, SpecErrors
from . import generators as gen
from .fields import Errors, got, load_mapping, number_field, text_field, unknown_keys
from .model import Choice, NumberSource, Quiz, QuizItem, QuizKind, Variant, Visibility, WrongValue
from .yamlio import line_of

__all__ = ["DEFAULT_SEED", "ANSWER_FUNCTIONS", "ANSWER_FORMS", "Variant", "load_quiz", "draw_params",
           "fill", "variant", "render_item", "answer_key", "answers_template", "check_quiz"]

DEFAULT_SEED = 0  # the variant everyone gets until a per-student seed is passed
QUIZ_KEYS = {"title", "items"}
ITEM_KEYS = {"id", "title", "kind", "points", "visibility", "prompt", "params", "hint",
             "choices", "answer", "tolerance", "feedback", "wrong"}
REQUIRED_ITEM_KEYS = ("id", "title", "kind", "points", "visibility", "prompt")
CHOICE_KEYS = {"text", "correct", "feedback", "mistake"}
WRONG_KEYS = {"value", "feedback", "mistake"}
_NUMERIC_KEYS = ("answer", "tolerance", "feedback", "wrong")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_PLACEHOLDER = gen.PLACEHOLDER
LETTERS = string.ascii_lowercase

ANSWER_FORMS = {
    QuizKind.MULTIPLE_CHOICE: "one letter, like b",
    QuizKind.MULTIPLE_ANSWERS: "a list of letters, like [a, c]",
    QuizKind.NUMERIC: "a number, like 0.25",
}


# ---------------------------------------------------------------- answer functions
# Each takes some of an item's params as keyword arguments and returns a number. Where the
# reference can answer (it counts its own softmax rows, it reads values), it does.

WORKED_VALUES = np.array([[1, 0, 10, 0], [0, 1, 0, 20]], dtype=np.float64)  # (T=2, d_v=4): v1, v2
HEAD_WEIGHTS = (np.array([0.8, 0.2]), np.array([0.1, 0.9]))                  # head 1, head 2 over (v1, v2)


def _reading(weights: np.ndarray, coord: int) -> float:
    return float(reference.attention_reading(weights, WORKED_VALUES)[coord - 1])  # coord counts from 1


def one_head_distributions(W: int) -> int:
    """Softmax rows that one head of value width W forms for one query, as the reference counts them."""
    return reference.count_routing_distributions(1, W, 1)


def budget_left(p: int) -> float:
    """Most weight left for all other positions when one gets p percent: a softmax row sums to 1."""
    return (100 - p) / 100


def budget_referent(p: int) -> float:
    """The referent's own share (a known-wrong answer to the budget question)."""
    return p / 100


def budget_left_percent(p: int) -> float:
    """What is left, in percent instead of as a fraction (a known-wrong answer)."""
    return 100 - p


def head_count(d_model: int, d_head: int) -> int:
    """Heads in a layer of width d_model whose heads are d_head wide (d_k = d_model / h)."""
    if d_model % d_head:
        raise ValueError(f"d_model {d_model} is not a multiple of the head width {d_head}")
    return d_model // d_head


def head2_reading(coord: int) -> float:
    """Coordinate `coord` of head 2's reading of the worked example."""
    return _reading(HEAD_WEIGHTS[1], coord)


def head1_reading(coord: int) -> float:
    """The same coordinate of head 1's reading (a known-wrong answer: the other head's weights)."""
    return _reading(HEAD_WEIGHTS[0], coord)


def head2_reversed_reading(coord: int) -> float:
    """Head 2's weights applied to the values in the wrong order (a known-wrong answer)."""
    return _reading(HEAD_WEIGHTS[1][::-1], coord)


def heads_averaged_reading(coord: int) -> float:
    """The mean of both heads' readings (a known-wrong answer)."""
    return (head1_reading(coord) + head2_reading(coord)) / 2


def unweighted_sum_reading(coord: int) -> float:
    """v1 + v2 with the weights left out (a known-wrong answer)."""
    return _reading(np.ones(2), coord)


# --- the practice counterpart of two_head_reading: its own values, weights in tenths per student

PRACTICE_VALUES = np.array([[2, 0, 6], [0, 3, 12]], dtype=np.float64)  # (T=2, d_v=3): v1, v2


def _practice(first_tenths: float, coord: int) -> float:
    weights = np.array([first_tenths / 10, 1 - first_tenths / 10])
    return float(reference.attention_reading(weights, PRACTICE_VALUES)[coord - 1])  # coord counts from 1


def practice_head2_reading(b: int, coord: int) -> float:
    """Coordinate `coord` of head 2's reading, weights [b/10, 1 - b/10] over (v1, v2)."""
    return _practice(b, coord)


def practice_head1_reading(a: int, coord: int) -> float:
    """The same coordinate of head 1's reading (a known-wrong answer: the other head's weights)."""
    return _practice(a, coord)


def practice_heads_averaged_reading(a: int, b: int, coord: int) -> float:
    """The mean of both heads' readings (a known-wrong answer)."""
    return (_practice(a, coord) + _practice(b, coord)) / 2


def practice_head2_reversed_reading(b: int, coord: int) -> float:
    """Head 2's weights applied to (v2, v1) (a known-wrong answer)."""
    return _practice(10 - b, coord)


def practice_unweighted_reading(coord: int) -> float:
    """v1 + v2 with the weights left out (a known-wrong answer)."""
    return float(PRACTICE_VALUES.sum(axis=0)[coord - 1])


ANSWER_FUNCTIONS: dict[str, Callable[..., float]] = {f.__name__: f for f in (
    one_head_distributions, budget_left, budget_referent, budget_left_percent, head_count,
    head2_reading, head1_reading, head2_reversed_reading, heads_averaged_reading, unweighted_sum_reading,
    practice_head2_reading, practice_head1_reading, practice_heads_averaged_reading,
    practice_head2_reversed_reading, practice_unweighted_reading,
)}


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


def _source(node: Mapping, key: str, params: Mapping, errors: Errors) -> NumberSource | None:
    """A number, a param name, or an answer function whose arguments are all params."""
    value = node[key]
    if gen.is_number(value) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and value in params:
        return value
    if isinstance(value, str) and value in ANSWER_FUNCTIONS:
        missing = [p for p in inspect.signature(ANSWER_FUNCTIONS[value]).parameters if p not in params]
        if missing:
            errors.at(line_of(node, key), f"answer function {value!r} needs parameter {missing[0]!r}, "
                      "which 'params' does not define")
            return None
        return value
    known = ", ".join(params) or "none defined"
    errors.at(line_of(node, key), f"{key!r} must be a number, a parameter (params: {known}) or an answer "
              f"function defined in grader/assignment/quiz.py (got {got(value)})")
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


def _wrong_values(node: Any, line: int | None, params: Mapping, errors: Errors) -> tuple[WrongValue, ...]:
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
        value = _source(item, "value", params, errors)
        feedback = _feedback_text(item, "feedback", params, errors)
        mistake = _mistake_id(item, errors)
        if len(errors.items) == before:
            found.append(WrongValue(value=value, feedback=feedback, mistake=mistake, line=item_line))
    return tuple(found)


def _params(node: Mapping, errors: Errors) -> dict[str, Any]:
    if "params" not in node:
        return {}
    params = node["params"]
    if not isinstance(params, dict):
        errors.at(line_of(node, "params"), f"'params' must be a mapping of parameter names (got {got(params)})")
        return {}
    gen.check_let(params, lambda key, msg: errors.at(line_of(params, key) or line_of(node, "params"),
                                                     "params." + msg.removeprefix("let.")))
    return dict(params)  # names stay known even when a spec is wrong: no cascade of errors


def _item(node: Any, line: int | None, errors: Errors) -> QuizItem | None:
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
    if kind is QuizKind.NUMERIC:
        if "choices" in node:
            errors.at(line_of(node, "choices"), "'choices' does not apply to a numeric item")
        for key in ("answer", "feedback"):
            if key not in node:
                errors.at(line, f"a numeric item is missing required key {key!r}")
        if "answer" in node:
            fields["answer"] = _source(node, "answer", params, errors)
        if "feedback" in node:
            fields["feedback"] = _feedback_text(node, "feedback", params, errors)
        if "tolerance" in node:
            tolerance = number_field(node, "tolerance", errors)
            if tolerance is not None and tolerance < 0:
                errors.at(line_of(node, "tolerance"), f"'tolerance' must be 0 or more (got {got(node['tolerance'])})")
            fields["tolerance"] = tolerance
        if "wrong" in node:
            fields["wrong"] = _wrong_values(node["wrong"], line_of(node, "wrong"), params, errors)
    else:
        for key in _NUMERIC_KEYS:
            if key in node:
                errors.at(line_of(node, key), f"{key!r} does not apply to a {kind.value} item")
        if "choices" not in node:
            errors.at(line, f"a {kind.value} item is missing required key 'choices'")
        else:
            fields["choices"] = _choices(node["choices"], line_of(node, "choices"), kind, params, errors)
    if len(errors.items) > before:
        return None
    return QuizItem(id=item_id, title=title, kind=kind, points=points, visibility=Visibility(visibility),
                    prompt=prompt + "\n", params=params, hint=hint, line=line, **fields)


def load_quiz(path: Path) -> Quiz:
    """Load one quiz file; raises SpecErrors listing everything wrong with it."""
    path = Path(path)
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
        item = _item(entry, line_of(entries, i), errors)
        if item is None:
            continue
        if item.id in seen:
            errors.at(line_of(entry, "id"), f"duplicate quiz item id {item.id!r} (first on line {seen[item.id]})")
            continue
        seen[item.id] = line_of(entry, "id")
        items.append(item)
    if errors.items:
        raise SpecErrors(errors.items)
    return Quiz(title=title, items=tuple(items), path=path)


# ---------------------------------------------------------------- variants

def draw_params(item: QuizItem, seed: int) -> dict[str, int]:
    """The item's integer params for `seed`; the same seed always gives the same numbers."""
    return gen.realize_let(item.params, zlib.crc32(f"quiz/{item.id}/{seed}".encode()))


fill = gen.fill


def _resolve(source: NumberSource, params: Mapping[str, int]) -> float:
    if isinstance(source, str) and source in params:
        value = params[source]
    elif isinstance(source, str):
        fn = ANSWER_FUNCTIONS[source]
        value = fn(**{name: params[name] for name in inspect.signature(fn).parameters})
    else:
        value = source
    return round(float(value), 12)  # 18.000000000000004 -> 18.0: answers are decimals


def variant(item: QuizItem, seed: int) -> Variant:
    """Draw the item's params from `seed` and fill in its text and numbers."""
    params = draw_params(item, seed)
    try:
        answer = _resolve(item.answer, params) if item.answer is not None else None
        wrong = tuple(replace(w, value=_resolve(w.value, params), feedback=fill(w.feedback, params)) for w in item.wrong)
    except Exception as exc:  # an answer function that fails is the quiz file's fault
        raise InternalError(f"quiz item {item.id!r} (line {item.line}): cannot compute its numbers for "
                            f"{params}: {type(exc).__name__}: {exc}") from exc
    choices = tuple(replace(c, text=fill(c.text, params), feedback=fill(c.feedback, params)) for c in item.choices)
    return Variant(item=item, seed=seed, params=params, prompt=fill(item.prompt, params), choices=choices,
                   answer=answer, feedback=fill(item.feedback, params), wrong=wrong,
                   hint=fill(item.hint, params) if item.hint else None)


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.12g}"


def render_item(item: QuizItem, seed: int) -> str:
    """The student's view of one item (for `mha show`): prompt, choices and how to answer."""
    v = variant(item, seed)
    title = f"{item.title} ({item.points:g} points, {item.kind.value.replace('_', ' ')})"
    lines = [title, "=" * len(title), "", v.prompt.rstrip(), ""]
    lines += [f"  {c.letter}) {c.text}" for c in v.choices]
    if v.choices:
        lines.append("")
    lines.append(f"Answer in answers.yaml as `{item.id}: ...`, with {ANSWER_FORMS[item.kind]}.")
    lines.append("Hidden item: `mha check` only checks the form of your answer; `mha grade` grades it."
                 if item.hidden else f"Run `mha check {item.id}` to check your answer.")
    return "\n".join(lines) + "\n"


def answer_key(quiz: Quiz, seed: int) -> dict[str, Any]:
    """The right answer of every item for `seed`, in the form a student writes it."""
    key: dict[str, Any] = {}
    for item in quiz.items:
        v = variant(item, seed)
        if item.kind is QuizKind.NUMERIC:
            key[item.id] = int(v.answer) if v.answer.is_integer() else v.answer
        elif item.kind is QuizKind.MULTIPLE_CHOICE:
            key[item.id] = v.correct_letters[0]
        else:
            key[item.id] = list(v.correct_letters)
    return key


def answers_template(quiz: Quiz, key: Mapping[str, Any] | None = None) -> str:
    """answers.yaml for students (blank) or the answer key (with `key`), one line per item."""
    def shown(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, list):
            return "[" + ", ".join(value) + "]"
        return _number_text(value) if isinstance(value, (int, float)) else str(value)

    head = [f"# {quiz.title}: answers. `mha show ITEM` prints an item; `mha check` checks the public ones.",
            "# Write one letter (b), a list of letters ([a, c]) or a number (0.25) after each colon.", ""]
    rows = [(f"{item.id}: {shown((key or {}).get(item.id))}",
             f"# {ANSWER_FORMS[item.kind]}{' (hidden: graded by mha grade)' if item.hidden else ''}")
            for item in quiz.items]
    width = max(len(left) for left, _ in rows)
    return "\n".join(head + [f"{left:<{width}}  {comment}" for left, comment in rows]) + "\n"


def check_quiz(quiz: Quiz, seeds: Iterable[int] = range(64)) -> None:
    """Every variant's numbers can be computed and no known-wrong value equals the answer."""
    seeds = tuple(seeds)
    errors: list[SpecError] = []
    for item in quiz.items:
        if item.kind is not QuizKind.NUMERIC:
            continue
        for seed in seeds if item.params else (DEFAULT_SEED,):
            try:
                v = variant(item, seed)
            except InternalError as exc:
                errors.append(SpecError(str(quiz.path), item.line, str(exc)))
                break
            clash = next((w for w in v.wrong if abs(w.value - v.answer) <= item.tolerance), None)
            if clash is not None:
                drawn = ", ".join(f"{k}={x}" for k, x in v.params.items()) or "no params"
                errors.append(SpecError(str(quiz.path), clash.line, f"known-wrong value {_number_text(clash.value)} "
                                        f"equals the answer when {drawn}"))
                break
    if errors:
        raise SpecErrors(errors)
