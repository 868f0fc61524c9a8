"""The PrairieLearn course folder, run the way PrairieLearn runs it, outside the repository and
offline: the entry point in an emulated /grade (a temporary folder named by MHA_GRADE_ROOT, the
network off) writes results.json; the quiz questions' HTML is parsed and their answers scored by
PrairieLearn's documented rules, and those scores are compared with this package's."""
from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.course.model import QuizKind
from grader.course.quiz import draw
from grader.exports import prairielearn, wheelhouse
from grader.exports.markup import to_html
from grader.exports.qti import draw_seeds
from grader.grading.answers import grade_item
from grader.grading.grade import grade
from grader.starter import student_module

from ._install import clean_env
from .conftest import EXERCISES, SOLUTIONS, mha_command
from .test_mistakes import BUGS, buggy_submission

PYTHON = wheelhouse.running_python()
_COURSE: dict[str, Path] = {}


@pytest.fixture
def course_dir(tmp_path_factory, course) -> Path:
    """The exported course folder, made once per test run (the wheels come from pip's cache)."""
    if "course" not in _COURSE:
        out = tmp_path_factory.mktemp("pl") / "course"
        prairielearn.write(out, prairielearn.build(course, wheelhouse.download(PYTHON), PYTHON))
        _COURSE["course"] = out
    return _COURSE["course"]


def offline() -> list[str]:
    """The command prefix that cuts the network; fails when isolation is required and unavailable."""
    if shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0:
        return ["unshare", "--net"]
    if os.environ.get("MHA_REQUIRE_ISOLATION") == "1":
        pytest.fail("cannot make a network namespace here (unshare --net needs root or user namespaces)")
    pytest.skip("cannot make a network namespace here (unshare --net needs root or user namespaces)")


def question_params(course_dir: Path, qid: str, pl_seed: int) -> dict:
    """The params PrairieLearn stores for a new question instance: what its server.py generate() writes."""
    data = {"params": {}, "correct_answers": {}, "variant_seed": pl_seed}
    _server(course_dir / "questions" / qid / "server.py").generate(data)
    return data["params"]


def grade_job(course_dir: Path, tmp: Path, problem: str, source: str, install: bool = False, pl_seed: int = 0,
              student_files: dict[str, str] | None = None, in_student: bool = False) -> dict:
    """One external grading job: /grade laid out as PrairieLearn lays it out (the student's file, the
    question's tests/, the listed serverFilesCourse entries, data.json with the params that server.py
    generated for PrairieLearn's seed `pl_seed`), the entry point run in it with no network; returns results.json.
    `install`: the entry point installs from its wheels, else it uses this environment's mha (MHA_BIN).
    `student_files`: more files the student submitted (relative path: text); `in_student`: the job
    starts in the student's folder rather than elsewhere."""
    info = json.loads((course_dir / "questions" / problem / "info.json").read_text())
    options = info["externalGradingOptions"]
    grade = tmp / "grade"
    (grade / "student").mkdir(parents=True)
    (grade / "student" / "attention.py").write_text(source)
    for name, text in (student_files or {}).items():
        (grade / "student" / name).parent.mkdir(parents=True, exist_ok=True)
        (grade / "student" / name).write_text(text)
    shutil.copytree(course_dir / "questions" / problem / "tests", grade / "tests")
    for entry in options["serverFilesCourse"]:
        shutil.copytree(course_dir / "serverFilesCourse" / entry, grade / "serverFilesCourse" / entry)
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text(json.dumps({
        "params": question_params(course_dir, problem, pl_seed), "correct_answers": {}, "submitted_answers": {},
        "variant_seed": pl_seed}))
    entry_point = options["entrypoint"].replace("/grade", str(grade), 1)
    # The job's temporary folder, shared like /tmp (student processes make theirs there too): left empty.
    scratch = Path(tempfile.mkdtemp(prefix="mha-pl-job-"))
    try:
        scratch.chmod(0o1777)
        env = clean_env(tmp, MHA_GRADE_ROOT=str(grade), MHA_PYTHON=sys.executable, TMPDIR=str(scratch))
        if not install:
            env["MHA_BIN"] = mha_command()
        done = subprocess.run([*offline(), entry_point], env=env, capture_output=True, text=True, timeout=600,
                              cwd=grade / "student" if in_student else tmp)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not any(scratch.iterdir()), sorted(p.name for p in scratch.iterdir())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = json.loads((grade / "results" / "results.json").read_text())
    assert 0.0 <= results["score"] <= 1.0
    return results


def mha_fraction(tmp: Path, problem: str, source: str) -> float:
    """The package's own score of `source` on `problem`, as a fraction of its points."""
    path = tmp / "own" / "attention.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    done = subprocess.run([sys.executable, "-m", "grader", "--course", str(EXERCISES), "grade", str(path),
                           "--problem", problem, "--format", "json"], capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout)
    return report["score"] / report["max_score"]


class TestEntryPoint:
    @pytest.mark.slow  # the entry point installs the grader from its wheels
    def test_correct_submission_with_the_offline_install(self, course_dir, tmp_path):
        """The entry point installs the grader from serverFilesCourse with no network and gives the
        model answers full marks, every test at its full points."""
        result = grade_job(course_dir, tmp_path, "multi_head_attention", (SOLUTIONS / "attention.py").read_text(),
                           install=True)
        assert result["gradable"] is True and result["score"] == 1.0
        assert result["tests"] and all(t["points"] == t["max_points"] > 0 for t in result["tests"])
        assert {"name", "points", "max_points", "message", "output"} <= set(result["tests"][0])
        assert any(t["name"].endswith("(hidden)") for t in result["tests"])

    @pytest.mark.slow  # the entry point installs the grader from its wheels
    def test_a_venv_package_in_the_student_folder_never_runs(self, course_dir, tmp_path):
        """A job that starts in the student's folder, which holds a venv/ (and pip/) package: the
        entry point makes its virtual environment with the real venv, and grades the submission."""
        marker = tmp_path / "marker"
        planted = f"open({str(marker)!r}, 'a').write(__name__ + ' ran\\n')\n"
        files = {f"{name}/{part}": planted for name in ("venv", "pip", "ensurepip")
                 for part in ("__init__.py", "__main__.py")}
        result = grade_job(course_dir, tmp_path, "softmax", (SOLUTIONS / "attention.py").read_text(), install=True,
                           student_files=files, in_student=True)
        assert not marker.exists(), marker.read_text()
        assert result["gradable"] is True and result["score"] == 1.0

    def test_stub_scores_zero(self, course_dir, tmp_path):
        """The editor's own stubs, submitted as they are: gradable, score 0, each case says so."""
        result = grade_job(course_dir, tmp_path, "softmax", (course_dir / "questions" / "softmax" / "attention.py").read_text())
        assert result["gradable"] is True and result["score"] == 0.0
        assert all(t["points"] == 0 and t["message"] == "not implemented yet" for t in result["tests"])

    def test_buggy_submission_scores_what_mha_grade_gives(self, course_dir, tmp_path):
        """A softmax over the wrong axis: the same fraction as `mha grade`, strictly between 0 and 1,
        and the tests' points add up to it."""
        bug = next(b for b in BUGS if b.mistake == "softmax-wrong-axis")
        source = buggy_submission(bug)
        result = grade_job(course_dir, tmp_path, "softmax", source)
        expected = mha_fraction(tmp_path, "softmax", source)
        assert 0 < expected < 1
        assert result["gradable"] is True and result["score"] == pytest.approx(expected, abs=1e-6)
        points = sum(t["points"] for t in result["tests"])
        assert points / sum(t["max_points"] for t in result["tests"]) == pytest.approx(expected, abs=1e-3)

    def test_syntax_error_is_not_gradable(self, course_dir, tmp_path):
        """Not Python: gradable false, the error and its line in format_errors, no tests."""
        result = grade_job(course_dir, tmp_path, "softmax", "import numpy as np\n\ndef softmax(scores:\n    return 1\n")
        assert result["gradable"] is False and result["score"] == 0
        assert result["tests"] == []
        assert re.search(r"syntax error \(line 3\)", result["format_errors"][0])

    def test_wrong_python_is_a_message_not_a_grade(self, course_dir, tmp_path):
        """An image whose python3 is not the wheels' version: not gradable, saying how to export again."""
        fake = tmp_path / "python3"
        fake.write_text("#!/bin/sh\necho 3.99\n")
        fake.chmod(0o755)
        grade = tmp_path / "job"
        shutil.copytree(course_dir / "serverFilesCourse", grade / "serverFilesCourse")
        shutil.copytree(course_dir / "questions" / "softmax" / "tests", grade / "tests")
        (grade / "student").mkdir()
        env = clean_env(tmp_path, MHA_GRADE_ROOT=str(grade), MHA_PYTHON=str(fake))
        done = subprocess.run([str(grade / "serverFilesCourse" / "mha" / "grade.sh")], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        result = json.loads((grade / "results" / "results.json").read_text())
        assert result["gradable"] is False
        assert f"for Python {PYTHON} but the image has 3.99" in result["format_errors"][0]
        assert "mha export prairielearn --python 3.99" in result["format_errors"][0]


class TestCourseFolder:
    def test_questions_assessment_and_limits(self, course_dir, course):
        """One External question per problem (under PrairieLearn's 30 s default cap, networking off),
        one per quiz item, and an assessment listing every question at its points."""
        assessment = json.loads((course_dir / "courseInstances" / prairielearn.INSTANCE / "assessments" /
                                 prairielearn.ASSESSMENT / "infoAssessment.json").read_text())
        listed = {q["id"]: q["points"] for zone in assessment["zones"] for q in zone["questions"] if "points" in q}
        manual = {q["id"]: q["manualPoints"] for zone in assessment["zones"] for q in zone["questions"]
                  if "manualPoints" in q}
        expected = {p.id: p.points for p in course.problems}
        expected |= {prairielearn.quiz_qid(i): i.points for i in course.quiz.items if not i.manual}
        assert listed == expected
        assert manual == {prairielearn.quiz_qid(i): i.points for i in course.quiz.items if i.manual} != {}
        assert sum(listed.values()) == course.max_score  # the automatic points; written ones by hand
        assert {p.name for p in (course_dir / "questions").iterdir()} == set(expected) | set(manual)
        uuids = set()
        for problem in course.problems:
            info = json.loads((course_dir / "questions" / problem.id / "info.json").read_text())
            uuids.add(info["uuid"])
            options = info["externalGradingOptions"]
            assert info["gradingMethod"] == "External" and options["enabled"] is True
            assert options["timeout"] <= 30 and "enableNetworking" not in options
            assert options["entrypoint"] == "/grade/serverFilesCourse/mha/grade.sh"
            assert (course_dir / "serverFilesCourse" / options["serverFilesCourse"][0] / "grade.sh").stat().st_mode & 0o111
            page = (course_dir / "questions" / problem.id / "question.html").read_text()
            assert '<pl-file-editor file-name="attention.py"' in page and 'source-file-name="attention.py"' in page
            assert "<pl-external-grader-results>" in page
            assert (course_dir / "questions" / problem.id / "attention.py").read_text() == student_module(course)
        assert len(uuids) == len(course.problems)
        wheels = {p.name.split("-")[0] for p in (course_dir / "serverFilesCourse" / "mha" / "wheels").iterdir()}
        assert wheels == {"mha_exercises", "numpy", "pyyaml", "click", "pip"}
        assert not (course_dir / "serverFilesCourse" / "mha" / "exercises" / "course.yaml").exists()

    def test_export_is_deterministic(self, course):
        """The same course and wheels give the same files."""
        wheels = wheelhouse.download(PYTHON)
        assert prairielearn.build(course, wheels, PYTHON) == prairielearn.build(course, wheels, PYTHON)

    def test_cli_writes_the_course(self, cli, tmp_path):
        """`mha export prairielearn` writes the folder and refuses a folder that holds anything."""
        out = tmp_path / "course"
        result = cli("export", "prairielearn", "--out", str(out), "--draws", "2")
        assert result.exit_code == 0, result.stderr
        assert (out / "infoCourse.json").is_file() and (out / "serverFilesCourse" / "mha" / "grade.sh").is_file()
        again = cli("export", "prairielearn", "--out", str(out))
        assert again.exit_code == 2 and "already exists and is not an empty folder" in again.stderr


# ---------------------------------------------------------------- the quiz, by PrairieLearn's rules

class _Elements(HTMLParser):
    """The answer element of a question page and its pl-answer children (in order)."""

    def __init__(self):
        super().__init__()
        self.element: tuple[str, dict] | None = None
        self.answers: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("pl-multiple-choice", "pl-checkbox", "pl-number-input"):
            self.element = (tag, dict(attrs))
        elif tag == "pl-answer":
            self.answers.append(dict(attrs))


def render_page(page: str, params: dict) -> str:
    """question.html through Mustache as PrairieLearn renders it: {{{x}}} raw, {{x}} escaped."""
    page = re.sub(r"\{\{\{params\.(\w+)\}\}\}", lambda m: str(params[m.group(1)]), page)
    page = re.sub(r"\{\{params\.(\w+)\}\}", lambda m: html.escape(str(params[m.group(1)])), page)
    assert "{{" not in page
    return page


def pl_score(tag: str, attrs: dict, answers: list[dict], correct_answer, submitted) -> float:
    """PrairieLearn's score of `submitted` (keys a, b... for the pl-answers in the file's order, whatever order
    PrairieLearn shows them in; or a number)."""
    if tag == "pl-number-input":
        assert attrs["comparison"] == "relabs"
        rtol, atol = float(attrs["rtol"]), float(attrs["atol"])
        return float(abs(submitted - correct_answer) <= atol + rtol * abs(correct_answer))
    keys = [chr(ord("a") + i) for i in range(len(answers))]
    right = {k for k, a in zip(keys, answers) if a.get("correct") == "true"}
    if tag == "pl-multiple-choice":
        return float(submitted in right)
    assert attrs.get("partial-credit") == "net-correct"  # (t - f) / n, never below 0
    chosen = set(submitted)
    return max(0.0, (len(chosen & right) - len(chosen - right)) / len(right))


def _server(path: Path):
    spec = importlib.util.spec_from_file_location(f"pl_server_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tries(v) -> list:
    """Answers worth scoring: every single choice, the right set, it with a wrong one or one fewer, all;
    for numbers the answer, near it, each known-wrong value, far off."""
    item = v.item
    if item.kind is QuizKind.MULTIPLE_CHOICE:
        return [c.letter for c in v.choices]
    if item.kind is QuizKind.MULTIPLE_ANSWERS:
        right = [c.letter for c in v.choices if c.correct]
        wrong = [c.letter for c in v.choices if not c.correct]
        tries = [[c.letter] for c in v.choices] + [right, right[1:], [c.letter for c in v.choices]]
        return tries + [right + wrong[:1], right[:1] + wrong[:2]] if wrong else tries
    width = max(item.tolerance, 1e-4)
    return [v.answer, v.answer + 0.5 * width, v.answer + 3 * width + 0.01, *(w.value for w in v.wrong)]


def test_quiz_scored_by_prairielearn_rules_equals_mha(course_dir, course):
    """Every quiz question, every draw: the page rendered with server.py's params, parsed, and
    each answer scored by PrairieLearn's rules gives the fraction `mha grade` gives."""
    compared = 0
    for item in course.quiz.items:
        if item.manual:  # graded by hand: test_written_item_is_graded_by_hand
            continue
        folder = course_dir / "questions" / prairielearn.quiz_qid(item)
        server = _server(folder / "server.py")
        seeds = draw_seeds(item, 10, 0) if item.params else [0]
        assert len(server.DRAWS) == len(seeds)
        for index, seed in enumerate(seeds):
            data = {"params": {}, "correct_answers": {}, "variant_seed": index}
            server.generate(data)
            v = draw(item, seed, student_order=False)  # PrairieLearn orders the choices for each student
            assert data["params"]["prompt"] == to_html(v.prompt)
            parser = _Elements()
            parser.feed(render_page((folder / "question.html").read_text(), data["params"]))
            tag, attrs = parser.element
            if tag != "pl-number-input":
                assert attrs["order"] == ("random" if item.shuffle else "fixed"), item.id
            correct = data["correct_answers"].get("answer")
            for submitted in _tries(v):
                ours = grade_item(v, submitted, None, include_hidden=True).fraction
                assert pl_score(tag, attrs, parser.answers, correct, submitted) == pytest.approx(ours), \
                    (item.id, seed, submitted)
                compared += 1
            if item.hidden and tag != "pl-number-input":
                assert not any("feedback" in a for a in parser.answers)
    assert compared > 50


class TestCodeSeeds:
    def test_two_prairielearn_seeds_two_sets_of_numbers_each_graded_on_its_own(self, course_dir, course, tmp_path):
        """server.py turns two PrairieLearn variant_seed values into two mha seeds with different numbers in
        the prompt; the entry point grades each job on its own seed: the fraction `mha grade` gives that
        seed, and case details that differ between the two."""
        problem = course.problem("count_routing_distributions")
        first, second = (question_params(course_dir, problem.id, s) for s in (0, 1))
        assert first[prairielearn.SEED_PARAM] != second[prairielearn.SEED_PARAM]
        assert first["prompt"] != second["prompt"]
        bug = next(b for b in BUGS if b.mistake == "counts-per-key")
        source = buggy_submission(bug)
        own = tmp_path / "own" / "attention.py"
        own.parent.mkdir()
        own.write_text(source)
        messages = []
        for pl_seed, params in ((0, first), (1, second)):
            result = grade_job(course_dir, tmp_path / str(pl_seed), problem.id, source, pl_seed=pl_seed)
            expected = grade(course, own, seed=params[prairielearn.SEED_PARAM], problem_ids=[problem.id])
            assert result["gradable"] is True and 0 < result["score"] < 1
            assert result["score"] == pytest.approx(expected.score / expected.max_score, abs=1e-6)
            messages.append([t["output"] for t in result["tests"]])
        assert messages[0] != messages[1]

    def test_data_without_a_seed_is_not_graded(self, course_dir, tmp_path):
        """A data.json with no params.mha_seed (a question from an older export): gradable false, saying
        to export again; never the default seed."""
        grade_dir = tmp_path / "grade"
        shutil.copytree(course_dir / "serverFilesCourse", grade_dir / "serverFilesCourse")
        shutil.copytree(course_dir / "questions" / "softmax" / "tests", grade_dir / "tests")
        (grade_dir / "student").mkdir()
        (grade_dir / "student" / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
        (grade_dir / "data").mkdir()
        (grade_dir / "data" / "data.json").write_text(json.dumps({"params": {}}))
        env = clean_env(tmp_path, MHA_GRADE_ROOT=str(grade_dir), MHA_PYTHON=sys.executable,
                        MHA_BIN=mha_command())
        done = subprocess.run([str(grade_dir / "serverFilesCourse" / "mha" / "grade.sh")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        result = json.loads((grade_dir / "results" / "results.json").read_text())
        assert result["gradable"] is False and result["score"] == 0
        assert "params.mha_seed must be the student's seed" in result["format_errors"][0]
        assert "mha export prairielearn" in result["format_errors"][0]


def test_written_item_is_graded_by_hand(course_dir, course):
    """A written item: a rich-text editor, no server.py, the rubric (escaped) only in pl-manual-grading-only."""
    for item in (i for i in course.quiz.items if i.manual):
        folder = course_dir / "questions" / prairielearn.quiz_qid(item)
        page = (folder / "question.html").read_text()
        assert sorted(p.name for p in folder.iterdir()) == ["info.json", "question.html"]
        assert '<pl-rich-text-editor file-name="answer.html"></pl-rich-text-editor>' in page
        graders = page.split("<pl-manual-grading-only>")[1].split("</pl-manual-grading-only>")[0]
        assert all(html.escape(r.text) in graders and r.text not in page.replace(graders, "") for r in item.rubric)
        assert json.loads((folder / "info.json").read_text())["gradingMethod"] == "Manual"  # and manualPoints


def test_draw_seeds_give_students_other_numbers(course_dir, course):
    """An item with params offers distinct draws; PrairieLearn's variant_seed picks among them."""
    item = next(i for i in course.quiz.items if i.params and i.kind is QuizKind.NUMERIC)
    server = _server(course_dir / "questions" / prairielearn.quiz_qid(item) / "server.py")
    prompts = set()
    for seed in range(len(server.DRAWS)):
        data = {"params": {}, "correct_answers": {}, "variant_seed": seed}
        server.generate(data)
        prompts.add(data["params"]["prompt"])
    assert len(prompts) == len(server.DRAWS) > 1
