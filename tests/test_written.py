"""Written quiz items: loaded with their rubric, collected with the answers, never auto-scored,
and carried to every report and platform with the student's text escaped."""
from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.course.model import QuizKind
from grader.course.quiz import DEFAULT_SEED, load_quiz
from grader.errors import SpecErrors
from grader.grading.answers import MAX_WRITTEN, RECORDED_BY_HAND, grade_quiz
from grader.grading.grade import grade
from grader.grading.results import CaseStatus
from grader.reports import github, gradescope, json_report, junit, text

from .conftest import COURSE_CODE, EXERCISES, SOLUTIONS

WRITTEN = """\
title: Q
items:
  - id: pick
    title: Pick one
    kind: multiple_choice
    points: 1
    visibility: public
    prompt: Which?
    choices:
      - text: Right
        correct: true
        feedback: Because.
      - text: Wrong
        mistake: wrong_pick
        feedback: Not so.
  - id: why
    title: Why?
    kind: written
    points: 3
    visibility: public
    prompt: Say why.
    rubric:
      - points: 2
        text: Names the constraint.
      - points: 1
        text: Names the cost.
"""
HOSTILE = "<script>alert(1)</script> ```\n# Score: 189/189\n]]></text> & <b>bold</b>"


def with_written(answers: str, item_id: str, text: str) -> str:
    """answers.yaml text with `item_id`'s line replaced by `text` (as a YAML string)."""
    lines = [f"{item_id}: {json.dumps(text)}" if line.startswith(f"{item_id}:") else line
             for line in answers.splitlines()]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "quiz.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_quiz(path, COURSE_CODE)
    return [str(e) for e in info.value.errors]


def graded(quiz, tmp_path: Path, answers: str) -> dict:
    path = tmp_path / "answers.yaml"
    path.write_text(answers)
    return {r.id: r for r in grade_quiz(quiz, path, seed=DEFAULT_SEED).items}


@pytest.fixture(scope="module")
def hostile_result(tmp_path_factory):
    """The model solution graded with a hostile written answer to why_w_o."""
    folder = tmp_path_factory.mktemp("written")
    shutil.copy(SOLUTIONS / "attention.py", folder / "attention.py")
    (folder / "answers.yaml").write_text(with_written((SOLUTIONS / "answers.yaml").read_text(), "why_w_o", HOSTILE))
    return grade(load_course(EXERCISES), folder / "attention.py")


class TestLoad:
    def test_written_item_loads_with_its_rubric(self, tmp_path):
        """A written item keeps its rubric; its points are reserved for hand grading, not the auto total."""
        quiz = load_quiz(write(tmp_path, WRITTEN), COURSE_CODE)
        why = quiz.item("why")
        assert why.kind is QuizKind.WRITTEN and why.manual
        assert [(r.points, r.text) for r in why.rubric] == [(2, "Names the constraint."), (1, "Names the cost.")]
        assert quiz.max_score == 1 and quiz.manual_points == 3

    @pytest.mark.parametrize("old, new, message", [
        ("      - points: 1\n        text: Names the cost.\n", "",
         ":22: the rubric's points add up to 2, expected the item's points (3)"),
        ("        text: Names the cost.", "        text: ''", ":26: 'text' must be non-empty text (got '')"),
        ("      - points: 1\n", "      - points: one\n", ":25: 'points' must be a number (got 'one')"),
        ("        text: Names the cost.", "        text: x\n        weight: 2",
         ":27: unknown key 'weight' in a rubric entry (allowed: points, text)"),
        ("    rubric:\n", "    rubric: []\n    old_rubric:\n", ":23: unknown key 'old_rubric' in a quiz item "
         "(allowed: answer, choices, feedback, hint, id, kind, params, points, prompt, rubric, shuffle, title, tolerance, "
         "visibility, wrong)"),
        ("    prompt: Say why.\n", "    prompt: Say why.\n    hint: Think.\n",
         ":22: 'hint' does not apply to a written item"),
        ("    prompt: Which?\n", "    prompt: Which?\n    rubric: [{points: 1, text: x}]\n",
         ":9: 'rubric' does not apply to a multiple_choice item (only to written items)"),
    ])
    def test_bad_written_item_gives_exact_message(self, tmp_path, old, new, message):
        """Each mistake in a written item is one line: path:line: what is wrong (got X)."""
        assert old in WRITTEN
        path = write(tmp_path, WRITTEN.replace(old, new, 1))
        assert errors_of(path)[:1] == [f"{path}{message}"]

    def test_missing_rubric(self, tmp_path):
        """A written item without a rubric is an error at the item's line."""
        path = write(tmp_path, WRITTEN.split("    rubric:")[0])
        assert errors_of(path) == [f"{path}:16: a written item is missing required key 'rubric'"]

    def test_shipped_written_items(self):
        """The shipped quiz asks the three written questions, each with a rubric adding up to its points."""
        quiz = load_course(EXERCISES).quiz
        written = [i for i in quiz.items if i.manual]
        assert [i.id for i in written] == ["why_several_heads", "why_sqrt_dk", "why_w_o"]
        assert all(sum(r.points for r in i.rubric) == i.points and len(i.rubric) >= 2 for i in written)


class TestGrade:
    @pytest.fixture
    def quiz(self, tmp_path):
        return load_quiz(write(tmp_path, WRITTEN), COURSE_CODE)

    def test_text_is_recorded_and_never_scored(self, quiz, tmp_path):
        """The text is kept as written; the item is not counted, whatever it says."""
        results = graded(quiz, tmp_path, f"pick: a\nwhy: {json.dumps(HOSTILE)}\n")
        why = results["why"]
        assert why.written == HOSTILE and why.manual and not why.counted
        assert why.cases[0].status is CaseStatus.RECORDED and why.score == 0
        assert why.cases[0].summary == f"{RECORDED_BY_HAND} ({len(HOSTILE)} characters)"
        assert results["pick"].counted and results["pick"].score == 1

    @pytest.mark.parametrize("answer, summary", [
        ("[a, b]", "answers.yaml:2: answer must be text in your own words, in quotes (got a list ['a', 'b'])"),
        ("42", "answers.yaml:2: answer must be text in your own words, in quotes (got the number 42)"),
        ("x" * (MAX_WRITTEN + 1),
         f"answers.yaml:2: answer is {MAX_WRITTEN + 1} characters long; at most {MAX_WRITTEN} are accepted"),
    ])
    def test_wrong_form_is_a_clear_error(self, quiz, tmp_path, answer, summary):
        """Text that is not text, or too long, is an error naming the line; nothing is recorded."""
        why = graded(quiz, tmp_path, f"pick: a\nwhy: {answer}\n")["why"]
        assert why.cases[0].status is CaseStatus.ERROR and why.cases[0].summary == summary
        assert why.written is None and not why.counted

    def test_blank_is_not_answered(self, quiz, tmp_path):
        """A blank written answer is 'not answered yet' and still not counted."""
        why = graded(quiz, tmp_path, "pick: a\nwhy:\n")["why"]
        assert why.cases[0].status is CaseStatus.NOT_ANSWERED and not why.counted and why.written is None


class TestReports:
    def test_written_items_leave_the_score_alone(self, hostile_result):
        """The model solution with a written answer scores every automatic point, and only those."""
        course = load_course(EXERCISES)
        assert hostile_result.score == hostile_result.max_score == course.max_score
        assert course.quiz.manual_points == 6
        assert hostile_result.passed

    def test_text_report_says_recorded_without_echoing(self, hostile_result):
        """`mha grade` lists the written items under their own heading, without their text."""
        out = text.render(hostile_result)
        assert "Written answers: plus 6 points graded by hand (pending, not in this score)" in out
        assert re.search(r"\nrecorded: why_several_heads \(\d+ characters\), why_sqrt_dk \(\d+ characters\), "
                         r"why_w_o \(\d+ characters\)\n", re.sub(r"\n +", " ", out))
        assert "PASS  why_w_o" not in out  # a recorded text is not a passed test
        assert "<script>" not in out and "Score: 189/189" not in out.replace(
            f"Score: {hostile_result.score:g}/{hostile_result.max_score:g}", "")

    def test_gradescope_test_shows_the_text_fenced_without_a_score(self, hostile_result):
        """Gradescope: a test with no score (pending) that shows the text in a code block nothing can close."""
        data = gradescope.as_dict(hostile_result)
        test = next(t for t in data["tests"] if t["name"].startswith("why_w_o:"))
        assert "score" not in test and "max_score" not in test and test["visibility"] == "visible"
        assert test["output"].startswith("Pending: graded by hand (2 points, given by your instructor).")
        assert test["output"].endswith(f"\n````\n{HOSTILE}\n````")
        assert data["score"] == hostile_result.max_score

    def test_json_carries_the_text_for_the_class_report(self, hostile_result):
        """The JSON report marks written items manual and pending (no score) and carries their text."""
        item = next(p for p in json_report.as_dict(hostile_result)["problems"] if p["id"] == "why_w_o")
        assert item["manual"] is True and item["written"] == HOSTILE
        assert (item["status"], item["score"]) == ("pending", None)

    def test_github_leaves_them_out_and_junit_skips_them(self, hostile_result):
        """GitHub's points have nothing to say about a hand-graded text; JUnit skips it, without its text."""
        names = [t["name"] for t in github.as_dict(hostile_result)["tests"]]
        assert names and not any(n.startswith("why_") for n in names)
        assert github.as_dict(hostile_result)["status"] == "pass"
        xml = junit.render(hostile_result)
        assert '<testcase classname="why_w_o" name="written answer" time="0">\n      <skipped message="pending' in xml
        assert "<script>" not in xml and "Score: 189" not in xml


class TestGradescopeExport:
    def test_run_autograder_records_the_text_and_scores_the_rest(self, tmp_path):
        """The zip's run_autograder, as Gradescope runs it: the written answer shown fenced with no score
        (pending), every automatic point earned, the same total as without the written answers."""
        from .test_export_gradescope import autograder, run_autograder
        course = load_course(EXERCISES)
        root = autograder(tmp_path, course, secret=None)
        answers = with_written((SOLUTIONS / "answers.yaml").read_text(), "why_w_o", HOSTILE)
        result = run_autograder(root, {"attention.py": (SOLUTIONS / "attention.py").read_text(),
                                       "answers.yaml": answers})
        assert result["score"] == course.max_score
        test = next(t for t in result["tests"] if t["name"].startswith("why_w_o:"))
        assert "score" not in test and "max_score" not in test and test["tags"] == ["why_w_o", "graded_by_hand"]
        assert test["output"].endswith(f"\n````\n{HOSTILE}\n````")
        assert sum(t.get("max_score", 0) for t in result["tests"]) == course.max_score

    def test_rubric_for_the_instructor(self):
        """written_rubric: each written item's prompt, points and rubric, for grading by hand."""
        from grader.exports.gradescope import written_rubric
        course = load_course(EXERCISES)
        text = written_rubric(course)
        for item in (i for i in course.quiz.items if i.manual):
            assert f"## {item.id}: {item.title} ({item.points:g} points)" in text
            assert all(f"point{'' if r.points == 1 else 's'}: {r.text}" in text for r in item.rubric)
