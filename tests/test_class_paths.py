"""Issue 35's class graded by both paths: `mha grade-all` (student processes in the sandbox, each
seed's cases from the prepared-cases store, the big arrays as shared blobs, the fast wire encoding)
and the benchmark's floor's way (every student's functions called in this process, benchmarks/run.py's
InProcess, on that seed's cases prepared afresh, judged by the same code: no sandbox, no store, no
wire). Every one of the 200 students, each on their own seed, gets the same score both ways, and the
batch's scores are what each kind of submission must get."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.paths import CACHE_ENV

from .conftest import EXERCISES, ROOT

SECRET = "a course secret for issue 35's class"


def _benchmark():
    """benchmarks/run.py as a module (the class it generates and its floor)."""
    spec = importlib.util.spec_from_file_location("mha_benchmark_run", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflowing softmax, run in this process by the floor
def test_two_hundred_students_score_the_same_in_the_sandbox_and_in_one_process(tmp_path, monkeypatch):
    bench = _benchmark()
    monkeypatch.setattr(bench, "SECRET", SECRET)
    monkeypatch.setattr(bench, "MIX", "class")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("MHA_COURSE_SECRET", SECRET)
    students = bench.make_class(200)
    kinds = {kind: sum(s.kind == kind for s in students) for kind in ("correct", "buggy", "stub")}
    assert kinds == {"correct": 160, "buggy": 30, "stub": 10}
    folder, out = tmp_path / "class", tmp_path / "graded"
    bench.write_class(students, folder)

    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "grade-all", str(folder), "--out", str(out),
                                       "--jobs", "2", "--no-progress", "--timeout", "10"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert bench.check_results(students, out) == {"graded": 200}  # model answers full marks, the others not
    in_sandbox = bench.batch_scores(students, out)
    seeds = {json.loads((out / "results" / f"{s.name}.json").read_text())["seed"] for s in students}
    assert len(seeds) == 200  # a seed per student

    assert _in_one_process(bench, students, folder) == in_sandbox
    assert len(set(in_sandbox.values())) > 3  # the bugs cost different points


def _in_one_process(bench, students, folder: Path) -> dict[str, float]:
    """Each student's score with their functions called in this process (the floor's InProcess) on
    their seed's cases prepared here, without the store."""
    from grader.classroom.batch import discover, read_files
    from grader.course.loader import load_course
    from grader.course.seeds import student_seed
    from grader.grading import grade as grading
    from grader.grading.prepared import PreparedCases
    course = load_course(EXERCISES)
    found = {s.student: s for s in discover(folder)}
    real, grading.WatchedSession = grading.WatchedSession, bench.InProcess
    try:
        return {s.name: grading.grade(course, read_files(found[s.name]), seed=student_seed(SECRET, s.name),
                                      cache=PreparedCases()).score for s in students}
    finally:
        grading.WatchedSession = real
