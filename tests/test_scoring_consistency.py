"""The same answers earn the same share of each quiz item everywhere: `mha grade` (JSON), its JUnit and GitHub
Classroom reports, and the scoring rules written into the Canvas QTI and Moodle XML exports.

The exports are scored by small evaluators of what each platform computes from the exported XML:
QTI `respcondition`s in order (varequal/vargte/varlte/and/or/not/other; setvar Set/Add/Subtract;
`continue="No"` stops; SCORE kept within its decvar's bounds), and Moodle's rules (numerical: the
first answer within its tolerance gives its fraction; multichoice single: the chosen answer's fraction;
multiple: the chosen fractions added, kept within 0..1).
"""
from __future__ import annotations

import io
import itertools
import json
import shutil
import zipfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.loader import load_course
from grader.course.model import QuizKind
from grader.course.quiz import draw
from grader.exports import moodle, qti
from grader.grading.scoring import choices_credit, numeric_range

from .conftest import EXERCISES

QTI = "{http://www.imsglobal.org/xsd/ims_qtiasiv1p2}"
MOODLE_EPSILON = 1e-14  # Moodle widens every numerical tolerance by 10^-precision (PHP's precision: 14)

# A quiz whose multiple-answers item has 3 true statements of 6 (thirds), and a numeric answer with 5 decimals
THIRDS_QUIZ = """\
title: Thirds
items:
  - id: three_true
    title: Three true statements
    kind: multiple_answers
    points: 3
    visibility: public
    prompt: Which hold?
    choices:
      - {text: A, correct: true, feedback: fa}
      - {text: B, feedback: fb, mistake: mb}
      - {text: C, correct: true, feedback: fc}
      - {text: D, feedback: fd, mistake: md}
      - {text: E, correct: true, feedback: fe}
      - {text: F, feedback: ff, mistake: mf}
  - id: third
    title: A third
    kind: numeric
    points: 2
    visibility: hidden
    prompt: One third, to 5 decimals?
    answer: 0.33333
    feedback: Right.
    wrong:
      - {value: 0.3, mistake: rounded_early, feedback: Too early.}
  - id: one
    title: One of three
    kind: multiple_choice
    points: 1
    visibility: public
    prompt: Which?
    choices:
      - {text: X, feedback: fx, mistake: mx}
      - {text: Y, correct: true, feedback: fy}
      - {text: Z, feedback: fz, mistake: mz}
"""


@pytest.fixture(scope="module", params=["exercises", "thirds"])
def exercises(request, tmp_path_factory) -> Path:
    if request.param == "exercises":
        return EXERCISES
    root = tmp_path_factory.mktemp("thirds") / "exercises"
    shutil.copytree(EXERCISES, root, ignore=shutil.ignore_patterns("course.yaml", "__pycache__"))
    (root / "quiz.yaml").write_text(THIRDS_QUIZ)
    assignment = yaml.safe_load((root / "assignment.yaml").read_text())
    assignment.get("optional", {}).pop("quiz", None)  # the shipped quiz's optional items are not in this one
    (root / "assignment.yaml").write_text(yaml.safe_dump(assignment, sort_keys=False))
    return root


def candidates(v) -> list:
    """Answers to try on one item: every letter, every set of letters, or numbers at and around the range's ends."""
    letters = [c.letter for c in v.choices]
    if v.item.kind is QuizKind.MULTIPLE_CHOICE:
        return letters
    if v.item.kind is QuizKind.MULTIPLE_ANSWERS:
        return [list(s) for n in range(1, len(letters) + 1) for s in itertools.combinations(letters, n)]
    low, high = numeric_range(v.answer, v.item.tolerance)
    step = Decimal("0.0001")
    return [v.answer, float(low), float(high), float(low - step), float(high + step / 2), float(low + step / 3),
            *(w.value for w in v.wrong)]


def yaml_value(answer) -> str:
    return f"[{', '.join(answer)}]" if isinstance(answer, list) else repr(answer) if isinstance(answer, float) \
        else str(answer)


# ---------------------------------------------------------------- the platforms' rules, read from the exports

def qti_condition(node: ET.Element, response) -> bool:
    tag = node.tag.removeprefix(QTI)
    if tag in ("conditionvar", "and"):
        return all(qti_condition(child, response) for child in node)
    if tag == "or":
        return any(qti_condition(child, response) for child in node)
    if tag == "not":
        return not qti_condition(node[0], response)
    if tag == "other":
        return True
    if isinstance(response, set):  # a choice item: the idents chosen
        assert tag == "varequal", tag
        return node.text in response
    value, bound = Decimal(repr(float(response))), Decimal(node.text)
    return {"varequal": value == bound, "vargte": value >= bound, "varlte": value <= bound}[tag]


def qti_fraction(item: ET.Element, response) -> float:
    processing = item.find(f"{QTI}resprocessing")
    decvar = processing.find(f"{QTI}outcomes/{QTI}decvar")
    low, high = float(decvar.get("minvalue")), float(decvar.get("maxvalue"))
    score = 0.0
    for condition in processing.findall(f"{QTI}respcondition"):
        if not qti_condition(condition.find(f"{QTI}conditionvar"), response):
            continue
        for setvar in condition.findall(f"{QTI}setvar"):
            amount = float(setvar.text)
            score = {"Set": amount, "Add": score + amount, "Subtract": score - amount}[setvar.get("action")]
            score = min(high, max(low, score))
        if condition.get("continue") == "No":
            break
    return score / high


def qti_items(quiz) -> dict[str, ET.Element]:
    with zipfile.ZipFile(io.BytesIO(qti.render(quiz))) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".xml") and "/" in n and "meta" not in n)
        root = ET.fromstring(archive.read(name))
    titles = {item.title: item.id for item in quiz.items}
    return {titles[element.get("title")]: element for element in root.iter(f"{QTI}item")}


def qti_response(element: ET.Element, v, answer):
    if v.item.kind is QuizKind.NUMERIC:
        return answer
    idents = [label.get("ident") for label in element.iter(f"{QTI}response_label")]
    chosen = answer if isinstance(answer, list) else [answer]
    return {idents[ord(letter) - ord("a")] for letter in chosen}


def moodle_fraction(question: ET.Element, v, answer) -> float:
    answers = question.findall("answer")
    if question.get("type") == "numerical":
        for a in answers:
            if abs(answer - float(a.findtext("text"))) <= float(a.findtext("tolerance")) + MOODLE_EPSILON:
                return float(a.get("fraction")) / 100
        return 0.0
    chosen = answer if isinstance(answer, list) else [answer]
    total = sum(float(answers[ord(letter) - ord("a")].get("fraction")) / 100 for letter in chosen)
    return min(1.0, max(0.0, total))


def moodle_questions(quiz) -> dict[str, ET.Element]:
    root = ET.fromstring(moodle.render(quiz).encode())
    return {q.findtext("name/text").split(":")[0]: q for q in root if q.get("type") != "category"}


# ---------------------------------------------------------------- mha grade and its reports

def graded(exercises: Path, folder: Path, items: list[str]) -> dict[str, dict]:
    """Each item's share in mha grade's JSON, JUnit score property and GitHub result (table and points)."""
    args = ["--course", str(exercises), "grade", str(folder), *(x for i in items for x in ("--problem", i))]
    out = {}
    for fmt in ("json", "junit", "github"):
        result = CliRunner().invoke(main, [*args, "--format", fmt], env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 0, result.output
        out[fmt] = result.stdout
    shares = {i: {} for i in items}
    for p in json.loads(out["json"])["problems"]:
        shares[p["id"]]["mha grade"] = p["score"] / p["max_score"]
    for suite in ET.fromstring(out["junit"].encode()).iter("testsuite"):
        score, maximum = suite.find("properties/property[@name='score']").get("value").split("/")
        shares[suite.get("name")]["junit"] = float(score) / float(maximum)
    github = json.loads(out["github"])
    for item in items:
        tests = [t for t in github["tests"] if t["name"].split(":")[0] == item]
        worth = sum(t["max_score"] for t in tests)
        shares[item]["github points"] = sum(t["score"] for t in tests) / worth
        shares[item]["github table"] = sum(t["status"] == "pass" for t in tests) / len(tests)
    # the reporter's table for the whole step: (tests passed / tests) x max_score, against the points sent
    assert sum(t["status"] == "pass" for t in github["tests"]) / len(github["tests"]) * github["max_score"] == \
        pytest.approx(sum(t["score"] for t in github["tests"]), abs=1e-9)
    return shares


def test_the_same_answers_earn_the_same_share_everywhere(exercises, tmp_path):
    """Every letter, every set of letters and numbers at both ends of the accepted range and just outside it:
    mha grade, JUnit, GitHub (points and the reporter's table), Canvas QTI and Moodle agree on every item."""
    quiz = load_course(exercises).quiz
    draws = {item.id: draw(item, 0) for item in quiz.items if not item.manual}  # written: graded by hand
    tries = {i: candidates(v) for i, v in draws.items()}
    qti_xml, moodle_xml = qti_items(quiz), moodle_questions(quiz)
    (tmp_path / "attention.py").write_text("")
    partial = set()
    for k in range(max(map(len, tries.values()))):
        sheet = {i: options[k % len(options)] for i, options in tries.items()}
        (tmp_path / "answers.yaml").write_text("".join(f"{i}: {yaml_value(a)}\n" for i, a in sheet.items()))
        shares = graded(exercises, tmp_path, list(sheet))
        for i, answer in sheet.items():
            v = draws[i]
            shares[i]["canvas qti"] = qti_fraction(qti_xml[i], qti_response(qti_xml[i], v, answer))
            shares[i]["moodle"] = moodle_fraction(moodle_xml[i], v, answer)
            expected = shares[i]["mha grade"]
            assert all(share == pytest.approx(expected, abs=1e-4) for share in shares[i].values()), (i, answer, shares[i])
            if 0 < expected < 1:
                partial.add(i)
    assert {i for i, v in draws.items() if v.item.kind is QuizKind.MULTIPLE_ANSWERS} <= partial


class TestRules:
    """grading/scoring.py: the rules themselves."""

    @pytest.mark.parametrize("chosen,share", [("ace", 1), ("ac", Fraction(2, 3)), ("acb", Fraction(1, 3)),
                                              ("abd", 0), ("bdf", 0), ("abcdef", 0), ("", 0)])
    def test_partial_credit_with_penalty(self, chosen, share):
        """3 true statements (a, c, e): +1/3 per true one chosen, -1/3 per false one, never below 0."""
        assert choices_credit(chosen, "ace") == share

    @pytest.mark.parametrize("answer,tolerance,low,high", [
        (0.25, 1e-6, "0.2499", "0.2501"), (0.25, 0.001, "0.2490", "0.2510"), (1 / 3, 1e-6, "0.3333", "0.3334"),
        (-2.5, 0.0, "-2.5000", "-2.5000"), (1e30, 1e-6, "999999999999999999999999999999.9999",
                                           "1000000000000000000000000000000.0001")])
    def test_numeric_range_rounds_outward_to_4_decimals(self, answer, tolerance, low, high):
        """The accepted range always holds answer +- tolerance, on Canvas' 4-decimal grid, for any size of number."""
        assert numeric_range(answer, tolerance) == (Decimal(low), Decimal(high))
