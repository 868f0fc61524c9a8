"""Moodle: the concept quiz as Moodle XML (Question bank > Import > Moodle XML format).

UTF-8, a `<quiz>` root, a category, then one `<question>` per item, each with `<name><text>`
(the import fails without it) and `<questiontext format="html">`:

- numeric items are `numerical`: the answer with fraction 100, its absolute `<tolerance>` and
  feedback, then one fraction-0 answer per known-wrong value (same tolerance) whose feedback
  explains that misconception;
- multiple choice is `multichoice` with `<single>true`, the correct choice at 100 and the
  others at 0, each with its feedback (a wrong one names its misconception);
- multiple answers is `multichoice` with `<single>false`: the correct choices' fractions sum
  to 100 and the wrong ones' to -100, so choosing everything earns nothing.

With `variants`, the variants of each item with params go into a subcategory named after the
item, for a "random question from category" slot in the Moodle quiz.
"""
from __future__ import annotations

from xml.etree import ElementTree as ET

from ..assignment.model import Quiz, QuizItem, QuizKind
from ..assignment.quiz import DEFAULT_SEED, Variant, variant
from .markup import to_html
from .qti import variant_seeds

__all__ = ["fraction", "render"]


def fraction(share: float) -> str:
    """A percentage as Moodle writes it (up to 7 significant digits: 33.33333, 50, -100)."""
    return f"{share:.7g}"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.12g}"


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


def _question(root: ET.Element, v: Variant, name: str) -> None:
    item = v.item
    kind = "numerical" if item.kind is QuizKind.NUMERIC else "multichoice"
    question = _sub(root, "question", type=kind)
    _text(question, "name", name)
    _text(question, "questiontext", to_html(v.prompt), format="html")
    _text(question, "generalfeedback", to_html(v.hint) if v.hint else "", format="html")
    _sub(question, "defaultgrade", _number(item.points))
    _sub(question, "penalty", "0.3333333")
    _sub(question, "hidden", "0")
    if item.kind is QuizKind.NUMERIC:
        answers = [("100", v.answer, to_html(v.feedback))] + \
                  [("0", w.value, _wrong_feedback(to_html(w.feedback), w.mistake)) for w in v.wrong]
        for share, value, feedback in answers:
            answer = _sub(question, "answer", fraction=share, format="moodle_auto_format")
            _sub(answer, "text", _number(value))
            _text(answer, "feedback", feedback, format="html")
            _sub(answer, "tolerance", repr(float(item.tolerance)))
        _sub(question, "unitgradingtype", "0")
        _sub(question, "unitpenalty", "0.1000000")
        _sub(question, "showunits", "3")
        _sub(question, "unitsleft", "0")
        return
    single = item.kind is QuizKind.MULTIPLE_CHOICE
    right = sum(c.correct for c in v.choices)
    wrong = len(v.choices) - right
    _sub(question, "single", "true" if single else "false")
    _sub(question, "shuffleanswers", "false")  # the choices were written in an order
    _sub(question, "answernumbering", "abc")
    _sub(question, "showstandardinstruction", "0")
    for tag, text in (("correctfeedback", "Your answer is correct."),
                      ("partiallycorrectfeedback", "Your answer is partially correct."),
                      ("incorrectfeedback", "Your answer is incorrect.")):
        _text(question, tag, f"<p>{text}</p>", format="html")
    for choice in v.choices:
        if single:
            share = 100.0 if choice.correct else 0.0
        else:
            share = 100.0 / right if choice.correct else -100.0 / wrong
        answer = _sub(question, "answer", fraction=fraction(share), format="html")
        _sub(answer, "text", to_html(choice.text))
        feedback = to_html(choice.feedback)
        _text(answer, "feedback", feedback if choice.correct else _wrong_feedback(feedback, choice.mistake),
              format="html")


def _name(item: QuizItem, v: Variant, numbered: bool) -> str:
    if not numbered or not v.params:
        return f"{item.id}: {item.title}"
    return f"{item.id}: {item.title} ({', '.join(f'{k}={x}' for k, x in v.params.items())})"


def render(quiz: Quiz, *, variants: int | None = None, seed: int = DEFAULT_SEED) -> str:
    """The Moodle XML text. `variants`: that many variants per item with params, in a subcategory."""
    root = ET.Element("quiz")
    _category(root, quiz.title)
    for item in quiz.items:
        if not (variants and item.params):
            _question(root, variant(item, seed), _name(item, variant(item, seed), False))
    for item in quiz.items:
        if variants and item.params:
            _category(root, f"{quiz.title}/{item.id}")
            for s in variant_seeds(item, variants, seed):
                v = variant(item, s)
                _question(root, v, _name(item, v, True))
    ET.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
