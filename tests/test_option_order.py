"""Each student's own order of a choice item's options: from their seed, the same wherever they
see or answer the quiz (grader/course/quiz.py choice_order), and the platforms' own shuffling."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.quiz import DEFAULT_SEED, LETTERS, answer_key, choice_order, draw
from grader.course.seeds import student_seed
from grader.exports import jupyter, moodle, qti
from grader.exports.markup import to_html

from .conftest import EXERCISES, SOLUTIONS

SECRET = "a course secret for option orders"
ANN, BOB = "ann@example.edu", "bob@example.edu"
PINNED = "interview_beats"  # its options are ordered on purpose (exercises/quiz.yaml: shuffle: false)


def mha(*args: str, secret: str = SECRET):
    """`mha --course exercises ...` in-process with MHA_COURSE_SECRET=`secret` ("": no secret)."""
    return CliRunner().invoke(main, ["--course", str(EXERCISES), *args], env={"MHA_COURSE_SECRET": secret},
                              catch_exceptions=False)


@pytest.fixture(scope="module")
def seeds():
    return {who: student_seed(SECRET, who) for who in (ANN, BOB)}


@pytest.fixture(scope="module")
def choice_items(core_course):
    """The choice items the packaged course asks (the core: what `mha grade` grades by default)."""
    items = [i for i in core_course.quiz.items if i.choices]
    assert len(items) == 10 and any(i.id == PINNED and not i.shuffle for i in items)
    return items


@pytest.fixture(scope="module")
def keys(core_course, seeds, choice_items):
    """Each student's right letters on every choice item, as answer_key gives them."""
    return {who: {i.id: answer_key(core_course.quiz, seed)[i.id] for i in choice_items} for who, seed in seeds.items()}


def _answers(folder: Path, key: dict) -> Path:
    """A submission folder: an empty attention.py and answers.yaml with the letters of `key`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attention.py").write_text("")
    (folder / "answers.yaml").write_text("".join(
        f"{item}: {'[' + ', '.join(value) + ']' if isinstance(value, list) else value}\n" for item, value in key.items()))
    return folder


def _scores(report: str) -> dict[str, tuple[float, float]]:
    """{item id: (score, max_score)} of a JSON report."""
    return {p["id"]: (p["score"], p["max_score"]) for p in json.loads(report)["problems"]}


class TestChoiceOrder:
    def test_two_students_see_most_choice_items_in_different_orders(self, seeds, choice_items):
        """With a course secret, two students' orders differ on most shuffled items; the pinned one is the file's."""
        shuffled = [i for i in choice_items if i.shuffle]
        differ = [i.id for i in shuffled if choice_order(i, seeds[ANN]) != choice_order(i, seeds[BOB])]
        assert len(differ) >= 0.75 * len(shuffled), differ
        pinned = next(i for i in choice_items if i.id == PINNED)
        assert choice_order(pinned, seeds[ANN]) == choice_order(pinned, seeds[BOB]) == (0, 1, 2, 3)

    def test_an_order_is_a_permutation_decided_by_the_item_and_the_seed(self, seeds, choice_items):
        """Every order holds each option once; the same item and seed always give the same order."""
        for item in choice_items:
            order = choice_order(item, seeds[ANN])
            assert sorted(order) == list(range(len(item.choices)))
            assert choice_order(item, seeds[ANN]) == order
        orders = {choice_order(i, seeds[ANN]) for i in choice_items if len(i.choices) == 4 and i.shuffle}
        assert len(orders) > 3  # not one order for every item (six such items in the core)

    def test_feedback_and_misconception_follow_the_option_not_the_letter(self, seeds, choice_items):
        """The student's letter k is the file's option order[k], with its own text, feedback and mistake."""
        for item in choice_items:
            v = draw(item, seeds[ANN])
            order = choice_order(item, seeds[ANN])
            assert [c.letter for c in v.choices] == list(LETTERS[:len(order)])
            plain = draw(item, seeds[ANN], student_order=False)  # the same numbers, in the file's order
            for shown, position in zip(v.choices, order):
                source = plain.choices[position]
                assert (shown.text, shown.feedback, shown.mistake, shown.correct) == \
                       (source.text, source.feedback, source.mistake, source.correct)
            assert plain.correct_letters == tuple(c.letter for c in item.choices if c.correct)


class TestGradedInTheStudentsLetters:
    def test_own_letters_score_full_marks_and_the_other_students_do_not(self, tmp_path, keys, choice_items):
        """`mha grade --student`: each student's right letters earn every choice item's points; the other
        student's earn them only where the two keys happen to agree, so less in total."""
        items = [x for i in choice_items for x in ("--problem", i.id)]
        points = sum(i.points for i in choice_items)
        for who, other in ((ANN, BOB), (BOB, ANN)):
            own = mha("grade", str(_answers(tmp_path / who / "own", keys[who])), "--student", who,
                      "--format", "json", *items)
            assert own.exit_code == 0, own.output
            assert all(score == full for score, full in _scores(own.stdout).values())
            assert sum(score for score, _ in _scores(own.stdout).values()) == points
            copied = mha("grade", str(_answers(tmp_path / who / "copied", keys[other])), "--student", who,
                         "--format", "json", *items)
            assert copied.exit_code == 0, copied.output  # a grade, however low, is not a failure of mha grade
            scores = _scores(copied.stdout)
            for item in choice_items:
                same = keys[who][item.id] == keys[other][item.id]
                assert (scores[item.id][0] == item.points) == same, item.id
            assert sum(score for score, _ in scores.values()) < points / 2

    def test_gradescope_reads_the_submitters_letters(self, tmp_path, keys, choice_items):
        """The Gradescope autograder's `mha grade --gradescope-metadata`: the submitter's own letters score full."""
        metadata = tmp_path / "submission_metadata.json"
        metadata.write_text(json.dumps({"users": [{"email": BOB, "name": "Bob"}]}))
        folder = _answers(tmp_path / "submission", keys[BOB])
        result = mha("grade", str(folder), "--gradescope-metadata", str(metadata), "--format", "json",
                     *(x for i in choice_items for x in ("--problem", i.id)))
        assert result.exit_code == 0, result.output
        assert all(score == full for score, full in _scores(result.stdout).values())

    def test_check_reads_the_public_items_in_the_students_letters(self, tmp_path, keys, choice_items):
        """`mha check --student`: own letters pass every public choice item; the other student's fail some."""
        public = [i.id for i in choice_items if not i.hidden]
        differing = [i for i in public if keys[ANN][i] != keys[BOB][i]]
        assert differing
        own = _answers(tmp_path / "own", {i: keys[ANN][i] for i in public})
        result = mha("check", *public, "--path", str(own / "attention.py"), "--student", ANN)
        assert result.exit_code == 0, result.output
        copied = _answers(tmp_path / "copied", {i: keys[BOB][i] for i in public})
        result = mha("check", *public, "--path", str(copied / "attention.py"), "--student", ANN)
        assert result.exit_code == 1 and all(i in result.stdout for i in differing), result.output

    def test_grade_all_reads_each_students_answers_in_their_letters(self, tmp_path, keys, choice_items):
        """`mha grade-all` with the course secret: each student's own letters earn every choice item's points."""
        for who in (ANN, BOB):
            _answers(tmp_path / "class" / who, keys[who])
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "grade-all", str(tmp_path / "class"),
                                           "--out", str(tmp_path / "out"), "--jobs", "1", "--no-progress"],
                                    env={"MHA_COURSE_SECRET": SECRET}, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        for who in (ANN, BOB):
            record = json.loads((tmp_path / "out" / "results" / f"{who}.json").read_text())
            assert record["seed"] == student_seed(SECRET, who)
            scores = _scores(json.dumps(record["result"]))
            assert all(scores[i.id] == (i.points, i.points) for i in choice_items), who


class TestShownInTheStudentsOrder:
    def test_show_lists_the_choices_in_the_students_order(self, course, seeds):
        """`mha show ITEM --student` prints the student's letters, as draw() gives them for their seed."""
        item = course.quiz.item("precise_claim")
        shown = {}
        for who in (ANN, BOB):
            result = mha("show", item.id, "--student", who)
            assert result.exit_code == 0, result.output
            shown[who] = [line.strip() for line in result.stdout.splitlines() if line.startswith("  ") and ") " in line]
            assert shown[who] == [f"{c.letter}) {c.text}" for c in draw(item, seeds[who]).choices]
        assert shown[ANN] != shown[BOB]

    def test_the_student_bundle_shows_each_student_their_letters(self, course, seeds, tmp_path):
        """A release with a roster: the bundle's own `mha show ITEM --student` prints each student's order,
        and its ASSIGNMENT.md says that its letters are an example."""
        roster = tmp_path / "roster.csv"
        roster.write_text(f"email\n{ANN}\n{BOB}\n")
        result = mha("release", "--out", str(tmp_path / "r"), "--roster", str(roster))
        assert result.exit_code == 0, result.output
        student = tmp_path / "r" / "student"
        env = {**{k: v for k, v in os.environ.items() if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT")},
               "PYTHONPATH": str(student)}
        item = course.quiz.item("precise_claim")
        for who in (ANN, BOB):
            shown = subprocess.run([sys.executable, "-m", "grader", "show", item.id, "--student", who], cwd=tmp_path,
                                   capture_output=True, text=True, timeout=120, env=env)
            assert shown.returncode == 0, shown.stderr[-2000:]
            lines = [line.strip() for line in shown.stdout.splitlines() if line.startswith("  ") and ") " in line]
            assert lines == [f"{c.letter}) {c.text}" for c in draw(item, seeds[who]).choices]
        assert "the numbers and letters below are an example" in (student / "ASSIGNMENT.md").read_text()

    def test_student_notebook_has_the_students_letters(self, core_course, seeds, tmp_path):
        """`mha export notebook --student` writes that student's order, which differs from the default's."""
        out = tmp_path / "ann.ipynb"
        result = mha("export", "notebook", "--out", str(out), "--student", ANN)
        assert result.exit_code == 0, result.output
        cells = {c["id"]: "".join(c["source"]) for c in json.loads(out.read_text())["cells"]}
        item = core_course.quiz.item("precise_claim")
        for letter, choice in zip("abcd", draw(item, seeds[ANN]).choices):
            assert f"- **{letter})** {choice.text}" in cells["precise_claim-question"]
        assert out.read_text() == jupyter.render(core_course, seeds[ANN]) != jupyter.render(core_course)

    def test_numbers_prints_the_students_order(self, course, seeds):
        """`mha numbers STUDENT`, the instructor's copy of a student's assignment, has their letters."""
        result = mha("numbers", BOB)
        assert result.exit_code == 0, result.output
        first = draw(course.quiz.item("precise_claim"), seeds[BOB]).choices[0]
        assert f"  a) {first.text}" in result.stdout


class TestWithoutASecret:
    def test_the_default_seed_keeps_the_files_order(self, choice_items):
        """No course secret means the default seed for everyone: every item's letters are the file's."""
        for item in choice_items:
            assert choice_order(item, DEFAULT_SEED) == tuple(range(len(item.choices)))
            v = draw(item, DEFAULT_SEED)
            assert [(c.letter, c.correct, c.mistake) for c in v.choices] == \
                   [(c.letter, c.correct, c.mistake) for c in item.choices]

    def test_model_answers_in_the_files_letters_score_full_marks(self, tmp_path, choice_items):
        """solutions/answers.yaml, written in the file's letters, earns every choice item's points."""
        folder = tmp_path / "model"
        folder.mkdir()
        (folder / "attention.py").write_text("")
        (folder / "answers.yaml").write_text((SOLUTIONS / "answers.yaml").read_text())
        result = mha("grade", str(folder), "--format", "json", *(x for i in choice_items for x in ("--problem", i.id)),
                     secret="")
        assert result.exit_code == 0, result.output
        assert all(score == full for score, full in _scores(result.stdout).values())

    def test_show_lists_the_files_order(self, course):
        """`mha show` without a student lists the options as the quiz file does."""
        result = mha("show", "precise_claim", secret="")
        item = course.quiz.item("precise_claim")
        assert [f"  {c.letter}) {c.text}" for c in item.choices] == \
               [line for line in result.stdout.splitlines() if line.startswith("  ") and ") " in line]


class TestPlatformsShuffle:
    def test_qti_shuffles_answers_and_marks_the_pinned_item(self, course):
        """Canvas' quiz-wide shuffle_answers is on; the pinned item's render_choice says shuffle="No";
        choices are written in the file's order (Canvas orders them for each student)."""
        with zipfile.ZipFile(io.BytesIO(qti.render(course.quiz))) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
        meta = ET.fromstring(next(v for k, v in files.items() if k.endswith("assessment_meta.xml")))
        assert meta.findtext("{*}shuffle_answers") == "true"
        questions = ET.fromstring(next(v for k, v in files.items() if k.endswith(".xml") and "/" in k
                                       and not k.endswith("meta.xml")))
        by_title = {item.get("title"): item for item in questions.findall(".//{*}item")}
        for item in course.quiz.items:
            if not item.choices:
                continue
            render = by_title[item.title].find(".//{*}render_choice")
            assert render.get("shuffle") == (None if item.shuffle else "No"), item.id
            texts = [label.findtext(".//{*}mattext") for label in render.findall("{*}response_label")]
            assert texts == [to_html(c.text) for c in draw(item, DEFAULT_SEED).choices], item.id

    def test_moodle_shuffles_every_choice_item_but_the_pinned_one(self, course):
        """<shuffleanswers> is true for every choice question except the pinned item's, in the file's order."""
        root = ET.fromstring(moodle.render(course.quiz, draws=2).encode())
        found = {}
        for question in root:
            if question.get("type") == "multichoice":
                item = course.quiz.item(question.findtext("name/text").split(":")[0])
                found[item.id] = question.findtext("shuffleanswers")
                right = [float(a.get("fraction")) > 0 for a in question.findall("answer")]
                assert right == [c.correct for c in item.choices], item.id
        assert found == {i.id: "true" if i.shuffle else "false" for i in course.quiz.items if i.choices}
        assert found[PINNED] == "false"
