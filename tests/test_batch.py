"""`mha grade-all` and grader.classroom.batch: discovery, parallel grading, resume, gradebook, item analysis.

One class of six is graded once per module (two at a time, 2 s per problem): alice (the model
answers), bob (softmax over the wrong axis and one wrong quiz choice), carol (quiz answers but no
attention.py), dave (an infinite loop in parameter_count), erin (os._exit at import),
frank.py (the model code as a single file, no quiz answers) and gina (the model answers with
one unclosed parenthesis). Tests that rerun copy it first.
"""
from __future__ import annotations

import csv
import html
import io
import json
import multiprocessing
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from grader.classroom import batch
from grader.cli.commands import main
from grader.course.seeds import student_seed
from grader.errors import ExitCode, SubmissionError
from grader.grading.grade import grade
from grader.grading.results import GradeResult
from grader.sandbox.isolation import become_subreaper
from grader.sandbox.limits import Limits

from .conftest import EXERCISES, ROOT, SOLUTIONS, solution_source
from .test_hostile import HOSTILE, leftovers

TIMEOUT = "5"  # seconds per problem: dave's infinite loop costs this much; a busy machine stays far inside it
WRONG_AXIS_SOFTMAX = """

def softmax(scores):
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)
"""
INFINITE_LOOP = """

def parameter_count(d_model, num_heads, bias=True):
    while True:
        pass
"""
EXIT_AT_IMPORT = "import os\n\nos._exit(3)\n"
BOB_WRITES = '"<img src=x onerror=alert(1)> W_O mixes\\nthe heads"'  # a written answer, as YAML
STUDENTS = ["alice", "bob", "carol", "dave", "erin", "frank", "gina"]


def make_class(root: Path) -> Path:
    """The six submissions described in the module docstring, under root/class."""
    folder = root / "class"
    answers = (SOLUTIONS / "answers.yaml").read_text()
    model_w_o = next(line for line in answers.splitlines() if line.startswith("why_w_o:"))
    files = {
        "alice/attention.py": solution_source(), "alice/answers.yaml": answers,
        "bob/attention.py": solution_source() + WRONG_AXIS_SOFTMAX,
        "bob/answers.yaml": answers.replace("\npruning: a", "\npruning: b").replace(model_w_o, f"why_w_o: {BOB_WRITES}"),
        "carol/answers.yaml": answers,
        "dave/attention.py": solution_source() + INFINITE_LOOP,
        "erin/attention.py": EXIT_AT_IMPORT,
        "frank.py": solution_source(),
        "gina/attention.py": solution_source().replace("np.exp(", "np.exp((", 1), "gina/answers.yaml": answers,
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    assert "pruning: b" in files["bob/answers.yaml"]
    return folder


def grade_all(*args: str, secret: str | None = None):
    """Run `mha grade-all ...` in-process; the course secret is `secret` (none by default)."""
    return CliRunner().invoke(main, ["--course", str(EXERCISES), "grade-all", *args],
                              env={"MHA_COURSE_SECRET": secret}, catch_exceptions=False)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def snapshot(out: Path) -> dict[str, bytes]:
    """Every per-student file and table under `out`, by relative path."""
    names = [*out.glob("results/*.json"), *out.glob("feedback/*.txt"), *out.glob("*.csv"), *out.glob("*.json")]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in names}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded once: (class folder, output folder, CLI result)."""
    root = tmp_path_factory.mktemp("grade-all")
    folder, out = make_class(root), root / "out"
    result = grade_all(str(folder), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT)
    return folder, out, result


@pytest.fixture
def regradable(graded, tmp_path):
    """A copy of the graded class and its output, to grade again."""
    folder, out, _ = graded
    shutil.copytree(folder, tmp_path / "class")
    shutil.copytree(out, tmp_path / "out")
    return tmp_path / "class", tmp_path / "out"


class TestGradeAllMessages:
    def test_no_secret_warning_names_a_course_folder_never_the_package(self, tmp_path, monkeypatch, capsys):
        """Without a course secret, a course folder's warning names its own course.yaml; the packaged
        course's names MHA_COURSE_SECRET and the instructor's own course folder, never a path of
        the installed package or of the packaged course."""
        from grader.cli.course_source import CourseSource
        from grader.cli.grade_all import _seeds
        from grader.paths import PACKAGE, packaged_course
        for variable in ("MHA_COURSE_SECRET", "MHA_COURSE", "MHA_EXERCISES"):
            monkeypatch.delenv(variable, raising=False)
        own = tmp_path / "course"
        own.mkdir()
        (own / "assignment.yaml").write_text("title: t\n")
        (tmp_path / "empty").mkdir()
        monkeypatch.chdir(tmp_path / "empty")
        warnings = {}
        for name, source in (("own", CourseSource(own)), ("packaged", CourseSource(None))):
            assert _seeds(source)("ann") == student_seed(None, None)
            warnings[name] = capsys.readouterr().err
        assert warnings["own"] == (f"warning: no course secret (MHA_COURSE_SECRET or 'secret' in {own / 'course.yaml'}): "
                                   "every student is graded on the default seed\n")
        assert warnings["packaged"] == (
            "warning: no course secret (MHA_COURSE_SECRET, or 'secret' in course.yaml of your own course folder "
            "(`mha new course DIR` makes one; choose it with --course DIR)): every student is graded on the "
            "default seed\n")
        assert str(PACKAGE) not in warnings["packaged"] and str(packaged_course()) not in warnings["packaged"]

    def test_progress_counts_each_student_as_it_is_reported(self, capsys):
        """--progress off a terminal: one line per student as its outcome comes in, 1/N up to N/N."""
        from types import SimpleNamespace

        from grader.cli.grade_all import _progress
        outcomes = [SimpleNamespace(submission=SimpleNamespace(student=s), status="graded", resumed=s == "ben")
                    for s in ("ann", "ben", "cy")]
        seen = []
        with _progress(len(outcomes), True) as step:
            for outcome in outcomes:
                step(outcome)
                seen.append(capsys.readouterr().err)
        assert seen == ["[1/3] ann: graded\n", "[2/3] ben: graded (unchanged)\n", "[3/3] cy: graded\n"]


class TestGradeAllClass:
    def test_exit_code_summary_and_one_warning(self, graded):
        """Exit 0, the summary counts each status, and the missing secret is warned about once."""
        _, out, result = graded
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [
            "7 students: 3 graded, 1 syntax error, 1 import failure, 1 timeout, 1 empty, 0 failed (0 unchanged "
            "since the last run, not graded again); mean 90.1 of 166",
            f"gradebook: {out / 'gradebook.csv'}",
            f"report: {out / 'report.html'}",
            f"written answers, to grade by hand: {out / 'written.html'} and {out / 'written.csv'}",
        ]
        assert result.stderr.count("warning: no course secret") == 1
        assert "Traceback" not in result.output

    def test_gradebook_rows_statuses_and_totals(self, graded, core_course):
        """One row per student, in order, with each status and the exact total; columns are every item."""
        rows = read_csv(graded[1] / "gradebook.csv")
        course = core_course       # what grade-all grades: the core
        items = [p.id for p in course.problems] + [i.id for i in course.quiz.items if not i.manual]
        assert list(rows[0]) == ["student", "status", *items, "total", "note"]  # written items: graded by hand
        assert [(r["student"], r["status"], r["total"]) for r in rows] == [
            ("alice", "graded", "166"), ("bob", "graded", "138"), ("carol", "empty", "26"),
            ("dave", "timeout", "135"), ("erin", "import failure", "0"), ("frank", "graded", "140"),
            ("gina", "syntax error", "26")]
        bob = {k: v for k, v in rows[1].items() if v not in ("5", "6", "8", "10", "15", "20", "1", "2", "3")}
        assert rows[1]["softmax"] == "3"  # the wrong axis: some cases right
        assert bob == {"student": "bob", "status": "graded", "multi_head_attention": "0",
                       "pruning": "0", "total": "138", "note": ""}
        assert rows[3]["parameter_count"] == "0" and rows[3]["softmax"] == "10"

    def test_one_result_and_one_feedback_file_per_student(self, graded):
        """results/<student>.json and feedback/<student>.txt exist for each student and say what happened."""
        out = graded[1]
        assert sorted(p.stem for p in (out / "results").iterdir()) == STUDENTS
        assert sorted(p.stem for p in (out / "feedback").iterdir()) == STUDENTS
        records = {s: json.loads((out / "results" / f"{s}.json").read_text()) for s in STUDENTS}
        assert {s: (r["status"], r["seed"], r["result"]["score"]) for s, r in records.items()} == {
            "alice": ("graded", 0, 166), "bob": ("graded", 0, 138), "carol": ("empty", 0, 26),
            "dave": ("timeout", 0, 135), "erin": ("import failure", 0, 0), "frank": ("graded", 0, 140),
            "gina": ("syntax error", 0, 26)}
        feedback = {s: (out / "feedback" / f"{s}.txt").read_text() for s in STUDENTS}
        assert "likely mistake (softmax-wrong-axis)" in feedback["bob"]
        assert "no attention.py was submitted (found: answers.yaml)" in feedback["carol"]
        assert "FAIL  parameter_count: More heads, same parameters  [0/5]" in feedback["dave"]
        assert "timed out (time limit of 5 s for this problem)" in feedback["dave"]
        assert "FAIL  attention.py stopped the process while being imported\n      the process exited with code 3\n" \
            in feedback["erin"]
        assert feedback["gina"].count("was never closed") == 1 and "attention.py has a syntax error on line" in feedback["gina"]
        assert feedback["alice"].endswith("Score: 166/166 (100%), 14 of 14 problems and 17 of 17 quiz items fully "
                                          "correct\n")

    def test_no_temporary_paths_or_timings_in_results(self, graded):
        """Results name the student, not a path, and carry no execution time."""
        for path in (graded[1] / "results").iterdir():
            text = path.read_text()
            assert "/tmp" not in text and "mha-run-" not in text and "execution_time" not in text
            assert json.loads(text)["result"]["submission"] == path.stem
        assert "mha-run-" not in (graded[1] / "feedback" / "bob.txt").read_text()

    def test_item_analysis_counts(self, graded):
        """Per item: exact full-marks and zero counts, distribution and mean; 7 students analysed."""
        data = json.loads((graded[1] / "item_analysis.json").read_text())
        items = {i["id"]: i for i in data["items"]}
        assert (data["students"], data["max_total"], data["mean_total"]) == (7, 166.0, round(631 / 7, 4))
        assert sorted(data["totals"]) == [0.0, 26.0, 26.0, 135.0, 138.0, 140.0, 166.0]
        counts = {k: (i["full_marks"], i["zero"]) for k, i in items.items()}
        assert counts["softmax"] == (3, 3)                       # alice, dave, frank / carol, erin, gina
        assert counts["parameter_count"] == (3, 4)               # alice, bob, frank / carol, dave, erin, gina
        assert counts["multi_head_attention"] == (3, 4)          # bob's softmax breaks it too
        assert counts["count_routing_distributions"] == (4, 3)
        assert counts["pruning"] == (3, 4)                       # alice, carol, gina
        assert counts["distributions_one_head"] == (4, 3)        # alice, bob, carol, gina answered
        assert items["softmax"]["distribution"] == [[0.0, 3], [3.0, 1], [10.0, 3]]
        assert items["softmax"]["mean"] == round((10 + 10 + 10 + 3) / 70, 4)
        assert items["count_routing_distributions"]["discrimination"] == 1.0
        rows = read_csv(graded[1] / "item_analysis.csv")
        assert [r["item"] for r in rows] == [i["id"] for i in data["items"]]
        assert rows[0]["distribution"] == "0:3 3:1 10:3" and {r["flag"] for r in rows} == {""}

    def test_misconception_counts(self, graded):
        """misconceptions.csv: how many students made each named mistake, in item order, with its
        message. Bob's attention is right but calls his broken softmax: it is pointed at softmax, not
        told a mistake of its own."""
        rows = read_csv(graded[1] / "misconceptions.csv")
        assert [(r["item"], r["mistake"], r["students"]) for r in rows] == [
            ("softmax", "softmax-wrong-axis", "1"),
            ("pruning", "pruning_means_useless", "1"),
        ]
        assert rows[0]["message"].startswith("Your weights are normalized down the first axis")
        assert rows[1]["message"].startswith("Too strong.")

    def test_plots_and_html_report(self, graded, core_course):
        """Two SVG plots, and one HTML page holding both and a row per item and mistake."""
        out = graded[1]
        assert sorted(p.name for p in (out / "plots").iterdir()) == ["misconceptions.svg", "score_histogram.svg"]
        page = (out / "report.html").read_text()
        for name in ("score_histogram.svg", "misconceptions.svg"):
            svg = (out / "plots" / name).read_text()
            assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg" and svg in page
        assert "Score distribution (7 students, mean 90.1)" in page
        scored = [i for i in core_course.quiz.items if not i.manual]
        assert page.count("<tr><td><code>") == len(core_course.problems) + len(scored) + 2 + 7
        assert "7 students: 3 graded, 1 syntax error, 1 import failure, 1 timeout, 1 empty. 7 analysed; " \
               "mean total 90.14 of 166." in page
        assert "Only 7 students were analysed." in page  # the small-sample caveat
        assert "Your weights are normalized down the first axis" in page  # a mistake's message, not only its id
        assert '<td><code>gina</code></td><td><span class="bad">syntax error</span></td><td class=n>26</td>' in page


class TestWrittenAnswers:
    def test_each_students_text_escaped_beside_the_rubric(self, graded, course):
        """written.html shows every written item's rubric and each student's text, escaped; no score counts it."""
        out = graded[1]
        page = (out / "written.html").read_text()
        written = [i for i in course.quiz.items if i.manual]
        assert [i.id for i in written] == ["why_several_heads", "why_sqrt_dk", "why_w_o"]
        assert "<img" not in page
        assert "<pre>&lt;img src=x onerror=alert(1)&gt; W_O mixes\nthe heads</pre>" in page
        assert page.count('<p class="none">no answer</p>') == 3 * len(written)  # dave, erin, frank: no answers.yaml
        assert page.count("<pre>") == len(written) + 4 * len(written)  # the prompts, then 4 students' answers
        for item in written:
            assert all(html.escape(r.text) in page for r in item.rubric)

    def test_csv_has_a_points_column_to_fill_in(self, graded):
        """written.csv: one row per student and written item, the text as written, points left blank."""
        rows = read_csv(graded[1] / "written.csv")
        assert len(rows) == 3 * len(STUDENTS)
        bob = next(r for r in rows if r["student"] == "bob" and r["item"] == "why_w_o")
        assert bob == {"student": "bob", "item": "why_w_o", "answer": "<img src=x onerror=alert(1)> W_O mixes\nthe heads",
                       "points": "", "max_points": "2"}

    def test_formula_cells_are_quoted(self, course):
        """A text a spreadsheet would run as a formula is written with a leading apostrophe."""
        from grader.classroom.analysis import StudentRow
        from grader.reports.written import render_csv
        item = course.quiz.item("why_w_o")
        text = render_csv([item], [StudentRow("=evil", {}, written={"why_w_o": "=HYPERLINK(\"x\")"})])
        assert list(csv.reader(io.StringIO(text)))[1][:3] == ["'=evil", "why_w_o", "'=HYPERLINK(\"x\")"]


class TestGradeAllRerun:
    def test_rerun_skips_unchanged_and_regrades_changed(self, regradable):
        """A rerun grades nothing unchanged; after one file changes, only that student is graded."""
        folder, out = regradable
        before = snapshot(out)
        again = grade_all(str(folder), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT)
        assert again.exit_code == 0
        assert "(7 unchanged since the last run, not graded again)" in again.stdout
        assert snapshot(out) == before
        with (folder / "frank.py").open("a") as handle:
            handle.write("\nUNUSED = 1\n")
        changed = grade_all(str(folder), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT)
        assert "(6 unchanged since the last run, not graded again)" in changed.stdout
        assert (out / "results" / "frank.json").read_bytes() != before["results/frank.json"]
        assert read_csv(out / "gradebook.csv")[5]["total"] == "140"

    def test_changed_limits_grade_everybody_again(self, regradable):
        """Results depend on the limits: a new --timeout grades every student again."""
        folder, out = regradable
        result = grade_all(str(folder), "--out", str(out), "--jobs", "2", "--timeout", "6")
        assert "(0 unchanged since the last run" in result.stdout
        assert "timed out (time limit of 6 s for this problem)" in (out / "feedback" / "dave.txt").read_text()

    def test_force_regrades_with_byte_identical_results(self, regradable):
        """--force grades everybody again, and every result, feedback and table is byte-identical."""
        folder, out = regradable
        before = snapshot(out)
        forced = grade_all(str(folder), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT, "--force")
        assert forced.exit_code == 0
        assert "(0 unchanged since the last run, not graded again)" in forced.stdout
        after = snapshot(out)
        assert sorted(after) == sorted(before) and len(after) == 2 * len(STUDENTS) + 5
        assert [name for name in after if after[name] != before[name]] == []


class TestGradeAllInputs:
    def test_gradescope_export_layout(self, tmp_path):
        """submission_metadata.yml names each folder's submitters: the first one's email is the student (the
        default seed_key)."""
        export = tmp_path / "export"
        (export / "submission_101").mkdir(parents=True)
        (export / "submission_101" / "attention.py").write_text(EXIT_AT_IMPORT)
        (export / "submission_102").mkdir()
        (export / "submission_102" / "notes.txt").write_text("forgot the code")
        (export / "submission_metadata.yml").write_text(textwrap.dedent("""\
            submission_101:
              :submitters:
              - :name: Ann Lee
                :sid: '2024001'
                :email: ann@example.edu
              - :name: Ben Ong
                :sid: '2024002'
              :created_at: 2026-01-27 12:00:00.000000000 -08:00
              :score: !ruby/object:BigDecimal 18:0.0
              :history: []
            submission_102:
              :submitters:
              - :name: Cy Day
                :email: cy@example.edu
            submission_103:
              :submitters:
              - :name: Di Eve
                :sid: 2024004
                :email: di@example.edu
            """))
        found = batch.discover(export)
        assert [(s.student, s.folder.name, s.source is not None) for s in found] == [
            ("ann@example.edu", "submission_101", True), ("cy@example.edu", "submission_102", False),
            ("di@example.edu", "export", False)]
        assert found[2].note == "the export has no folder 'submission_103'"
        result = grade_all(str(export), "--out", str(tmp_path / "out"), "--jobs", "2", "--timeout", TIMEOUT)
        assert result.exit_code == 0, result.output
        rows = read_csv(tmp_path / "out" / "gradebook.csv")
        assert [(r["student"], r["status"], r["total"]) for r in rows] == [
            ("ann@example.edu", "import failure", "0"), ("cy@example.edu", "empty", "0"), ("di@example.edu", "empty", "0")]
        assert "no attention.py was submitted (found: notes.txt)" in (tmp_path / "out" / "feedback" /
                                                                      "cy@example.edu.txt").read_text()

    def test_course_secret_gives_each_student_their_own_seed(self, tmp_path):
        """With MHA_COURSE_SECRET each student is graded on their keyed seed, with no warning."""
        for student in ("ann", "ben"):
            (tmp_path / "class" / student).mkdir(parents=True)
            (tmp_path / "class" / student / "attention.py").write_text(EXIT_AT_IMPORT)
        secret = "a course secret for tests"
        result = grade_all(str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "2", secret=secret)
        seeds = {s: json.loads((tmp_path / "out" / "results" / f"{s}.json").read_text())["seed"] for s in ("ann", "ben")}
        assert result.exit_code == 0 and "warning" not in result.stderr
        assert seeds == {"ann": student_seed(secret, "ann"), "ben": student_seed(secret, "ben")}
        assert seeds["ann"] != seeds["ben"]

    def test_no_submissions_is_a_usage_error(self, tmp_path):
        """An empty or missing folder, or --out the same folder, is exit 2 with a message naming it."""
        empty = grade_all(str(tmp_path), "--out", str(tmp_path / "out"))
        assert empty.exit_code == ExitCode.USAGE
        assert empty.stderr.splitlines()[-1].startswith(f"{tmp_path}: no submissions (expected one folder")
        missing = grade_all(str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
        assert missing.exit_code == ExitCode.USAGE
        assert missing.stderr.splitlines()[-1] == f"{tmp_path / 'nope'}: not a folder of submissions"
        same = grade_all(str(tmp_path), "--out", str(tmp_path))
        assert same.exit_code == ExitCode.USAGE
        assert same.stderr.splitlines()[-1] == f"{tmp_path}: --out must be another folder than SUBMISSIONS (or one inside it)"

    def test_grader_failure_on_one_submission_is_recorded_and_exits_1(self, tmp_path, monkeypatch):
        """The grader failing on one student leaves blank scores, status error and a note for them only;
        exit 1 (some submission failed, everything written), never 4."""
        import grader.grading.grade
        real = grader.grading.grade.grade

        def fragile(course, files, *, limits, seed, cache=None):  # the student's files as read
            if b"BOOM" in files.source.data:
                raise RuntimeError("boom")
            return real(course, files, problem_ids=["softmax"], limits=limits, seed=seed, cache=cache)
        monkeypatch.setattr(grader.grading.grade, "grade", fragile)
        for student, source in (("ann", solution_source()), ("ben", "BOOM = 1\n")):
            (tmp_path / "class" / student).mkdir(parents=True)
            (tmp_path / "class" / student / "attention.py").write_text(source)
        result = grade_all(str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "2")
        rows = read_csv(tmp_path / "out" / "gradebook.csv")
        assert result.exit_code == ExitCode.FAILED
        assert "ben: grading failed: RuntimeError: boom" in result.stderr
        assert (rows[0]["status"], rows[0]["softmax"], rows[1]["status"]) == ("graded", "10", "error")
        assert {v for k, v in rows[1].items() if k not in ("student", "status", "note")} == {""}
        assert (rows[0]["note"], rows[1]["note"]) == ("", "RuntimeError: boom")
        assert json.loads((tmp_path / "out" / "item_analysis.json").read_text())["students"] == 1
        log = (tmp_path / "out" / "grader-errors.log").read_text()
        assert log.startswith("== ben: RuntimeError: boom\nTraceback (most recent call last):\n")
        assert re.search(r'in fragile\n +raise RuntimeError\("boom"\)\nRuntimeError: boom\n', log)
        assert "ann" not in log
        assert f"the grader's tracebacks: {tmp_path / 'out' / 'grader-errors.log'}" in result.stderr
        assert "Traceback" not in result.stderr and "Traceback" not in (tmp_path / "out" / "feedback" / "ben.txt").read_text()
        assert "traceback" not in json.loads((tmp_path / "out" / "results" / "ben.json").read_text())

    def test_a_lone_surrogate_in_one_answers_file_stops_no_class(self, tmp_path):
        """--jobs 1, five students, one whose written answer holds a lone surrogate (a legal YAML
        escape, which no UTF-8 encoder takes): every student graded, the full gradebook, report and
        feedback written, the surrogate an escape (and a student folder whose name is not UTF-8);
        exit 0 (nothing failed), never 4."""
        root = tmp_path / "class"
        for student in ("ann", "ben", "cal", "dee", "ev\udcffe"):  # eve's folder name is not UTF-8 (b"ev\xffe")
            (root / student).mkdir(parents=True)
            (root / student / "attention.py").write_text(solution_source() if student == "ann" else "# nothing yet\n")
        (root / "cal" / "answers.yaml").write_text('why_several_heads: "one head \\ud800 cannot"\nbad\\udcff: 1\n')
        result = grade_all(str(root), "--out", str(tmp_path / "out"), "--jobs", "1", "--timeout", TIMEOUT)
        assert result.exit_code == 0, result.stderr
        rows = read_csv(tmp_path / "out" / "gradebook.csv")
        assert [(r["student"], r["status"]) for r in rows] == [
            ("ann", "graded"), ("ben", "empty"), ("cal", "empty"), ("dee", "empty"), ("ev\\udcffe", "empty")]
        assert float(rows[0]["total"]) > 0 and (tmp_path / "out" / "report.html").is_file()
        record = json.loads((tmp_path / "out" / "results" / "cal.json").read_bytes().decode("utf-8"))
        written = next(p for p in record["result"]["problems"] if p["id"] == "why_several_heads")["written"]
        assert written == "one head \\ud800 cannot"  # the escape as text, never the surrogate
        assert "\\udcff" in (tmp_path / "out" / "feedback" / "cal.txt").read_text(encoding="utf-8")

    def test_a_submission_the_grader_fails_on_twice_is_grader_error(self, tmp_path, monkeypatch):
        """The grader failing on the same files: 'error' (graded again) in the first run, 'grader-error'
        with a note in the second, read back (not graded again) in the third; exit 1 each time."""
        import grader.grading.grade
        calls = []

        def broken(course, files, *, limits, seed, cache=None):
            calls.append(files.label)
            raise RuntimeError("boom")
        monkeypatch.setattr(grader.grading.grade, "grade", broken)
        (tmp_path / "class" / "ann").mkdir(parents=True)
        (tmp_path / "class" / "ann" / "attention.py").write_text("x = 1\n")
        statuses = []
        for _ in range(3):
            result = grade_all(str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "1")
            assert result.exit_code == ExitCode.FAILED, result.stderr
            row = read_csv(tmp_path / "out" / "gradebook.csv")[0]
            statuses.append((row["status"], row["note"], row["total"]))
        assert statuses == [("error", "RuntimeError: boom", "")] + [("grader-error", "RuntimeError: boom", "")] * 2
        assert len(calls) == 2

    def test_grader_failures_traceback_on_stderr_with_mha_debug(self, tmp_path, monkeypatch):
        """MHA_DEBUG=1: each failure's traceback on stderr too; a rerun where nothing fails removes the log."""
        import grader.grading.grade
        real = grader.grading.grade.grade
        broken = {"on": True}

        def fragile(course, files, *, limits, seed, cache=None):
            if broken["on"]:
                raise RuntimeError("boom")
            return real(course, files, problem_ids=["softmax"], limits=limits, seed=seed, cache=cache)
        monkeypatch.setattr(grader.grading.grade, "grade", fragile)
        monkeypatch.setenv("MHA_DEBUG", "1")
        (tmp_path / "class" / "ann").mkdir(parents=True)
        (tmp_path / "class" / "ann" / "attention.py").write_text(solution_source())
        result = grade_all(str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "1")
        assert result.exit_code == ExitCode.FAILED
        assert re.search(r'in fragile\n +raise RuntimeError\("boom"\)\nRuntimeError: boom\n', result.stderr)
        broken["on"] = False
        again = grade_all(str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "1")
        assert again.exit_code == 0, again.stderr
        assert not (tmp_path / "out" / "grader-errors.log").exists()


class TestDiscover:
    def test_folders_files_and_nested_folders(self, tmp_path):
        """Sub-folders, <student>.py files and one level of nesting are found; dot, _ and --out are not."""
        for name in ("ann/attention.py", "ann/answers.yaml", "ben/hw/attention.py", "cy.py", ".git/attention.py",
                     "_private/attention.py", "out/attention.py", "notes.txt"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("x = 1\n")
        found = batch.discover(tmp_path, exclude=tmp_path / "out")
        assert [(s.student, s.source and s.source.relative_to(tmp_path).as_posix(),
                 s.answers and s.answers.name) for s in found] == [
            ("ann", "ann/attention.py", "answers.yaml"), ("ben", "ben/hw/attention.py", None), ("cy", "cy.py", None)]

    def test_link_out_of_the_folder_is_not_read(self, tmp_path):
        """An attention.py that links to the solutions is no submission, and the feedback says why."""
        (tmp_path / "ann").mkdir()
        (tmp_path / "ann" / "attention.py").symlink_to(SOLUTIONS / "attention.py")
        (found,) = batch.discover(tmp_path)
        assert (found.source, found.note) == (None, "attention.py is a link: it was not read (submit the file itself)")

    def test_ids_made_safe_alike_name_different_files(self, tmp_path):
        """Two ids made safe for file names alike ("a b", "a_b") still name files of their own: a
        safe id names its files itself, another its safe form and a hash of itself."""
        (tmp_path / "a b").mkdir()
        (tmp_path / "a_b").mkdir()
        keys = {s.student: s.key for s in batch.discover(tmp_path)}
        assert keys["a_b"] == "a_b"
        assert re.fullmatch(r"a_b-[0-9a-f]{8}", keys["a b"])

    def test_invalid_gradescope_metadata_names_its_line(self, tmp_path):
        """Broken metadata YAML is a usage error with file and line."""
        (tmp_path / "submission_metadata.yml").write_text("submission_1:\n  :submitters: [\n")
        with pytest.raises(SubmissionError, match=r"submission_metadata.yml:\d+: invalid YAML"):
            batch.discover(tmp_path)


class TestWorkDoneOncePerSeed:
    def test_cases_and_quiz_items_are_prepared_once_for_a_class(self, course, tmp_path, monkeypatch):
        """Three students on the default seed: each case is prepared, and each quiz item drawn,
        once for the class, not once per student; the scores are unaffected. (A second run reads
        them from the prepared-cases store: tests/test_prepared_store.py.)"""
        import grader.course.quiz
        import grader.grading.prepared
        from grader.paths import CACHE_ENV
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # an empty store: everything prepared here
        prepared, drawn = [], []
        real_prepare, real_draw = grader.grading.prepared.prepare, grader.course.quiz.draw
        monkeypatch.setattr(grader.grading.prepared, "prepare", lambda p, c, v=0: prepared.append(1) or real_prepare(p, c, v))
        monkeypatch.setattr(grader.course.quiz, "draw", lambda item, seed: drawn.append(1) or real_draw(item, seed))
        found = write_class(tmp_path / "class", {name: solution_source() for name in ("ann", "ben", "cy")})
        outcomes = list(batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=1))
        assert len(prepared) == sum(len(p.cases) for p in course.problems)
        assert len(drawn) == len(course.quiz.items)
        problems = {p.id: p.points for p in course.problems}
        assert all({k: v for k, v in o.row.scores.items() if k in problems} == problems for o in outcomes)


class TestGradingPath:
    def test_grading_imports_no_plotting_library(self, tmp_path):
        """Grading a class and writing its report, plots included, loads neither matplotlib nor PIL."""
        (tmp_path / "class" / "ann").mkdir(parents=True)
        (tmp_path / "class" / "ann" / "attention.py").write_text(solution_source())
        script = textwrap.dedent(f"""
            import sys
            from grader.classroom import batch
            from grader.course.loader import load_course
            from grader.grading.grade import grade
            assignment = load_course({str(EXERCISES)!r})
            found = batch.discover({str(tmp_path / 'class')!r})
            outcomes = list(batch.grade_all(assignment, found, {str(tmp_path / 'out')!r}, seed_of=lambda s: 0,
                                            grader=lambda a, path, seed: grade(a, path, problem_ids=["softmax"])))
            from pathlib import Path
            from grader.cli.grade_all import write_reports
            write_reports(assignment, [outcomes[0].row], Path({str(tmp_path / 'out')!r}))
            plots = sorted(p.name for p in Path({str(tmp_path / 'out' / 'plots')!r}).iterdir())
            print(outcomes[0].status, plots, sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'PIL')))
        """)
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "graded ['misconceptions.svg', 'score_histogram.svg'] []"


class TestWriteGradebook:
    def test_error_rows_are_blank_and_rows_sorted(self, tmp_path):
        """Rows come out by student id; a failed student's scores and total are blank, not 0."""
        from grader.classroom.analysis import StudentRow
        rows = [StudentRow("zoe", {"a": 1.0, "b": 2.5}), StudentRow("amy", {}, status="error"),
                StudentRow("bo", {"a": 0.5}, status="empty")]
        batch.write_gradebook(tmp_path / "g.csv", ["a", "b"], rows)
        assert (tmp_path / "g.csv").read_text() == ("student,status,a,b,total,note\namy,error,,,,\n"
                                                    "bo,empty,0.5,0,0.5,\nzoe,graded,1,2.5,3.5,\n")


# ---------------------------------------------------------------- grader processes (--jobs > 1)

SUBSET = ["softmax", "split_heads"]  # graded by the tests below, to keep them short


def write_class(folder: Path, sources: dict[str, str | None]) -> list[batch.Submission]:
    """One folder per student holding `source` as attention.py (None: an empty folder); discovered."""
    for student, source in sources.items():
        (folder / student).mkdir(parents=True)
        if source is not None:
            (folder / student / "attention.py").write_text(source)
    return batch.discover(folder)


def hostile_source(name: str, token: str) -> str:
    """The model answers, then tests/hostile/_prelude.py and tests/hostile/NAME.py (see test_hostile)."""
    return (solution_source().rstrip("\n") + "\n\n\n" + (HOSTILE / "_prelude.py").read_text() + "\n\n"
            + (HOSTILE / f"{name}.py").read_text()).replace("@TOKEN@", token)


def living_descendants() -> set[int]:
    """The processes below this one that are not zombies."""
    children: dict[int, list[int]] = {}
    state: dict[int, str] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state[int(entry)] = fields[0]
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return {pid for pid in found if state.get(pid) != "Z"}


def left_behind(before: set[int], seconds: float = 10.0) -> set[int]:
    """Living descendants not there `before`, once those that are exiting have had `seconds` to go."""
    end = time.monotonic() + seconds
    while (new := living_descendants() - before) and time.monotonic() < end:
        time.sleep(0.05)
    return new


def reap_zombies() -> None:
    """Collect exited children nobody waits for (orphans that came to this subreaper)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass


@pytest.fixture(scope="class")
def both_ways(tmp_path_factory, course):
    """A class of four (ann and cy: the model answers; ben: softmax over the wrong axis; dee: an
    empty folder) graded on SUBSET with jobs=1 (threads) and jobs=2 (grader processes). By jobs:
    the outcomes, the output folder, and the (pid, parent pid) of each call to the grader."""
    root = tmp_path_factory.mktemp("processes")
    found = write_class(root / "class", {"ann": solution_source(), "ben": solution_source() + WRONG_AXIS_SOFTMAX,
                                         "cy": solution_source(), "dee": None})
    calls = root / "calls"
    calls.mkdir()

    def grader(a, path, seed):
        (calls / path.parent.name).write_text(f"{os.getpid()} {os.getppid()}")  # one private folder per call
        return grade(a, path, problem_ids=SUBSET, limits=Limits(problem_seconds=5), seed=seed)

    runs = {}
    for jobs in (1, 2):
        out = root / f"out-{jobs}"
        outcomes = list(batch.grade_all(course, found, out, seed_of=lambda s: 0, jobs=jobs, grader=grader))
        runs[jobs] = outcomes, out, [tuple(map(int, p.read_text().split())) for p in calls.iterdir()]
        shutil.rmtree(calls)
        calls.mkdir()
    return runs


@pytest.mark.skipif(not batch.FORK, reason="grader processes are forked (Linux only)")
class TestGraderProcesses:
    def test_same_rows_as_with_threads(self, both_ways):
        """jobs=2 gives each student the status and scores jobs=1 gives: the exact ones."""
        rows = {jobs: {o.submission.student: (o.status, o.row.scores, o.row.mistakes, o.resumed, o.error)
                       for o in outcomes} for jobs, (outcomes, _, _) in both_ways.items()}
        assert rows[2] == rows[1]
        full = {"softmax": 10.0, "split_heads": 10.0}
        assert rows[2] == {
            "ann": ("graded", full, {}, False, ""),
            "ben": ("graded", {"softmax": 3.0, "split_heads": 10.0}, {"softmax": ("softmax-wrong-axis",)}, False, ""),
            "cy": ("graded", full, {}, False, ""),
            "dee": ("empty", {"softmax": 0.0, "split_heads": 0.0}, {}, False, "")}

    def test_byte_identical_result_and_feedback_files(self, both_ways):
        """results/*.json and feedback/*.txt are byte for byte those written by threads."""
        files = {jobs: snapshot(out) for jobs, (_, out, _) in both_ways.items()}
        assert sorted(files[2]) == [f"{d}/{s}.{x}" for d, x in (("feedback", "txt"), ("results", "json"))
                                    for s in ("ann", "ben", "cy", "dee")]
        assert files[2] == files[1]
        assert "likely mistake (softmax-wrong-axis)" in files[2]["feedback/ben.txt"].decode()

    def test_graded_in_two_forked_processes(self, both_ways):
        """With jobs=2, every submission is graded in one of exactly two children of this process
        (each is handed one at once); with jobs=1, in this process."""
        graded_by = both_ways[2][2]
        assert len(graded_by) == 4
        assert all(pid != os.getpid() and parent == os.getpid() for pid, parent in graded_by)
        assert len({pid for pid, _ in graded_by}) == 2
        assert {pid for pid, _ in both_ways[1][2]} == {os.getpid()}
        assert multiprocessing.active_children() == []

    def test_a_dying_grader_process_costs_only_its_submission(self, course, tmp_path, monkeypatch):
        """A grader process that exits (code 3) while holding ben's submission: ben's outcome is an
        error saying so; ann, cy and dee are graded in full by the other process; nothing is left
        running, and no temporary file (the batch deletes the folder the dead process worked in)."""
        made = []  # this batch's temporary folder (other test processes may be running batches of their own)
        real_mkdtemp = tempfile.mkdtemp
        monkeypatch.setattr(batch.tempfile, "mkdtemp", lambda *a, **k: made.append(real_mkdtemp(*a, **k)) or made[-1])
        found = write_class(tmp_path / "class", {"ann": solution_source(), "ben": "DIE = 1\n",
                                                 "cy": solution_source(), "dee": solution_source()})

        def grader(a, path, seed):
            result = grade(a, path, problem_ids=SUBSET, limits=Limits(problem_seconds=5), seed=seed)
            if "DIE" in path.read_text():  # after grading: it has a zygote, and had a student process
                os._exit(3)
            return result

        become_subreaper()  # orphans come back here, where they can be seen
        before = living_descendants()
        outcomes = {o.submission.student: o for o in batch.grade_all(course, found, tmp_path / "out",
                                                                      seed_of=lambda s: 0, jobs=2, grader=grader)}
        assert sorted(outcomes) == ["ann", "ben", "cy", "dee"]
        ben = outcomes.pop("ben")
        assert (ben.status, ben.error, ben.row.scores) == ("error", "the grading process stopped (exit code 3)", {})
        assert {s: (o.status, o.error, o.row.scores) for s, o in outcomes.items()} == dict.fromkeys(
            ["ann", "cy", "dee"], ("graded", "", {"softmax": 10.0, "split_heads": 10.0}))
        assert sorted(p.name for p in (tmp_path / "out" / "results").iterdir()) == [
            "ann.json", "ben.json", "cy.json", "dee.json"]
        stored = json.loads((tmp_path / "out" / "results" / "ben.json").read_text())
        assert (stored["status"], stored["error"]) == ("error", "the grading process stopped (exit code 3)")
        assert (tmp_path / "out" / "feedback" / "ben.txt").read_text() == (
            "Your submission could not be graded (the grader failed: the grading process stopped (exit code 3)).\n")
        assert multiprocessing.active_children() == []
        assert left_behind(before) == set()
        batches = [m for m in made if Path(m).name.startswith("mha-batch-")]
        assert len(batches) == 1 and not os.path.exists(batches[0])
        reap_zombies()

    def test_when_every_grader_process_dies_the_rest_are_errors(self, course, tmp_path):
        """Both grader processes die with their first submission: those two say so, the third was never
        graded; in a second run on the same files each is grader-error (not retried in every run)."""
        found = write_class(tmp_path / "class", {"ann": "x = 1\n", "ben": "x = 2\n", "cy": "x = 3\n"})

        def grader(a, path, seed):
            os._exit(4)

        outcomes = {o.submission.student: (o.status, o.error)
                    for o in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=2,
                                             grader=grader)}
        assert outcomes == {"ann": ("error", "the grading process stopped (exit code 4)"),
                            "ben": ("error", "the grading process stopped (exit code 4)"),
                            "cy": ("error", "no grading process left")}
        assert multiprocessing.active_children() == []
        again = {o.submission.student: o.status  # the same files killed their grader process twice: recorded
                 for o in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=2,
                                          grader=grader)}
        assert again == {"ann": "grader-error", "ben": "grader-error", "cy": "error"}  # cy: never graded
        assert multiprocessing.active_children() == []

    def test_a_process_found_dead_between_submissions_costs_nothing(self, course, tmp_path, monkeypatch):
        """Sending the next submission to a grader process fails (it died after its last answer):
        that submission goes to the other process, and every student is graded."""
        from multiprocessing.connection import Connection
        found = write_class(tmp_path / "class", {name: solution_source() for name in ("ann", "ben", "cy", "dee")})
        parent, sends, real = os.getpid(), {}, Connection.send_bytes

        def flaky(self, data, *args):
            if os.getpid() == parent:
                sends[id(self)] = sends.get(id(self), 0) + 1
                if sends[id(self)] == 2 and len(sends) == 2 and sum(sends.values()) == 3:
                    raise BrokenPipeError(32, "Broken pipe")  # the first process to ask again is "dead"
            return real(self, data, *args)
        monkeypatch.setattr(Connection, "send_bytes", flaky)

        def grader(a, path, seed):
            return grade(a, path, problem_ids=["softmax"], limits=Limits(problem_seconds=5), seed=seed)
        outcomes = {o.submission.student: (o.status, o.error, o.row.scores)
                    for o in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=2,
                                             grader=grader)}
        assert outcomes == dict.fromkeys(["ann", "ben", "cy", "dee"], ("graded", "", {"softmax": 10.0}))
        assert sum(sends.values()) == 5  # 4 submissions, one of them sent twice
        assert multiprocessing.active_children() == []

    def test_a_result_is_reported_while_an_idle_process_is_still_exiting(self, course, tmp_path, monkeypatch):
        """A grader process sent away (no submission left) is joined only once every result is in:
        here ann's process will not exit before the batch has reported ben, who finishes only once
        ann's process is exiting. The count reaches 2/2 without waiting for it (a batch that joined
        it first would report ben only after its two-minute safety wait, and the test says so)."""
        from grader.sandbox import spawn
        flags = tmp_path / "flags"
        flags.mkdir()
        real_stop = spawn.stop_fork_server

        def wait_for(name: str) -> bool:
            deadline = time.monotonic() + 120  # a safety net only: the ordering is what is tested
            while not any(flags.glob(name)) and time.monotonic() < deadline:
                time.sleep(0.01)
            return any(flags.glob(name))

        def slow_exit() -> None:  # in a grader process with nothing more to grade
            (flags / f"exiting-{os.getpid()}").touch()
            if not wait_for("released"):
                (flags / "gave-up").touch()
            real_stop()
        monkeypatch.setattr(spawn, "stop_fork_server", slow_exit)

        def grader(a, path, seed):  # no student code runs: only the order of events matters here
            if path.read_text() == "ANN = 1\n":
                (flags / "ann-pid").write_text(str(os.getpid()))
            else:  # ben: done once ann's grader process is exiting
                wait_for("ann-pid")
                wait_for(f"exiting-{(flags / 'ann-pid').read_text()}")
            return GradeResult(title="t", submission=str(path), problems=())

        found = write_class(tmp_path / "class", {"ann": "ANN = 1\n", "ben": "BEN = 1\n"})
        counted = []
        for outcome in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=2, grader=grader):
            counted.append((len(counted) + 1, outcome.submission.student, (flags / "gave-up").exists()))
            if len(counted) == len(found):
                (flags / "released").touch()
        assert counted == [(1, "ann", False), (2, "ben", False)]
        assert not (flags / "gave-up").exists()
        assert multiprocessing.active_children() == []

    def test_hostile_submissions_cost_only_their_own_points(self, course, tmp_path):
        """Graded two at a time in grader processes (1 s per problem): an exit at import, an infinite
        loop and leftover children cost exactly their own points; the model answers get full marks;
        no process of theirs, and no grader process, is left."""
        token = f"{secrets.randbelow(10 ** 8):08d}"
        problems = ["softmax", "attention_reading"]
        found = write_class(tmp_path / "class", {
            "good": solution_source(), "quits": hostile_source("sys_exit_at_import", token),
            "spins": hostile_source("infinite_loop", token), "forks": hostile_source("fork_children", token)})

        def grader(a, path, seed):
            return grade(a, path, problem_ids=problems, limits=Limits(problem_seconds=1), seed=seed)

        become_subreaper()
        before = living_descendants()
        outcomes = {o.submission.student: (o.status, o.row.scores)
                    for o in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=2,
                                             grader=grader)}
        full = {"softmax": 10.0, "attention_reading": 5.0}
        # fork_children leaves processes running in attention_reading: that problem's points
        assert outcomes == {"good": ("graded", full), "forks": ("graded", {**full, "attention_reading": 0.0}),
                            "quits": ("import failure", {"softmax": 0.0, "attention_reading": 0.0}),
                            "spins": ("timeout", {"softmax": 10.0, "attention_reading": 0.0})}
        feedback = {s: (tmp_path / "out" / "feedback" / f"{s}.txt").read_text() for s in outcomes}
        assert "attention.py raised SystemExit while being imported" in feedback["quits"]
        assert "timed out (time limit of 1 s for this problem)" in feedback["spins"]
        assert leftovers(token) == []
        assert multiprocessing.active_children() == []
        assert left_behind(before) == set()


class TestStatusPerStudent:
    def test_gradebook_status_of_each_kind_of_submission(self, course, tmp_path):
        """The gradebook tells a syntax error, an import failure, an import that runs out of time, a
        file with no code and a folder with no file apart from a graded submission (one problem, 1 s;
        3 s to import, well beyond what the model answers need on a busy machine)."""
        found = write_class(tmp_path / "class", {
            "ann": solution_source(), "ben": solution_source().replace("np.exp(", "np.exp((", 1),
            "cy": "import numpy as np\nimport no_such_module_here\n", "dee": "while True:\n    pass\n",
            "eve": "\n# I will write it tomorrow\n\n", "fay": None})

        def grader(a, path, seed):
            return grade(a, path, problem_ids=["softmax"], limits=Limits(problem_seconds=1, load_seconds=3), seed=seed)

        rows = [o.row for o in batch.grade_all(course, found, tmp_path / "out", seed_of=lambda s: 0, jobs=1,
                                               grader=grader)]
        batch.write_gradebook(tmp_path / "gradebook.csv", ["softmax"], rows)
        assert [(r["student"], r["status"], r["softmax"]) for r in read_csv(tmp_path / "gradebook.csv")] == [
            ("ann", "graded", "10"), ("ben", "syntax error", "0"), ("cy", "import failure", "0"),
            ("dee", "timeout", "0"), ("eve", "empty", "0"), ("fay", "empty", "0")]
        feedback = (tmp_path / "out" / "feedback" / "cy.txt").read_text()
        assert "FAIL  attention.py raised ModuleNotFoundError while being imported on line 2" in feedback
        assert "      2 | import no_such_module_here\n" in feedback
