"""Nothing a student controls is expanded, multiplied or parsed in the grader without a bound.

Each case goes through the CLI (`mha grade`, `mha grade-all` in a subprocess, see _edges): exit
0, the exact score deserved, a short message saying why, a small results file and the grader
process's own peak memory (VmHWM) under 300 MB:

- answers.yaml whose aliases stand for billions of values (used as a mapping key, where the
  "unhashable key" message used to write out the whole expansion);
- answers of the wrong shape, however large, fail on their shape before any detector computes
  with them (a designed head returning two (N, 1) arrays made a detector build N x N matrices);
- a problem whose function leaves a process running loses its points, in every mode;
- grade-all: student ids that are made safe for file names alike keep files of their own.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml

from grader.course.loader import load_course
from grader.course.quiz import answer_key
from grader.course.seeds import student_seed
from grader.paths import remove_tree
from grader.sandbox.isolation import NAMESPACES_ENV

from ._edges import (  # noqa: F401
    AR,
    DROPPED_UID,
    ROOT_MODE,
    EdgeCourse,
    deserved,
    edge_course,
    grade,
    new_folder,
    run_grader,
    scores,
    skip_unless_runnable,
    write_submission,
)
from .conftest import lay_out_course, solution_source

GRADER_MB = 300


def alias_bomb(levels: int = 9) -> str:
    """YAML of a few hundred bytes whose last list stands for 9 ** levels strings, used as a key."""
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"lol{level}: &lol{level} [" + ", ".join([f"*lol{level - 1}"] * 9) + "]")
    lines.append(f"? *lol{levels - 1}\n: 1")
    return "\n".join(lines) + "\n"


def key_of(edge_course, student: str) -> dict:
    """The right answers of `student`'s seed (grade-all draws it from the course secret)."""
    return answer_key(load_course(edge_course.exercises).quiz, student_seed(edge_course.secret, student))


def bombed_answers(key: dict) -> str:
    """The right answers, then the alias bomb."""
    return yaml.safe_dump(key) + alias_bomb()


class TestAliasBomb:
    def test_grade_scores_the_quiz_zero_briefly(self, edge_course):
        """The whole answers file is refused before it is built: every quiz item 0 with the line and
        the reason, every problem full marks, a small results.json, the grader under 300 MB."""
        folder = write_submission(new_folder(edge_course, "alias-bomb"), answers=bombed_answers(edge_course.key))
        assert len((folder / "answers.yaml").read_bytes()) < 2000
        run = grade(edge_course, folder, timeout=5)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, quiz=False)
        # named at the first anchor standing for too many values: lol4 (9 ** 5 strings, 66,430 values)
        lines = len(yaml.safe_dump(edge_course.key).splitlines())
        assert f"answers.yaml:{lines + 5}: its aliases stand for more than 65536 values" in run.report()
        assert run.output.stat().st_size < 200_000
        assert 0 < run.peak_mb < GRADER_MB

    def test_grade_all_grades_the_classmates(self, edge_course):
        """In a class of three, the bomb costs its author the quiz; both classmates get full marks."""
        root = new_folder(edge_course, "bomb-class")
        for student in ("ann", "bob", "cat"):
            (root / student).mkdir()
            write_submission(root / student, answers=bombed_answers(key_of(edge_course, student)) if student == "bob"
                             else key_of(edge_course, student))
        out = new_folder(edge_course, "bomb-graded")
        run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", "--timeout", "10", cwd=root)
        assert run.code == 0, run.stderr
        totals = {row["student"]: float(row["total"]) for row in csv.DictReader((out / "gradebook.csv").open())}
        assert totals == {"ann": edge_course.total, "bob": sum(edge_course.points.values()), "cat": edge_course.total}
        assert "its aliases stand for more than 65536 values" in (out / "feedback" / "bob.txt").read_text()
        assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) < 2_000_000
        assert 0 < run.peak_mb < GRADER_MB


class TestCollidingIds:
    def test_ids_made_safe_alike_keep_their_own_files(self, edge_course):
        """o'brien@x.edu and o_brien@x.edu (one file name once made safe) are both graded, each
        into files of their own, with their own scores; the batch exits 0."""
        root = new_folder(edge_course, "collide")
        ids = ("o'brien@x.edu", "o_brien@x.edu")
        (root / ids[0]).mkdir()
        write_submission(root / ids[0], answers=key_of(edge_course, ids[0]))
        (root / ids[1]).mkdir()
        write_submission(root / ids[1], answers={})
        out = new_folder(edge_course, "collide-graded")
        run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", "--timeout", "10", cwd=root)
        assert run.code == 0, run.stderr
        totals = {row["student"]: float(row["total"]) for row in csv.DictReader((out / "gradebook.csv").open())}
        assert totals == {ids[0]: edge_course.total, ids[1]: sum(edge_course.points.values())}
        results = sorted((out / "results").glob("*.json"))
        assert len(results) == 2 and len(list((out / "feedback").glob("*.txt"))) == 2
        assert (out / "results" / "o_brien@x.edu.json").is_file()  # a safe id names its own files
        assert {json.loads(p.read_text())["student"] for p in results} == set(ids)


HEAD = "previous_token_head"


@pytest.fixture(scope="module")
def head_course():
    """A course of a designed head (whose mistakes are found by detectors) and attention_reading."""
    base = Path(tempfile.mkdtemp(prefix="mha-heads-"))
    exercises = lay_out_course(base, "title: Heads\n", (HEAD, AR), (HEAD, AR))
    points = {p.id: p.points for p in load_course(exercises).problems}
    yield EdgeCourse(base, exercises, "", points, {}, {})
    remove_tree(base)


WRONG_SHAPES = {
    # two (N, 1) arrays: W_Q W_K^T would be N x N (6 GB of float64 matrices at N = 16,000)
    HEAD: ("previous_token_head", "def previous_token_head(seq_len):\n"
                                  "    return np.ones((16000, 1)), np.ones((16000, 1))\n",
           "W_Q: wrong shape", "got shape (16000, 1)"),
    # 360,000 values where a handful are expected
    AR: ("attention_reading", "def attention_reading(weights, values):\n    return np.ones((600, 600))\n",
         "wrong shape", "got shape (600, 600)"),
}


@pytest.mark.parametrize("problem", sorted(WRONG_SHAPES))
def test_an_answer_of_the_wrong_shape_fails_on_its_shape(head_course, problem):
    """That problem 0 saying "got shape X", the other full marks, the grader under 300 MB."""
    _, code, kind, detail = WRONG_SHAPES[problem]
    folder = write_submission(new_folder(head_course, f"shape-{problem}"), solution_source() + "\n\n" + code)
    run = grade(head_course, folder, fmt="json", output=folder / "results.json", timeout=10)
    assert run.code == 0, run.stderr
    data = run.results()
    earned = {p["id"]: p["score"] for p in data["problems"]}
    assert earned == {HEAD: 0.0 if problem == HEAD else head_course.points[HEAD],
                      AR: 0.0 if problem == AR else head_course.points[AR]}
    cases = next(p for p in data["problems"] if p["id"] == problem)["cases"]
    assert {c["summary"] for c in cases} == {kind}
    assert detail in cases[0]["detail"] and all(c["mistake"] is None for c in cases)
    assert 0 < run.peak_mb < GRADER_MB


BROKEN_AR = '''

def attention_reading(weights, values):
    raise RuntimeError("not yet")
'''


class TestSourceParsedInTheGrader:
    def test_a_one_mib_attention_py(self, edge_course):
        """1 MiB of dense statements and a failing problem (the grader reads the call graph only
        of text it may parse): that problem 0, the rest full marks, the grader under 300 MB."""
        head = solution_source() + BROKEN_AR
        padding = "_ = 0\n" * (((1 << 20) - len(head.encode()) - 10000) // 6)  # the file: just under 1 MiB
        folder = write_submission(new_folder(edge_course, "mib-source"), head + padding,
                                  answers=edge_course.key)
        assert (1 << 20) - 20000 < (folder / "attention.py").stat().st_size <= 1 << 20
        run = grade(edge_course, folder, timeout=10)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, (AR,))
        assert "raised RuntimeError" in run.report()
        assert 0 < run.peak_mb < GRADER_MB

    @pytest.mark.parametrize("cells, says", [
        # one 4 MiB cell
        ([solution_source(), "_ = 0\n" * (700_000)], "cell 2 holds 4101 KiB of code; a code cell may hold at most 64 KiB"),
        # 24 cells of 60 KiB: each may be parsed, all of them are more code than attention.py may hold
        ([solution_source()] + ["_ = 0\n" * 10_000] * 24,
         f"the code cells hold {(len(solution_source()) + 24 * 60_000) // 1024} KiB of code; a submission "
         "may hold at most 1024 KiB, as attention.py"),
    ], ids=["one-large-cell", "many-cells"])
    def test_a_notebook_with_too_much_code(self, edge_course, cells, says):
        """Refused before any cell is parsed: every problem 0 saying why, the quiz counts, exit 0,
        the grader under 300 MB."""
        folder = new_folder(edge_course, "large-notebook")
        notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c} for c in cells], "nbformat": 4}
        (folder / "attention.ipynb").write_text(json.dumps(notebook))
        (folder / "answers.yaml").write_text(yaml.safe_dump(edge_course.key))
        run = grade(edge_course, folder, timeout=5)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, tuple(edge_course.points))
        assert f"attention.ipynb: {says}" in run.report()
        assert 0 < run.peak_mb < GRADER_MB


LEAVES_A_CHILD = '''

_solved_ar = attention_reading


def attention_reading(weights, values):
    import os, time
    if os.fork() == 0:  # a child that outlives the call
        time.sleep(600)
        os._exit(0)
    return _solved_ar(weights, values)
'''


@pytest.mark.parametrize("mode", ["default", pytest.param("no-namespaces", marks=pytest.mark.root),
                                  pytest.param("non-root", marks=pytest.mark.root)])
def test_a_problem_that_leaves_a_process_loses_its_points(edge_course, mode):
    """attention_reading answers right but leaves a child running: that problem 0 saying why, every
    other problem and the quiz full marks (the next problem gets a fresh process), nothing left."""
    if mode != "default" and not ROOT_MODE:
        if os.environ.get("MHA_REQUIRE_ISOLATION") == "1":
            pytest.fail("this mode needs root, and isolation is required")
        pytest.skip("needs root: as another user, or without namespaces")
    if mode == "non-root":
        skip_unless_runnable(DROPPED_UID)
    folder = write_submission(new_folder(edge_course, f"leaves-{mode}"), solution_source() + LEAVES_A_CHILD,
                              answers=edge_course.key)
    output = new_folder(edge_course, "out") / "results.json"
    run = run_grader(edge_course, "grade", str(folder), "--format", "gradescope", "--timeout", "10", cwd=folder,
                     output=output, user=DROPPED_UID if mode == "non-root" else None,
                     env={NAMESPACES_ENV: "off"} if mode == "no-namespaces" else None)
    assert run.code == 0, run.stderr
    assert scores(run.results()) == deserved(edge_course, (AR,))
    assert "it left processes running after it returned" in run.report()
    assert run.processes == [] and run.left == []
