"""Moodle: the concept quiz as Moodle XML (Question bank > Import > Moodle XML format).

UTF-8, a `<quiz>` root, a category, then one `<question>` per item, each with `<name><text>`
(the import fails without it) and `<questiontext format="html">`:

- numeric items are `numerical`: fraction 100 for the range `mha grade` accepts (the answer
  plus or minus its tolerance, rounded outward to 4 decimals: grading/scoring.py), written as
  its midpoint and absolute `<tolerance>`, with feedback; then one fraction-0 answer per
  known-wrong value (the item's tolerance) whose feedback explains that misconception;
- multiple choice is `multichoice` with `<single>true`, the correct choice at 100 and the
  others at 0, each with its feedback (a wrong one names its misconception);
- multiple answers is `multichoice` with `<single>false`: each true statement at +100/n and
  each false one at -100/n (n true statements). Moodle adds the chosen fractions and keeps the
  sum within 0..100%: partial credit with penalty, the rule of `mha grade` and Canvas.

- written items are `essay` questions in plain text (so Moodle never renders a student's text
  as HTML), graded by hand, with the rubric as `graderinfo` (shown to graders only).

With `draws`, the draws of each item with params go into a subcategory named after the
item, for a "random question from category" slot in the Moodle quiz.

Choices are written in the file's order with `<shuffleanswers>` on, so Moodle shows them to each
student in an order of its own (with the quiz's "Shuffle within questions", on by default); an
item with `shuffle: false` keeps its order (`<shuffleanswers>` off).
"""
from __future__ import annotations

from decimal import Decimal
from xml.etree import ElementTree as ET

from ..course.model import MAX_WRITTEN, Quiz, QuizItem, QuizKind
from ..course.quiz import DEFAULT_SEED, Draw, draw
from ..grading.scoring import choice_fraction, numeric_range
from .markup import to_html
from .qti import draw_seeds, rubric_html

__all__ = ["fraction", "render"]


def fraction(share: float) -> str:
    """A percentage as Moodle writes it (up to 7 significant digits: 33.33333, 50, -100)."""
    return f"{share:.7g}"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.12g}"


def _decimal_text(x) -> str:
    """A number (float or Decimal) as plain decimal text: 0.0001, not 1e-04."""
    if isinstance(x, Decimal):
        return format(x.normalize(), "f")
    return _number(x)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    if text is not None:
        element.text = text
    return element


def _text(parent: ET.Element, tag: str, html: str, **attrs: str) -> ET.Element:
    element = _sub(parent, tag, **attrs)
    _sub(element, "text", html)
    return element


def _category(root: ET.Element, path: str) -> None:
    question = _sub(root, "question", type="category")
    _text(question, "category", f"$course$/top/{path}")
    _text(question, "info", "", format="html")


def _wrong_feedback(html: str, mistake: str | None) -> str:
    return html + (f"\n<p>Misconception: <code>{mistake}</code></p>" if mistake else "")


def _essay(question: ET.Element, item: QuizItem) -> None:
    """Moodle's essay fields: a plain-text box about as long as the grader accepts, the rubric for graders."""
    for tag, text in (("responseformat", "plain"), ("responserequired", "1"), ("responsefieldlines", "10"),
                      ("minwordlimit", ""), ("maxwordlimit", str(MAX_WRITTEN // 5)), ("attachments", "0"),
                      ("attachmentsrequired", "0"), ("maxbytes", "0"), ("filetypeslist", "")):
        _sub(question, tag, text)
    _text(question, "graderinfo", rubric_html(item), format="html")
    _text(question, "responsetemplate", "", format="html")


def _question(root: ET.Element, v: Draw, name: str) -> None:
    item = v.item
    kind = "essay" if item.manual else "numerical" if item.kind is QuizKind.NUMERIC else "multichoice"
    question = _sub(root, "question", type=kind)
    _text(question, "name", name)
    _text(question, "questiontext", to_html(v.prompt), format="html")
    _text(question, "generalfeedback", to_html(v.hint) if v.hint else "", format="html")
    _sub(question, "defaultgrade", _number(item.points))
    _sub(question, "penalty", "0" if item.manual else "0.3333333")
    _sub(question, "hidden", "0")
    if item.manual:
        _essay(question, item)
        return
    if item.kind is QuizKind.NUMERIC:
        low, high = numeric_range(v.number, item.tolerance)
        answers = [("100", (low + high) / 2, (high - low) / 2, to_html(v.feedback))] + \
                  [("0", w.value, item.tolerance, _wrong_feedback(to_html(w.feedback), w.mistake)) for w in v.wrong]
        for share, value, tolerance, feedback in answers:
            answer = _sub(question, "answer", fraction=share, format="moodle_auto_format")
            _sub(answer, "text", _decimal_text(value))
            _text(answer, "feedback", feedback, format="html")
            _sub(answer, "tolerance", _decimal_text(tolerance))
        _sub(question, "unitgradingtype", "0")
        _sub(question, "unitpenalty", "0.1000000")
        _sub(question, "showunits", "3")
        _sub(question, "unitsleft", "0")
        return
    single = item.kind is QuizKind.MULTIPLE_CHOICE
    right = sum(c.correct for c in v.choices)
    _sub(question, "single", "true" if single else "false")
    _sub(question, "shuffleanswers", "true" if item.shuffle else "false")
    _sub(question, "answernumbering", "abc")
    _sub(question, "showstandardinstruction", "0")
    for tag, text in (("correctfeedback", "Your answer is correct."),
                      ("partiallycorrectfeedback", "Your answer is partially correct."),
                      ("incorrectfeedback", "Your answer is incorrect.")):
        _text(question, tag, f"<p>{text}</p>", format="html")
    for choice in v.choices:
        if single:
            percent = 100.0 if choice.correct else 0.0
        else:
            percent = float(100 * choice_fraction(choice.correct, right))
        answer = _sub(question, "answer", fraction=fraction(percent), format="html")
        _sub(answer, "text", to_html(choice.text))
        feedback = to_html(choice.feedback)
        _text(answer, "feedback", feedback if choice.correct else _wrong_feedback(feedback, choice.mistake),
              format="html")


def _name(item: QuizItem, v: Draw, numbered: bool) -> str:
    if not numbered or not v.params:
        return f"{item.id}: {item.title}"
    return f"{item.id}: {item.title} ({', '.join(f'{k}={x}' for k, x in v.params.items())})"


def render(quiz: Quiz, *, draws: int | None = None, seed: int = DEFAULT_SEED) -> str:
    """The Moodle XML text. `draws`: that many draws per item with params, in a subcategory."""
    root = ET.Element("quiz")
    _category(root, quiz.title)
    for item in quiz.items:
        if not (draws and item.params):  # the file's order: Moodle shuffles for each student
            v = draw(item, seed, student_order=False)
            _question(root, v, _name(item, v, False))
    for item in quiz.items:
        if draws and item.params:
            _category(root, f"{quiz.title}/{item.id}")
            for s in draw_seeds(item, draws, seed):
                v = draw(item, s, student_order=False)
                _question(root, v, _name(item, v, True))
    ET.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
