"""The Autolab export, run as Tango runs it: autograde.tar and autograde-Makefile unpacked in an empty
job folder with the student's attention.py, `make` offline, the last line read as the scores."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grader.exports.autolab import HANDIN, assessment, build
from grader.grading.results import CaseStatus, GradeResult, ProblemResult
from grader.reports.autolab import render, scores

from ._install import clean_env
from .conftest import SOLUTIONS
from .test_export_gradescope import PYTHON, wheels


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


ROOT = Path(__file__).resolve().parent.parent
BUG = (ROOT / "tests" / "submissions" / "bug_mha_transpose_3d.py").read_text()


@pytest.fixture(scope="module")
def export(course):
    return build(course, wheels(), PYTHON)


@pytest.fixture(scope="module")
def job(export, tmp_path_factory):
    """An empty job folder holding what Tango copies in: the tar and the Makefile."""
    folder = tmp_path_factory.mktemp("autolab-job")
    tar, makefile, _ = export
    (folder / "autograde.tar").write_bytes(tar)
    (folder / "autograde-Makefile").write_text(makefile)
    return folder


def _offline() -> list[str]:
    """`unshare --net` where this machine can take the network away; else nothing (the install is
    --no-index all the same)."""
    if shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0:
        return ["unshare", "--net"]
    return []


def make(job: Path, source: str, **env: str) -> subprocess.CompletedProcess:
    (job / HANDIN).write_text(source)
    environment = clean_env(job.parent, MHA_PYTHON=sys.executable, **env)
    return subprocess.run([*_offline(), "make", "-s", "-f", "autograde-Makefile"], cwd=job, env=environment,
                          capture_output=True, text=True, timeout=600)


def mha_scores(cli, tmp_path: Path, source: str, problems) -> dict[str, float]:
    path = tmp_path / "attention.py"
    path.write_text(source)
    args = [a for p in problems for a in ("--problem", p.id)]
    result = cli("grade", str(path), "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return {p["id"]: p["score"] for p in json.loads(result.stdout)["problems"]}


class TestTango:
    def test_the_model_answers_score_what_mha_grade_gives(self, job, course, cli, tmp_path):
        """The model answers: the last line is every problem at full marks, equal to `mha grade`."""
        solutions = (SOLUTIONS / "attention.py").read_text()
        done = make(job, solutions)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        last = json.loads(done.stdout.strip().splitlines()[-1])
        assert last["scores"] == mha_scores(cli, tmp_path, solutions, course.problems)
        assert last["scores"] == {p.id: float(p.points) for p in course.problems}
        assert "Score: 140/140" in done.stdout

    def test_one_bug_costs_what_mha_grade_takes(self, job, course, cli, tmp_path):
        """A submission with one bug: the scores line equals `mha grade`'s, multi_head_attention below full marks,
        and the feedback above it names the problem."""
        source = (SOLUTIONS / "attention.py").read_text() + "\n\n" + BUG
        done = make(job, source)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        lines = done.stdout.strip().splitlines()
        got = json.loads(lines[-1])["scores"]
        assert got == mha_scores(cli, tmp_path, source, course.problems)
        assert got["multi_head_attention"] < course.problem("multi_head_attention").points
        assert got["softmax"] == course.problem("softmax").points
        assert any("multi_head_attention" in line for line in lines[:-1])

    def test_an_image_of_another_python_gets_no_scores_line(self, export, tmp_path):
        """A grading image whose python3 is not the wheels' version: a plain message, no scores line
        (Autolab records no grade rather than a wrong one), make fails."""
        job = tmp_path / "job"
        job.mkdir()
        tar, makefile, _ = export
        other = "9." + "9" * (len(PYTHON) - 2)  # as long as the real one: the tar's sizes stay right
        (job / "autograde.tar").write_bytes(tar.replace(f'WANT="{PYTHON}"'.encode(), f'WANT="{other}"'.encode()))
        (job / "autograde-Makefile").write_text(makefile)
        done = make(job, (SOLUTIONS / "attention.py").read_text())
        assert done.returncode != 0
        assert "this is not a grade" in done.stdout
        assert '"scores"' not in done.stdout


class TestArchive:
    def test_the_tar_holds_the_course_and_wheels_and_no_answers_or_secret(self, export):
        """Under autograde/: grade.sh, the course's manifest and the wheels; no solutions, no course.yaml."""
        tar, _, _ = export
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            names = archive.getnames()
            mode = archive.getmember("autograde/grade.sh").mode
        assert all(n == "autograde" or n.startswith("autograde/") for n in names)
        assert {"autograde/grade.sh", "autograde/exercises/assignment.yaml"} <= set(names)
        assert any(n.startswith("autograde/wheels/mha_exercises-") for n in names)
        assert not any("solutions" in n or n.endswith("course.yaml") for n in names)
        assert mode == 0o755

    def test_the_same_course_gives_the_same_bytes(self, export, course):
        """Byte-identical for the same course and wheels."""
        assert build(course, wheels(), PYTHON)[0] == export[0]

    def test_the_assessment_lists_every_problem_with_its_points(self, course):
        """assessment.yml: the handin name and one problem per coding problem, with its points."""
        import yaml
        config = yaml.safe_load(assessment(course))
        assert config["general"]["handin_filename"] == "attention.py"
        assert [(p["name"], p["max_score"]) for p in config["problems"]] == \
            [(p.id, p.points) for p in course.problems]


class TestScoresLine:
    def test_the_last_line_is_the_scores_and_the_quiz_is_one_key(self):
        """The scores line comes last; auto-graded quiz items are one key `quiz`, written ones none."""
        from grader.grading.results import CaseResult
        case = CaseResult(name="c", hidden=False, weight=1.0, status=CaseStatus.PASSED)
        result = GradeResult("T", "s", (
            ProblemResult("softmax", "Softmax", 10, (case,)),
            ProblemResult("q1", "Q1", 2, (case,), quiz=True),
            ProblemResult("w1", "W1", 3, (case,), quiz=True, manual=True, counted=False)))
        text = render(result)
        assert json.loads(text.strip().splitlines()[-1]) == {"scores": {"softmax": 10.0, "quiz": 2.0}}
        assert scores(result) == {"softmax": 10.0, "quiz": 2.0}


def test_the_export_command_writes_three_files(cli, tmp_path, monkeypatch):
    """`mha export autolab --out DIR` writes the tar, the Makefile and assessment.yml."""
    import grader.cli.export as commands
    monkeypatch.setattr(commands, "_wheels", lambda python: wheels())
    out = tmp_path / "autolab"
    result = cli("export", "autolab", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["assessment.yml", "autograde-Makefile", "autograde.tar"]
    assert (out / "autograde-Makefile").read_text().splitlines()[-1] == "\t@sh autograde/grade.sh attention.py"
