"""The cross-platform score table: one buggy submission graded on every platform that grades the
whole assignment, each run the way that platform runs it (offline, outside the repository), gives
the same fraction; the platforms that carry only part of the assignment say which part."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.exports import prairielearn, wheelhouse

from ._submissions import HALF_ANSWERS, half_done_source
from .conftest import EXERCISES
from .test_export_github_workflow import SECRET, export_starter, run_workflow
from .test_export_gradescope import autograder, run_autograder
from .test_export_nbgrader import nbgrader_fraction
from .test_export_prairielearn import _Elements, _server, grade_job, pl_score, render_page
from .test_mistakes import BUGS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


pytestmark = pytest.mark.slow  # runs every platform's grader (otter, a GitHub workflow, PrairieLearn jobs)

# Platforms that carry part of the assignment only, and why (docs/platforms.md, "One submission, every platform").
PARTIAL = {
    "Canvas (QTI)": "the concept quiz only; the code is graded on another platform",
    "Moodle XML": "the concept quiz only; the code is graded on another platform",
    "Autolab": "the code only (its handin is one file); each problem scores as `mha grade` (test_export_autolab.py)",
}


# A written answer: recorded on every platform and graded by hand there, so it is in no platform's
# automatic fraction (a test with no score on Gradescope, no GitHub step, manualPoints on PrairieLearn,
# a manual question in otter).
WRITTEN_ANSWER = 'why_w_o: "W_O mixes the heads\' slices of the output."\n'


def buggy_source() -> str:
    """Half the problems done, the other half stubs, and softmax over the wrong axis."""
    bug = next(b for b in BUGS if b.mistake == "softmax-wrong-axis")
    return half_done_source() + "\n\n" + textwrap.dedent(bug.source)


def _mha(folder: Path) -> float:
    done = subprocess.run([sys.executable, "-m", "grader", "--course", str(EXERCISES), "grade", str(folder),
                           "--format", "json"], capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout)
    return report["score"] / report["max_score"]


def _gradescope(tmp: Path, course, files: dict[str, str]) -> float:
    result = run_autograder(autograder(tmp, course, secret=None), files)
    return result["score"] / sum(t.get("max_score", 0) for t in result["tests"])  # written: no score, pending


def _prairielearn(tmp: Path, course, files: dict[str, str]) -> float:
    """Each code question through its entry point, each quiz question by PrairieLearn's rules,
    weighted by the assessment's points."""
    course_dir = tmp / "course"
    python = wheelhouse.running_python()
    prairielearn.write(course_dir, prairielearn.build(course, wheelhouse.download(python), python, draws=1))
    assessment = json.loads((course_dir / "courseInstances" / prairielearn.INSTANCE / "assessments" /
                             prairielearn.ASSESSMENT / "infoAssessment.json").read_text())
    # written items carry manualPoints only: graded by hand, outside the automatic fraction
    points = {q["id"]: q["points"] for zone in assessment["zones"] for q in zone["questions"] if "points" in q}
    import yaml
    answers = yaml.safe_load(files["answers.yaml"]) or {}
    earned = 0.0
    for problem in course.problems:
        result = grade_job(course_dir, tmp / f"job-{problem.id}", problem.id, files["attention.py"])
        earned += result["score"] * points[problem.id]
    for item in course.quiz.items:
        submitted = answers.get(item.id)
        if submitted is None or item.manual:
            continue  # blank: PrairieLearn grades nothing and awards nothing
        folder = course_dir / "questions" / prairielearn.quiz_qid(item)
        data = {"params": {}, "correct_answers": {}, "variant_seed": 0}
        _server(folder / "server.py").generate(data)
        parser = _Elements()
        parser.feed(render_page((folder / "question.html").read_text(), data["params"]))
        tag, attrs = parser.element
        if tag == "pl-checkbox" and isinstance(submitted, str):
            submitted = [submitted]
        score = pl_score(tag, attrs, parser.answers, data["correct_answers"].get("answer"), submitted)
        earned += score * points[prairielearn.quiz_qid(item)]
    return earned / sum(points.values())


def _github_classroom(tmp: Path, folder: Path) -> float:
    """The starter repository's workflow, installing the grader from a private folder (as an instructor keeps it)."""
    starter, private = tmp / "starter", tmp / "private"
    export_starter(starter, private)
    (tmp / "run").mkdir()
    points, maximum, _ = run_workflow(starter, tmp / "run", {name: folder / name for name in
                                                              ("attention.py", "answers.yaml")}, {SECRET: str(private)})
    return points / maximum


def submission_files() -> dict[str, str]:
    """The buggy submission every platform grades: its two files, as text."""
    return {"attention.py": buggy_source(), "answers.yaml": HALF_ANSWERS + WRITTEN_ANSWER}


def _otter_grader(tmp: Path, files: dict[str, str], otter_autograder: Path) -> float:
    """`otter run` on a notebook holding the submission's code and its quiz answers as variables,
    with the otter export after `otter assign` and `otter generate`, in the environment the
    autograder zip declares (a copy of the `otter_autograder` fixture, tests/test_export_otter.py)."""
    import yaml

    from grader.exports import otter as exporter
    from grader.exports.ipynb import new_code_cell, new_notebook, writes

    from .test_export_otter import _otter, _wait, autograder_copy
    python, env = autograder_copy(otter_autograder, tmp)
    autograder = tmp / "dist" / "autograder"
    answers = yaml.safe_load(files["answers.yaml"]) or {}
    cells = [new_code_cell(files["attention.py"]),
             new_code_cell("".join(f"{k} = {v!r}\n" for k, v in answers.items()))]
    for number, cell in enumerate(cells):
        cell["id"] = f"submission-{number}"
    run = tmp / "run"
    (run / "out").mkdir(parents=True)
    student = json.loads((tmp / "dist" / "student" / exporter.NOTEBOOK_NAME).read_text())
    # the student's notebook as handed out (its metadata names the assignment), its cells replaced
    (run / exporter.NOTEBOOK_NAME).write_text(writes(new_notebook(cells=cells, metadata=student["metadata"])))
    _wait(_otter("run", "-a", str(autograder / "autograder.zip"), "-o", "out", exporter.NOTEBOOK_NAME, cwd=run,
                 python=python, env=env))
    tests = json.loads((run / "out" / "results.json").read_text())["tests"]
    scored = [t for t in tests if "score" in t and "max_score" in t]
    return sum(t["score"] for t in scored) / sum(t["max_score"] for t in scored)


def score_table(tmp: Path, course, otter_autograder: Path, nbgrader_graded: tuple[Path, dict]) -> dict[str, float | str]:
    folder = tmp / "submission"
    folder.mkdir()
    files = submission_files()
    for name, text in files.items():
        (folder / name).write_text(text)
    table: dict[str, float | str] = {"mha grade": _mha(folder)}
    (tmp / "gs").mkdir()
    table["Gradescope"] = _gradescope(tmp / "gs", course, files)
    (tmp / "pl").mkdir()
    table["PrairieLearn"] = _prairielearn(tmp / "pl", course, files)
    (tmp / "gh").mkdir()
    table["GitHub Classroom"] = _github_classroom(tmp / "gh", folder)
    (tmp / "otter").mkdir()
    table["otter-grader"] = _otter_grader(tmp / "otter", files, otter_autograder)
    table["nbgrader"] = nbgrader_fraction(nbgrader_graded)  # graded with test_export_nbgrader.py's students
    table.update(PARTIAL)
    return table


def render(table: dict[str, float | str]) -> str:
    lines = ["| platform | score of the buggy submission |", "|---|---|"]
    lines += [f"| {name} | {value:.2%} |" if isinstance(value, float) else f"| {name} | not comparable: {value} |"
              for name, value in table.items()]
    return "\n".join(lines) + "\n"


def test_one_buggy_submission_scores_the_same_on_every_platform(tmp_path, course, otter_autograder, nbgrader_graded):
    """mha grade, Gradescope, PrairieLearn, GitHub Classroom (fractional), otter and nbgrader give the same
    fraction of the whole assignment to one buggy submission, strictly between 0 and 1; its written
    answer counts on none of them (graded by hand on each)."""
    table = score_table(tmp_path, course, otter_autograder, nbgrader_graded)
    scores = {name: value for name, value in table.items() if isinstance(value, float)}
    expected = scores["mha grade"]
    assert 0 < expected < 1
    assert all(value == pytest.approx(expected, abs=1e-4) for value in scores.values()), render(table)
    assert set(scores) == {"mha grade", "Gradescope", "PrairieLearn", "GitHub Classroom", "otter-grader", "nbgrader"}
    # the table in docs/platforms.md is this one (`mha grade` in code type there)
    documented = (Path(__file__).resolve().parents[1] / "docs" / "platforms.md").read_text()
    assert render(table).replace("| mha grade |", "| `mha grade` |") in documented, render(table)
