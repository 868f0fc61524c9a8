"""The Gradescope zip, unpacked into an /autograder-like folder, grades through run_autograder itself."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from grader.exports.gradescope import build
from grader.assignment.quiz import answer_key, answers_template
from grader.assignment.variants import student_seed

from .conftest import EXERCISES, SOLUTIONS

SECRET = "gradescope-course-secret"
STUB = '    raise NotImplementedError("not done")\n'
DONE = ("softmax", "attention_reading", "count_routing_distributions", "split_heads", "merge_heads")


def autograder(tmp_path: Path, assignment, secret: str | None) -> Path:
    """Lay out $AUTOGRADER_ROOT with the zip unpacked into source/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(io.BytesIO(build(assignment, secret))) as archive:
        archive.extractall(root / "source")
        names = archive.namelist()
    assert {"setup.sh", "run_autograder", "pyproject.toml", "grader/attention/reference.py", "exercises/assignment.yaml"} <= set(names)
    assert not any(n.startswith("solutions/") for n in names)
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path, files: dict[str, str], sid: str = "s1") -> dict:
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    (root / "submission_metadata.json").write_text(json.dumps(
        {"id": 7, "created_at": "2026-11-30T10:00:00", "assignment": {"total_points": 142},
         "users": [{"email": f"{sid}@example.edu", "name": "Student", "sid": sid}], "previous_submissions": []}))
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "MHA_BIN": shutil.which("mha")}
    env.pop("MHA_COURSE_SECRET", None)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def half_done() -> str:
    """The model answers with every function outside DONE turned back into a stub."""
    lines, out, skipping = (SOLUTIONS / "attention.py").read_text().splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith("def "):
            name = line[4:line.index("(")]
            skipping = name not in DONE
            out.append(line)
            if skipping:
                out.append(STUB)
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            if not line.strip():
                out.append(line)
            continue
        skipping = False
        out.append(line)
    return "".join(out)


class TestGradescopeZip:
    def test_solutions_stubs_and_half_done(self, tmp_path, assignment):
        """Full marks for the solutions, 0 for the stubs, exactly the finished problems for a half-done one."""
        root = autograder(tmp_path, assignment, secret=None)
        answers = (SOLUTIONS / "answers.yaml").read_text()
        full = run_autograder(root, {"attention.py": (SOLUTIONS / "attention.py").read_text(), "answers.yaml": answers})
        assert full["score"] == assignment.max_score
        assert all(t["status"] == "passed" for t in full["tests"])
        stubs = run_autograder(root, {"attention.py": (EXERCISES / "attention.py").read_text(),
                                      "answers.yaml": (EXERCISES / "answers.yaml").read_text()})
        assert stubs["score"] == 0
        half = run_autograder(root, {"attention.py": half_done(), "answers.yaml": answers})
        by_problem = {t["name"].split(":")[0]: t["score"] for t in half["tests"]}
        deserved = sum(p.points for p in assignment.problems if p.id in DONE) + assignment.quiz.max_score
        assert half["score"] == pytest.approx(deserved)
        assert all(by_problem[p.id] == (p.points if p.id in DONE else 0) for p in assignment.problems)

    def test_missing_file_gives_a_visible_message(self, tmp_path, assignment):
        """An upload without attention.py scores 0 with a visible explanation, not a crash."""
        root = autograder(tmp_path, assignment, secret=None)
        data = run_autograder(root, {"notes.txt": "oops"})
        assert data["score"] == 0
        assert data["tests"][0]["name"] == "submission not gradable"
        assert "no attention.py" in data["tests"][0]["output"]

    def test_each_student_is_graded_on_their_variant(self, tmp_path, assignment):
        """With the secret in the zip, the email in submission_metadata.json (the default variant_key) picks the
        quiz numbers."""
        root = autograder(tmp_path, assignment, secret=SECRET)
        key = answers_template(assignment.quiz, answer_key(assignment.quiz, student_seed(SECRET, "s42@example.edu")))
        files = {"attention.py": (SOLUTIONS / "attention.py").read_text(), "answers.yaml": key}
        own = run_autograder(root, files, sid="s42")
        assert own["score"] == assignment.max_score
        other = run_autograder(root, files, sid="s43")
        assert other["score"] < assignment.max_score

    def test_zip_is_deterministic(self, assignment):
        """Two exports of the same assignment are byte-identical."""
        assert build(assignment, SECRET) == build(assignment, SECRET)
