"""`mha grade-all --shard K/N` and `mha merge`: a class graded in three slices and merged is the
class graded in one run, byte for byte.

The class of seven has a course secret (every student on their own seed), one submission the
grader fails on (ben: the grader raises on his file) and one that runs out of time at import
(fay). The slices, the merge and the single run are `mha` processes of their own, each
grade-all with two grader processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.classroom.shards import from_environment, slice_of
from grader.cli.commands import main
from grader.errors import ExitCode

from .conftest import EXERCISES, SOLUTIONS, solution_source
from .test_batch import WRONG_AXIS_SOFTMAX, read_csv

SECRET = "shards-test-secret"
SUBSET = ["softmax", "split_heads"]  # graded by these tests, to keep them short
CLASS = {  # student -> (file, text); the slice of each (sha256 of the id, mod 3) is in the comment
    "ann": ("ann/attention.py", solution_source()),                      # 3
    "ben": ("ben/attention.py", "BOOM = 1\n"),                           # 3: the grader fails on it
    "cy": ("cy/attention.py", solution_source() + WRONG_AXIS_SOFTMAX),    # 1
    "dee": ("dee.py", solution_source()),                                 # 3
    "fay": ("fay/attention.py", "while True:\n    pass\n"),               # 1: out of time at import
    "hal": ("hal/attention.py", solution_source()),                      # 2
    "jo": ("jo/attention.py", solution_source()),                        # 2
}


@pytest.fixture
def fragile(monkeypatch):
    """The grader raises on a file holding BOOM, and grades only SUBSET (forked grader processes inherit it)."""
    import grader.grading.grade
    real = grader.grading.grade.grade

    def grade(course, files, *, limits, seed, cache=None):
        if files.source.data is not None and b"BOOM" in files.source.data:
            raise RuntimeError("boom")
        return real(course, files, problem_ids=SUBSET, limits=limits, seed=seed, cache=cache)
    monkeypatch.setattr(grader.grading.grade, "grade", grade)


def make_class(folder: Path, students=CLASS) -> Path:
    for name, text in students.values():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    if "jo" in students:
        (folder / "jo" / "answers.yaml").write_text((SOLUTIONS / "answers.yaml").read_text())
    return folder


def mha(*args: str, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(main, ["--course", str(EXERCISES), *args],
                              env={"MHA_COURSE_SECRET": SECRET, **(env or {})}, catch_exceptions=False)


def outputs(out: Path) -> dict[str, bytes]:
    """Every file under `out` but a slice's shard.json, by relative path."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "shard.json"}


@pytest.fixture(scope="module")
def students_by_slice():
    return {s: slice_of(s, 3) for s in CLASS}


def test_the_slices_of_the_class(students_by_slice):
    """Each slice of three holds some of the class (so the test below merges three real slices)."""
    assert students_by_slice == {"ann": 3, "ben": 3, "cy": 1, "dee": 3, "fay": 1, "hal": 2, "jo": 2}


# `mha` in a process of its own, its grader failing on a file holding BOOM and grading only SUBSET (as
# the `fragile` fixture does in this process)
FRAGILE_MHA = f"""
import sys
import grader.grading.grade
from grader.cli.commands import main
real = grader.grading.grade.grade

def grade(course, files, *, limits, seed, cache=None):
    if files.source.data is not None and b"BOOM" in files.source.data:
        raise RuntimeError("boom")
    return real(course, files, problem_ids={SUBSET!r}, limits=limits, seed=seed, cache=cache)

grader.grading.grade.grade = grade
main(sys.argv[1:], prog_name="mha")
"""


def start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MHA_"))}
    return subprocess.Popen([sys.executable, "-c", FRAGILE_MHA, "--course", str(EXERCISES), *args], cwd=cwd,
                            env={**env, "MHA_COURSE_SECRET": SECRET}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    stdout, stderr = proc.communicate(timeout=600)
    return proc.returncode, stdout, stderr


def test_three_shards_merged_are_one_run_byte_for_byte(tmp_path):
    """The three slices graded at once by three `mha grade-all` processes, then `mha merge` in a
    fourth, write what one `mha grade-all` of the class writes, every file byte for byte."""
    folder = make_class(tmp_path / "class")
    # fay runs out of time at import; 3 s keeps the model answers well inside the limit on a busy machine
    common = ["--jobs", "2", "--import-timeout", "3", "--no-progress"]
    whole = finish(start("grade-all", str(folder), "--out", str(tmp_path / "whole"), *common, cwd=tmp_path))
    assert whole[0] == ExitCode.FAILED, whole  # the grader failed on ben
    parts = [start("grade-all", str(folder), "--out", str(tmp_path / f"part-{k}"), "--shard", f"{k}/3", *common,
                   cwd=tmp_path) for k in (1, 2, 3)]
    for k, proc in enumerate(parts, 1):
        code, _, stderr = finish(proc)
        assert code == (ExitCode.FAILED if k == 3 else 0), stderr
        manifest = json.loads((tmp_path / f"part-{k}" / "shard.json").read_text())
        assert (manifest["shard"], sorted(manifest["students"])) == (
            [k, 3], sorted(s for s, n in slice_of_all().items() if n == k))
    merged = finish(start("merge", *(str(tmp_path / f"part-{k}") for k in (3, 1, 2)), "--out", str(tmp_path / "merged"),
                          cwd=tmp_path))
    assert merged[0] == ExitCode.FAILED, merged
    # the grader's tracebacks of every run, to tell why when a run failed on another student
    logs = {p.parent.name: p.read_text()[-4000:] for p in tmp_path.glob("*/grader-errors.log")}
    assert merged[1] == whole[1].replace(str(tmp_path / "whole"), str(tmp_path / "merged")), logs
    rows = {r["student"]: r["status"] for r in read_csv(tmp_path / "merged" / "gradebook.csv")}
    assert rows == {"ann": "graded", "ben": "error", "cy": "graded", "dee": "graded", "fay": "timeout",
                    "hal": "graded", "jo": "graded"}
    seeds = {json.loads(p.read_text())["seed"] for p in (tmp_path / "merged" / "results").glob("*.json")}
    assert len(seeds) == 7  # a seed per student (ben's failed record has his too)
    expected, got = outputs(tmp_path / "whole"), outputs(tmp_path / "merged")
    assert {"gradebook.csv", "results/ben.json", "feedback/fay.txt", "item_analysis.json", "item_analysis.csv",
            "misconceptions.csv", "report.html", "written.csv", "written.html", "grader-errors.log"} <= set(expected)
    assert sorted(got) == sorted(expected)
    assert [name for name in expected if got[name] != expected[name]] == []
    # the merged folder is a class graded in one run: grade-all on it grades only what failed (ben) again
    again = finish(start("grade-all", str(folder), "--out", str(tmp_path / "merged"), *common, cwd=tmp_path))
    assert "(6 unchanged since the last run, not graded again)" in again[1], again


def slice_of_all() -> dict[str, int]:
    return {s: slice_of(s, 3) for s in CLASS}


def test_a_student_keeps_their_slice_when_another_joins(tmp_path, fragile):
    """Adding kim to the class moves nobody: each slice's students are those of before, plus kim in hers."""
    folder = make_class(tmp_path / "class", {s: CLASS[s] for s in ("ann", "cy", "hal")})
    before = mha("grade-all", str(folder), "--out", str(tmp_path / "before"), "--shard", "2/3", "--jobs", "1")
    (folder / "kim.py").write_text(solution_source())
    after = mha("grade-all", str(folder), "--out", str(tmp_path / "after"), "--shard", "2/3", "--jobs", "1")
    assert (before.exit_code, after.exit_code) == (0, 0), before.output + after.output
    students = [sorted(json.loads((tmp_path / name / "shard.json").read_text())["students"])
                for name in ("before", "after")]
    assert students == [["hal"], ["hal", "kim"]]
    assert slice_of("hal", 3) == slice_of("hal", 3) == 2 and slice_of("kim", 3) == 2


@pytest.mark.parametrize(("environ", "shard"), [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3"}, (1, 3)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}, (3, 3)),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, (2, 2)),
    ({"JOB_COMPLETION_INDEX": "0", "MHA_SHARD_COUNT": "4"}, (1, 4)),
    ({"JOB_COMPLETION_INDEX": "3", "MHA_SHARD_COUNT": "4"}, (4, 4)),
])
def test_shard_auto_reads_slurm_and_kubernetes(environ, shard):
    assert from_environment(environ) == shard


def test_shard_auto_in_a_run(tmp_path, fragile):
    """--shard auto under a Slurm array task and a Kubernetes index grades that slice."""
    folder = make_class(tmp_path / "class", {s: CLASS[s] for s in ("ann", "cy", "hal")})
    slurm = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
    for name, env in (("slurm", slurm), ("k8s", {"JOB_COMPLETION_INDEX": "1", "MHA_SHARD_COUNT": "3"})):
        result = mha("grade-all", str(folder), "--out", str(tmp_path / name), "--shard", "auto", "--jobs", "1", env=env)
        assert result.exit_code == 0, result.output
        manifest = json.loads((tmp_path / name / "shard.json").read_text())
        assert (manifest["shard"], list(manifest["students"])) == ([2, 3], ["hal"])


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX"),
    ({"SLURM_ARRAY_TASK_ID": "1"}, "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not"),
    ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "3"}, "--shard auto: SLURM_ARRAY_TASK_ID='x' is not"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3"}, "--shard auto: slice 4 of 3"),
    ({"JOB_COMPLETION_INDEX": "0"}, "--shard auto: JOB_COMPLETION_INDEX is set but MHA_SHARD_COUNT is not"),
    ({"JOB_COMPLETION_INDEX": "0", "MHA_SHARD_COUNT": "0"}, "--shard auto: slice 1 of 0"),
])
def test_shard_auto_without_its_variables_is_exit_2(tmp_path, environ, message):
    folder = make_class(tmp_path / "class", {"ann": CLASS["ann"], "jo": CLASS["jo"]})
    unset = dict.fromkeys(["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT",
                           "JOB_COMPLETION_INDEX", "MHA_SHARD_COUNT"])
    result = mha("grade-all", str(folder), "--out", str(tmp_path / "out"), "--shard", "auto", env={**unset, **environ})
    assert result.exit_code == ExitCode.USAGE
    assert message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out" / "gradebook.csv").exists()


def test_written_scores_are_for_the_whole_class_not_a_slice(tmp_path):
    folder = make_class(tmp_path / "class", {"ann": CLASS["ann"]})
    (tmp_path / "scores.csv").write_text("student,item,score\n")
    result = mha("grade-all", str(folder), "--out", str(tmp_path / "out"), "--shard", "1/2",
                 "--written-scores", str(tmp_path / "scores.csv"))
    assert result.exit_code == ExitCode.USAGE
    assert result.stderr.splitlines()[-1] == (
        "--written-scores is for the whole class: merge the slices (mha merge), then run grade-all with it on the "
        "merged folder (nothing is graded again)")


@pytest.mark.parametrize("value", ["0/3", "4/3", "x", "1/0", "-1/3", "2"])
def test_a_bad_shard_is_a_usage_error(tmp_path, value):
    result = mha("grade-all", str(tmp_path), "--out", str(tmp_path / "out"), "--shard", value)
    assert result.exit_code == ExitCode.USAGE
    assert f"Invalid value for '--shard': {value!r} is not K/N with 1 <= K <= N" in result.stderr


def test_merge_refuses_overlaps_other_secrets_and_missing_slices(tmp_path, fragile):
    folder = make_class(tmp_path / "class", {s: CLASS[s] for s in ("ann", "cy", "hal")})
    for k in (1, 2, 3):
        assert mha("grade-all", str(folder), "--out", str(tmp_path / f"p{k}"), "--shard", f"{k}/3",
                   "--jobs", "1").exit_code == 0
    other = mha("grade-all", str(folder), "--out", str(tmp_path / "other"), "--shard", "2/3", "--jobs", "1",
                env={"MHA_COURSE_SECRET": "another secret"})
    assert other.exit_code == 0
    cases = {
        (str(tmp_path / "p1"), str(tmp_path / "p2"), str(tmp_path / "p2")):
            f"{tmp_path / 'p2'}: student 'hal' is also in {tmp_path / 'p2'}: a student may be in one shard only",
        (str(tmp_path / "p1"), str(tmp_path / "other"), str(tmp_path / "p3")):
            f"{tmp_path / 'other'}: graded with another course secret than {tmp_path / 'p1'}",
        (str(tmp_path / "p1"), str(tmp_path / "p3")): "the shards given are 1/3, 3/3: give every slice K/N",
        (str(tmp_path / "p1"), str(tmp_path / "class")): f"{tmp_path / 'class'}: no shard.json",
    }
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "shard.json").write_text('{"version": 1, "shard": "1/3", "students": {}}')
    cases[(str(tmp_path / "bad"),)] = f"{tmp_path / 'bad' / 'shard.json'}: not a shard manifest of this version of mha"
    for given, message in cases.items():
        result = mha("merge", *given, "--out", str(tmp_path / "merged"))
        assert result.exit_code == ExitCode.USAGE, result.output
        assert message in result.stderr and "Traceback" not in result.output
    assert mha("merge", str(tmp_path / "p1"), str(tmp_path / "p2"), str(tmp_path / "p3"),
               "--out", str(tmp_path / "merged")).exit_code == 0
    assert [r["student"] for r in read_csv(tmp_path / "merged" / "gradebook.csv")] == ["ann", "cy", "hal"]
