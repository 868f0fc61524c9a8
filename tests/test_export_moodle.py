"""Moodle XML export: parses, names and texts every question, keeps the misconception answers."""
from __future__ import annotations

from decimal import Decimal
from xml.etree import ElementTree as ET

import pytest

from grader.course.model import QuizKind
from grader.course.quiz import draw
from grader.exports import moodle
from grader.grading.scoring import numeric_range


@pytest.fixture(scope="module")
def questions(course):
    root = ET.fromstring(moodle.render(course.quiz).encode("utf-8"))
    assert root.tag == "quiz"
    return root


def _answers(question):
    return [(float(a.get("fraction")), a.findtext("text"), a.findtext("feedback/text"), a.findtext("tolerance"))
            for a in question.findall("answer")]


class TestRender:
    def test_utf8_declaration_and_a_category_first(self, course):
        """The file declares UTF-8 and starts with the quiz's category."""
        text = moodle.render(course.quiz)
        assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<quiz>')
        first = ET.fromstring(text.encode())[0]
        assert first.get("type") == "category"
        assert first.findtext("category/text") == f"$course$/top/{course.quiz.title}"

    def test_every_question_has_name_text_and_a_correct_answer(self, questions, course):
        """Each item: <name><text>, html <questiontext>, and an answer at 100% (or summing to 100)."""
        items = [q for q in questions if q.get("type") != "category"]
        assert len(items) == len(course.quiz.items)
        for q in items:
            assert q.findtext("name/text").strip()
            assert q.find("questiontext").get("format") == "html" and q.findtext("questiontext/text").strip()
            if q.get("type") == "essay":  # graded by hand: no answer to match
                continue
            positive = [f for f, *_ in _answers(q) if f > 0]
            assert positive and abs(sum(positive) - 100) < 1e-3

    def test_numerical_answers_with_tolerance_and_known_wrong_values_at_zero(self, questions, course):
        """numerical: 100 for the range `mha grade` accepts (midpoint and half-width); each known-wrong value at 0
        with the item's tolerance and its feedback."""
        by_name = {q.findtext("name/text").split(":")[0]: q for q in questions if q.get("type") == "numerical"}
        numeric = [i for i in course.quiz.items if i.kind is QuizKind.NUMERIC]
        assert set(by_name) == {i.id for i in numeric}
        for item in numeric:
            v = draw(item, 0)
            answers = _answers(by_name[item.id])
            low, high = numeric_range(v.answer, item.tolerance)
            assert answers[0][0] == 100 and Decimal(answers[0][1]) == (low + high) / 2
            assert Decimal(answers[0][3]) == (high - low) / 2 and float(answers[0][3]) >= item.tolerance
            wrong = answers[1:]
            assert [float(text) for _, text, _, _ in wrong] == pytest.approx([w.value for w in v.wrong])
            assert all(f == 0 for f, *_ in wrong)
            for (_, _, feedback, _), w in zip(wrong, v.wrong):
                assert w.mistake in feedback

    def test_multichoice_single_and_multiple(self, questions, course):
        """multichoice: <single> true for one answer, false for several; every answer has feedback."""
        by_name = {q.findtext("name/text").split(":")[0]: q for q in questions if q.get("type") == "multichoice"}
        for item in course.quiz.items:
            if item.kind in (QuizKind.NUMERIC, QuizKind.WRITTEN):
                continue
            q = by_name[item.id]
            assert q.findtext("single") == ("true" if item.kind is QuizKind.MULTIPLE_CHOICE else "false")
            assert q.findtext("shuffleanswers") == ("true" if item.shuffle else "false")  # Moodle shuffles
            answers = _answers(q)
            assert len(answers) == len(item.choices) and all(fb for _, _, fb, _ in answers)
            for (fraction, _, feedback, _), choice in zip(answers, item.choices):
                assert (fraction > 0) == choice.correct
                if not choice.correct:
                    assert choice.mistake in feedback
            if item.kind is QuizKind.MULTIPLE_ANSWERS:
                right = sum(c.correct for c in item.choices)  # partial credit with penalty: -100/n per false one
                assert all(f == pytest.approx(100 / right if c.correct else -100 / right, abs=1e-5)
                           for (f, *_), c in zip(answers, item.choices))

    def test_written_items_are_essays_with_the_rubric_for_graders(self, questions, course):
        """essay: plain-text response, no answers, penalty 0, the rubric (escaped HTML) in graderinfo."""
        essays = {q.findtext("name/text").split(":")[0]: q for q in questions if q.get("type") == "essay"}
        written = [i for i in course.quiz.items if i.manual]
        assert set(essays) == {i.id for i in written} and len(written) == 3
        for item in written:
            q = essays[item.id]
            assert q.findall("answer") == [] and q.findtext("penalty") == "0"
            assert q.findtext("responseformat") == "plain" and q.find("graderinfo").get("format") == "html"
            assert float(q.findtext("defaultgrade")) == item.points
            info = q.findtext("graderinfo/text")
            assert info.startswith(f"<p>Rubric ({item.points:g} points, graded by hand):</p>")
            assert all(f"{r.points:g} point" in info for r in item.rubric)
            assert "<" not in info.split("<li>")[1].split("</li>")[0]  # rubric text escaped

    def test_draws_go_to_a_subcategory_per_item(self, course):
        """--draws N: the draws of each item with params follow a category named after it."""
        root = ET.fromstring(moodle.render(course.quiz, draws=3).encode())
        categories = [q.findtext("category/text") for q in root if q.get("type") == "category"]
        with_params = [i.id for i in course.quiz.items if i.params]
        assert categories[1:] == [f"$course$/top/{course.quiz.title}/{i}" for i in with_params]
        names = [q.findtext("name/text") for q in root if q.get("type") != "category"]
        assert len(names) == len(set(names))

    def test_deterministic(self, course):
        """The same quiz gives the same bytes."""
        assert moodle.render(course.quiz, draws=3) == moodle.render(course.quiz, draws=3)


def test_cli_writes_the_file(cli, tmp_path):
    """`mha export moodle --out quiz.xml` writes parseable XML."""
    out = tmp_path / "quiz.xml"
    result = cli("export", "moodle", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert ET.parse(out).getroot().tag == "quiz"
