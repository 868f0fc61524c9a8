"""Written items counted honestly: the model answers, graded as CI grades `solutions/`, show every
written item as pending (graded by hand), never as a zero, in every report and export; and
`grade-all --written-scores` brings the hand scores back into the gradebook."""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from grader.classroom.written_scores import read_written_scores
from grader.cli.commands import main
from grader.errors import ExitCode, ScoresError
from grader.exports import jupyter, moodle, otter, prairielearn, qti

from .conftest import EXERCISES, SOLUTIONS

WRITTEN = ["why_several_heads", "why_sqrt_dk", "why_w_o"]


@pytest.fixture(scope="module")
def graded():
    """`mha grade solutions --format F` for each format F, as CI runs it: {format: stdout}."""
    runner = CliRunner()
    out = {}
    for fmt in ("json", "text", "gradescope", "junit"):
        result = runner.invoke(main, ["--course", str(EXERCISES), "grade", str(SOLUTIONS), "--format", fmt],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out[fmt] = result.stdout
    return out


def test_the_model_answers_have_three_written_items(course):
    """The shipped quiz's written items, 2 points each: the pending points below are theirs."""
    assert [i.id for i in course.quiz.items if i.manual] == WRITTEN
    assert course.quiz.manual_points == 6


class TestReports:
    def test_json_marks_them_pending_with_a_null_score(self, graded, core_course):
        """JSON: status pending and score null (no 0 to sum), pending_points outside score and max_score."""
        data = json.loads(graded["json"])
        written = [p for p in data["problems"] if p["id"] in WRITTEN]
        assert [p["id"] for p in written] == WRITTEN
        for p in written:
            assert (p["status"], p["score"], p["passed"], p["max_score"]) == ("pending", None, None, 2.0)
            assert p["written"] and p["manual"] is True
        assert data["pending_points"] == 6
        assert data["score"] == data["max_score"] == core_course.max_score == 166

    def test_text_says_plus_points_by_hand_and_no_zero(self, graded):
        """Text: the written answers' heading gives the points still to be given by hand; no 0/2 anywhere."""
        out = graded["text"]
        assert "\nWritten answers: plus 6 points graded by hand (pending, not in this score)\nrecorded: " in out
        assert "\nScore: 166/166 (100%), 14 of 14 problems and 17 of 17 quiz items fully correct\n" in out
        assert not re.search(r"(?<![\d.])0(/| of )2(?![\d.])", out)  # "20 of 20" is no zero

    def test_gradescope_tests_carry_no_score(self, graded):
        """Gradescope: each written item is a test without score or max_score (a message, not a zero);
        the summary says the hand-graded points are pending; the score is the automatic total."""
        data = json.loads(graded["gradescope"])
        written = [t for t in data["tests"] if "graded_by_hand" in t["tags"]]
        assert [t["tags"][0] for t in written] == WRITTEN
        for test in written:
            assert "score" not in test and "max_score" not in test and test.get("status") != "failed"
            assert test["output"].startswith("Pending: graded by hand (2 points, given by your instructor).")
        assert "Plus 6 points for the written answers, graded by hand: pending" in data["output"]
        assert data["score"] == sum(t["max_score"] for t in data["tests"] if "max_score" in t) == 166

    def test_junit_skips_them(self, graded):
        """JUnit: a skipped testcase per written item, with its message; no failure, no error, no text."""
        root = ET.fromstring(graded["junit"])
        assert (root.get("failures"), root.get("errors"), root.get("skipped")) == ("0", "0", "3")
        for item in WRITTEN:
            suite = next(s for s in root.iter("testsuite") if s.get("name") == item)
            case, = suite.iter("testcase")
            skipped, = case
            assert skipped.tag == "skipped" and skipped.get("message").startswith("pending: graded by hand (2 points)")
            assert not list(case.iter("failure")) and not list(case.iter("error"))
        assert "One head gives each query" not in graded["junit"]  # the text stays out of CI logs

    def test_the_graded_notebook_reports_them_pending(self, tmp_path, core_course):
        """The exported notebook, solved with the model answers and graded: written items pending, no zero."""
        import nbformat

        from .test_export_notebook import _solved
        path = tmp_path / "solved.ipynb"
        path.write_text(nbformat.writes(_solved(jupyter.render(core_course))))
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "grade", str(path), "--format", "json"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert {p["id"]: (p["status"], p["score"]) for p in data["problems"] if p.get("manual")} == \
            {item: ("pending", None) for item in WRITTEN}
        assert data["pending_points"] == 6 and data["score"] == data["max_score"] == 166


class TestExports:
    def test_notebook_answer_cells_are_manually_graded_for_nbgrader(self, course):
        """The notebook: a written item's answer cell is an nbgrader manually graded answer with its points."""
        cells = {c["id"]: c for c in json.loads(jupyter.render(course))["cells"]}
        for item in WRITTEN:
            assert cells[f"{item}-answer"]["metadata"]["nbgrader"] == {
                "grade": True, "solution": True, "locked": False, "points": 2, "grade_id": f"{item}-answer",
                "schema_version": 3}
            assert "Graded by hand" in "".join(cells[f"{item}-question"]["source"])
        assert not any("nbgrader" in c["metadata"] for i, c in cells.items() if not i.startswith("why_"))

    def test_otter_has_a_manual_question_per_written_item(self, course, tmp_path):
        """otter: a manual question (no test file), its rubric only inside the solution otter removes."""
        notebook = json.loads(otter.master_notebook(course, SOLUTIONS / "attention.py"))
        cells = {c["id"]: "".join(c["source"]) for c in notebook["cells"]}
        for item in (i for i in course.quiz.items if i.manual):
            assert cells[f"{item.id}-begin"] == f"# BEGIN QUESTION\nname: {item.id}\npoints: 2\nmanual: true"
            assert cells[f"{item.id}-solution-begin"] == "# BEGIN SOLUTION"
            assert item.rubric[0].text in cells[f"{item.id}-solution"]
            assert f"{item.id}-tests-begin" not in cells
        assert not any(i.id in WRITTEN for i in otter.quiz_items(course))

    def test_qti_and_moodle_make_essay_questions(self, course):
        """Canvas QTI: essay_question with the item's points; Moodle: an essay question, graded by hand."""
        import io
        import zipfile
        with zipfile.ZipFile(io.BytesIO(qti.render(course.quiz))) as archive:
            xml = next(archive.read(n) for n in archive.namelist()
                       if n.endswith(".xml") and "/" in n and not n.endswith("meta.xml"))
        types = {}
        for element in ET.fromstring(xml).iter():
            if element.tag.endswith("}item"):
                fields = {f[0].text: f[1].text for f in element.iter() if f.tag.endswith("qtimetadatafield")}
                types[element.get("title")] = (fields["question_type"], fields["points_possible"])
        written = [i for i in course.quiz.items if i.manual]
        assert [types[i.title] for i in written] == [("essay_question", "2")] * 3
        questions = ET.fromstring(moodle.render(course.quiz).encode())
        essays = [q for q in questions.iter("question") if q.get("type") == "essay"]
        assert [q.findtext("defaultgrade") for q in essays] == ["2"] * 3

    def test_prairielearn_grades_them_manually(self, course):
        """PrairieLearn: gradingMethod Manual in the question's info.json, manualPoints in the assessment."""
        for item in (i for i in course.quiz.items if i.manual):
            files = prairielearn._written_question(course, item)
            info = json.loads(files[f"questions/{prairielearn.quiz_qid(item)}/info.json"])
            assert info["gradingMethod"] == "Manual"
        assessment = next(json.loads(v) for k, v in prairielearn._course(course).items()
                          if k.endswith("infoAssessment.json"))
        quiz = {q["id"]: q for q in assessment["zones"][1]["questions"]}
        assert all(quiz[f"quiz_{i}"] == {"id": f"quiz_{i}", "manualPoints": 2} for i in WRITTEN)


# ---------------------------------------------------------------- grade-all --written-scores

def _grade_all(*args: str):
    return CliRunner().invoke(main, ["--course", str(EXERCISES), "grade-all", *args],
                              env={"MHA_COURSE_SECRET": None}, catch_exceptions=False)


@pytest.fixture(scope="module")
def class_graded(tmp_path_factory):
    """Two students graded once (both with the model answers; bob without answers.yaml): (class, out)."""
    root = tmp_path_factory.mktemp("written-class")
    for student in ("alice", "bob"):
        (root / "class" / student).mkdir(parents=True)
        shutil.copy(SOLUTIONS / "attention.py", root / "class" / student / "attention.py")
    shutil.copy(SOLUTIONS / "answers.yaml", root / "class" / "alice" / "answers.yaml")
    result = _grade_all(str(root / "class"), "--out", str(root / "out"), "--jobs", "2")
    assert result.exit_code == 0, result.output
    return root / "class", root / "out"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


class TestWrittenScores:
    def test_the_gradebook_gains_the_hand_scores(self, class_graded, tmp_path):
        """written.csv with its points filled in, read back: a column per written item and a total with
        them, given only where every one of the student's hand scores is; written.csv keeps them."""
        folder, out = class_graded
        shutil.copytree(out, tmp_path / "out")
        before = _rows(out / "gradebook.csv")
        assert not any(item in before[0] for item in WRITTEN) and "total_with_written" not in before[0]
        filled = tmp_path / "out" / "written.csv"  # filled in where grade-all wrote it, and read from there
        rows = _rows(filled)
        given = {("alice", "why_several_heads"): "2", ("alice", "why_sqrt_dk"): "1.5", ("alice", "why_w_o"): "1",
                 ("bob", "why_w_o"): "0"}
        for row in rows:
            row["points"] = given.get((row["student"], row["item"]), "")
        with filled.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        result = _grade_all(str(folder), "--out", str(tmp_path / "out"), "--written-scores", str(filled))
        assert result.exit_code == 0, result.output
        assert "hand scores: 4 written answer(s) scored by hand" in result.output
        book = {r["student"]: r for r in _rows(tmp_path / "out" / "gradebook.csv")}
        assert list(book["alice"])[-6:] == ["total", *WRITTEN, "total_with_written", "note"]
        assert [book["alice"][i] for i in (*WRITTEN, "total", "total_with_written")] == \
            ["2", "1.5", "1", "166", "170.5"]
        bob_total = book["bob"]["total"]
        assert [book["bob"][i] for i in (*WRITTEN, "total_with_written")] == ["", "", "0", ""]
        assert float(bob_total) < 166  # no answers.yaml: the quiz is not answered; the written items no zero
        kept = {(r["student"], r["item"]): r["points"] for r in _rows(filled)}
        assert kept == {(r["student"], r["item"]): given.get((r["student"], r["item"]), "") for r in rows}

    @pytest.mark.parametrize("line, message", [
        ("carol,why_w_o,1", "unknown student 'carol' (no submission of theirs was graded)"),
        ("alice,softmax,1", "unknown written item 'softmax' (the written items: why_several_heads, why_sqrt_dk, "
                            "why_w_o)"),
        ("alice,why_w_o,3", "score 3 for why_w_o is out of range (0 to 2 points)"),
        ("alice,why_w_o,-1", "score -1 for why_w_o is out of range (0 to 2 points)"),
        ("alice,why_w_o,two", "the score must be a number (got 'two')"),
        ("alice,why_w_o,nan", "the score must be a number (got 'nan')"),
    ])
    def test_a_bad_row_is_an_error_at_its_line(self, class_graded, tmp_path, line, message):
        """A bad row stops grade-all before it grades anything: exit 2, `file:line: message` on stderr."""
        folder, _ = class_graded
        scores = tmp_path / "scores.csv"
        scores.write_text(f"student,item,score\nalice,why_sqrt_dk,2\n{line}\n")
        result = _grade_all(str(folder), "--out", str(tmp_path / "out"), "--written-scores", str(scores))
        assert result.exit_code == ExitCode.USAGE == 2
        assert result.stderr.splitlines()[-1] == f"{scores}:3: {message}"  # after the no-secret warning
        assert not (tmp_path / "out" / "gradebook.csv").exists()


class TestReadWrittenScores:
    ITEMS = {"why_w_o": 2.0, "why_sqrt_dk": 2.0}

    def _read(self, tmp_path: Path, text: str, students=("alice", "=bob")):
        path = tmp_path / "scores.csv"
        path.write_text(text)
        return path, lambda: read_written_scores(path, set(students), self.ITEMS)

    def test_reads_scores_and_skips_blank_ones(self, tmp_path):
        """student,item,score rows; a blank score is not graded yet; written.csv's apostrophe is undone."""
        _, read = self._read(tmp_path, "student,item,answer,points,max_points\nalice,why_w_o,text,1.5,2\n"
                                       "alice,why_sqrt_dk,text,,2\n'=bob,why_w_o,x,0,2\n\n")
        assert read() == {"alice": {"why_w_o": 1.5}, "=bob": {"why_w_o": 0.0}}

    def test_every_bad_row_is_told(self, tmp_path):
        """All the faults at once, one line each, in file order."""
        path, read = self._read(tmp_path, "student,item,score\nalice,why_w_o,1\nalice,why_w_o,2\nzed,why_w_o,1\n")
        with pytest.raises(ScoresError) as info:
            read()
        assert info.value.errors == [f"{path}:3: a second score for alice and why_w_o (the first is on line 2)",
                                     f"{path}:4: unknown student 'zed' (no submission of theirs was graded)"]

    @pytest.mark.parametrize("text, message", [
        ("", ":1: the file is empty; expected a header naming student, item and score"),
        ("name,item,score\n", ":1: the header must name the columns student, item and score (got name, item, score)"),
    ])
    def test_a_bad_header_is_line_1(self, tmp_path, text, message):
        """Without the three columns nothing can be read: said at line 1."""
        path, read = self._read(tmp_path, text)
        with pytest.raises(ScoresError, match="^" + str(path) + message.replace("(", r"\(").replace(")", r"\)")):
            read()
