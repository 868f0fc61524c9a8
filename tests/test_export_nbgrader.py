"""nbgrader export: real nbgrader, offline, runs it. `generate_assignment` strips the solutions and the
hidden cases, and `autograde` gives each problem and quiz item `mha grade`'s points, for the model
answers and for a notebook with one bug.

nbgrader runs in a fresh venv that sees this environment's packages but not this checkout: the
grader comes from the export's own wheel, installed with `pip install --no-index -r requirements.txt`
as an instructor's grading environment would be. Its course folder, gradebook (sqlite) and every
Jupyter and IPython folder are in the test's temporary folder, never the user's home.
Students' side: `nbgrader validate` on the release where only the student wheel is installed.
Slow-ish (a few minutes on a busy machine: venvs, nbgrader runs and kernels), but part of the default run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.quiz import DEFAULT_SEED, answer_key, draw
from grader.exports import nbgrader as exporter
from grader.exports.pysource import split_module
from grader.grading.answers import grade_item
from grader.grading.nbgrader_checks import answer_score, problem_score

from ._install import clean_env, fresh_venv, link_farm
from .conftest import EXERCISES, SOLUTIONS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


ASSIGNMENT = exporter.ASSIGNMENT
BUG = ("biases = 4 * d_model if bias else 0", "biases = d_model if bias else 0")  # parameter_count alone
BUGGY_PROBLEM = "parameter_count"
# quiz answers in the buggy notebook: a wrong choice, and a multiple-answers item with a false
# statement added (partial credit with penalty)
WRONG_ANSWERS = {"two_relations": "a", "model_claims": ["a", "b", "c", "e"]}
WRITTEN = "W_O mixes the heads' slices of the output."
STUDENTS = ("correct", "buggy")
TABLE_STUDENT = "every-platform"  # tests/test_platform_table.py's submission, graded with the two above


def _export(out: Path) -> None:
    from click.testing import CliRunner

    from grader.cli.commands import main
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "export", "nbgrader", "--out", str(out)])
    assert result.exit_code == 0, result.output


def _environment(tmp: Path, course_folder: Path) -> tuple[Path, dict]:
    """The grading environment: a fresh venv with the export's wheel installed from its requirements.txt
    (nbgrader and the rest linked from here), HOME and the Jupyter folders in `tmp`."""
    python = fresh_venv(tmp / "venv", link_farm(tmp / "shared", names=None))
    home = tmp / "home"
    home.mkdir()
    env = clean_env(tmp, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
                    JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
                    JUPYTER_PLATFORM_DIRS="1")
    env.pop("JUPYTER_PATH", None)
    # a kernel started by name is this venv's python; the commands of the packages linked from here
    # (nbgrader runs alembic by name) are beside this environment's python, on PATH or not
    env["PATH"] = f"{python.parent}:{Path(sys.executable).parent}:{env['PATH']}"
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "-r", "requirements.txt"],
                          cwd=course_folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return python, env


def _nbgrader(python: Path, env: dict, course_folder: Path, *args: str) -> str:
    done = subprocess.run([str(python), "-m", "nbgrader", *args, f"--CourseDirectory.root={course_folder}",
                           f"--CourseDirectory.db_url=sqlite:///{course_folder / 'gradebook.db'}"],
                          cwd=course_folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout + done.stderr


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def filled(release: dict, course, buggy: bool) -> dict:
    """The released notebook with the model answers (solutions/attention.py) in the problems' solution
    cells, the quiz key in the answer cells and a text in the written ones; `buggy`: with BUG, and
    WRONG_ANSWERS."""
    functions = split_module((SOLUTIONS / "attention.py").read_text()).functions
    key = answer_key(course.quiz, DEFAULT_SEED)
    notebook = json.loads(json.dumps(release))
    for cell in notebook["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if not meta.get("solution"):
            continue
        grade_id = meta["grade_id"]
        if cell["cell_type"] == "markdown":
            cell["source"] = WRITTEN
        elif grade_id.endswith("-solution"):
            code = functions[course.problem(grade_id.removesuffix("-solution")).function.name]
            if buggy and BUG[0] in code:
                code = code.replace(*BUG)
            cell["source"] = code
        else:
            item = grade_id.removesuffix("-answer")
            value = WRONG_ANSWERS[item] if buggy and item in WRONG_ANSWERS else key[item]
            cell["source"] = f"{item} = {value!r}\n"
    return notebook


def _quiz_answers(notebook: dict) -> dict:
    import ast
    found = {}
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
        if cell["cell_type"] == "code" and grade_id.endswith("-answer"):
            found[grade_id.removesuffix("-answer")] = ast.literal_eval(_source(cell).split("=", 1)[1].strip())
    return found


def build_graded(folder: Path) -> dict:
    """In `folder`: the export after `nbgrader generate_assignment` (course/), its grading venv
    (venv/), and `nbgrader autograde` of three students of the course's own gradebook: the model
    answers (correct), a buggy notebook (buggy), and tests/test_platform_table.py's submission
    (every-platform). Built once per test run for this file and the platform table (the
    `nbgrader_graded` fixture); tests read it and change nothing in it."""
    from grader.course.loader import load_course

    from .test_platform_table import submission_files
    course_folder = folder / "course"
    _export(course_folder)
    python, env = _environment(folder, course_folder)
    _nbgrader(python, env, course_folder, "generate_assignment", ASSIGNMENT)
    release = json.loads((course_folder / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    course = load_course(EXERCISES)  # the core, as the export ships it
    notebooks = {student: filled(release, course, buggy=student == "buggy") for student in STUDENTS}
    notebooks[TABLE_STUDENT] = from_files(release, submission_files())
    for student, notebook in notebooks.items():
        _nbgrader(python, env, course_folder, "db", "student", "add", student)
        target = course_folder / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(notebook))
    _nbgrader(python, env, course_folder, "autograde", ASSIGNMENT)
    return {"python": str(python.relative_to(folder))}


@pytest.fixture(scope="module")
def graded(nbgrader_graded):
    """The shared course after `generate_assignment` and `autograde` (build_graded): its folder,
    the notebooks the students submitted (correct and buggy), the grading venv's python."""
    shared, info = nbgrader_graded
    folder = shared / "course"
    notebooks = {student: json.loads((folder / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
                 for student in STUDENTS}
    return folder, notebooks, shared / info["python"]


def _nbgrader_scores(python: Path, folder: Path, student: str) -> dict[str, float | None]:
    """Each grade cell's automatic score in the gradebook, by grade id, read by nbgrader's API in the grading venv."""
    code = ("import json, sys\nfrom nbgrader.api import Gradebook\n"
            "with Gradebook(sys.argv[1]) as gb:\n"
            "    nb = gb.find_submission_notebook(sys.argv[2], sys.argv[2], sys.argv[3])\n"
            "    print(json.dumps({g.name: [g.auto_score, g.max_score] for g in nb.grades}))\n")
    done = subprocess.run([str(python), "-c", code, f"sqlite:///{folder / 'gradebook.db'}", ASSIGNMENT, student],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


class TestGenerateAssignment:
    @pytest.mark.slow
    def test_the_release_has_no_solution(self, graded, course):
        """The released notebook keeps each stub's signature with nbgrader's stub, never the model answers."""
        folder, _, _ = graded
        text = (folder / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        release = json.loads(text)
        solution_cells = {c["metadata"]["nbgrader"]["grade_id"]: _source(c) for c in release["cells"]
                          if c["metadata"].get("nbgrader", {}).get("solution")}
        for problem in course.problems:
            cell = solution_cells[f"{problem.id}-solution"]
            assert f"def {problem.function.name}(" in cell and "YOUR CODE HERE" in cell
        assert "e / e.sum(axis=-1, keepdims=True)" not in text and BUG[0] not in text
        key = answer_key(course.quiz, DEFAULT_SEED)
        for item in course.quiz.items:
            if item.manual:
                assert solution_cells[item.id] == "YOUR ANSWER HERE"  # the rubric stays in the source
                assert item.rubric[0].text not in text
            else:
                assert f"{item.id} = {key[item.id]!r}" not in solution_cells[f"{item.id}-answer"]

    @pytest.mark.slow
    def test_hidden_cases_are_not_in_the_release(self, graded, course):
        """No hidden case's name (the test cells hold names, never inputs) reaches the release; the public ones do."""
        folder, _, _ = graded
        source = (folder / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
        release = (folder / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
        # a case as its test cell names it (a name alone may be a phrase of a prompt)
        hidden = [json.dumps(repr(c.name))[1:-1] for p in course.problems for c in p.cases if c.hidden]
        public = [json.dumps(repr(c.name))[1:-1] for p in course.problems for c in p.cases if not c.hidden]
        assert hidden and all(name in source for name in hidden)
        assert [name for name in hidden if name in release and name not in public] == []
        assert all(name in release for name in public)
        assert "HIDDEN TESTS" not in release
        hidden_items = [i.id for i in course.quiz.items if i.hidden]
        assert all(f"answer_score({i!r}" not in release for i in hidden_items)

    @pytest.mark.slow
    def test_the_release_carries_the_student_wheel_and_models(self, graded):
        """Students get the student wheel (public seed cases only, no hidden item's key) and the models' weights; the
        full grader stays out."""
        import zipfile
        folder, _, _ = graded
        released = folder / "release" / ASSIGNMENT
        wheels = [w.name for w in released.glob("*.whl")]
        assert len(wheels) == 1 and "+student" in wheels[0]
        assert sorted(p.name for p in (released / "models").glob("*.npz"))
        with zipfile.ZipFile(released / wheels[0]) as wheel:
            names = wheel.namelist()
            assert "grader/grading/nbgrader_checks.py" in names
            assert not any(n.startswith("grader/_course/") for n in names)
            seed_cases = json.loads(wheel.read("grader/_seed_cases/default.json"))
        assert all(c["visibility"] == "public" for p in seed_cases["problems"] for c in p["cases"])
        hidden_items = [i for i in seed_cases["quiz"]["items"] if i["item"]["visibility"] == "hidden"]
        assert hidden_items and all(i["answer"] is None and i["item"]["answer"] is None for i in hidden_items)
        assert not any(c["correct"] for i in hidden_items for c in i["choices"] + i["item"]["choices"])


class TestAutograde:
    @pytest.mark.slow
    @pytest.mark.parametrize("student", STUDENTS)
    def test_points_equal_mha_grade(self, graded, course, cli, tmp_path, student):
        """nbgrader's points for every problem are `mha grade`'s for the same notebook, and for every quiz item
        its rule's; the model answers earn everything, the buggy notebook loses exactly parameter_count's
        points (and the wrong answers' share); written answers wait for a grader."""
        folder, notebooks, python = graded
        scores = _nbgrader_scores(python, folder, student)
        notebook = tmp_path / f"{student}.ipynb"
        notebook.write_text(json.dumps(notebooks[student]))
        result = cli("grade", str(notebook), "--format", "json")
        assert result.exit_code == 0, result.output
        mha = {p["id"]: p["score"] for p in json.loads(result.stdout)["problems"] if p["id"] in scores}
        assert {p.id: scores[p.id][0] for p in course.problems} == pytest.approx(
            {p.id: mha[p.id] for p in course.problems}, abs=1e-9)
        assert {p.id: scores[p.id][1] for p in course.problems} == {p.id: p.points for p in course.problems}
        answers = _quiz_answers(notebooks[student])
        quiz = {i.id: grade_item(draw(i, DEFAULT_SEED), answers[i.id], None, include_hidden=True).score
                for i in course.quiz.items if not i.manual}
        assert {i: scores[i][0] for i in quiz} == pytest.approx(quiz, abs=1e-9)
        assert all(scores[i.id] == [None, i.points] for i in course.quiz.items if i.manual)
        lost = {p.id for p in course.problems if scores[p.id][0] < p.points}
        if student == "correct":
            assert lost == set() and quiz == {i.id: i.points for i in course.quiz.items if not i.manual}
        else:
            assert lost == {BUGGY_PROBLEM} and scores[BUGGY_PROBLEM][0] == mha[BUGGY_PROBLEM] < course.problem(
                BUGGY_PROBLEM).points
            assert quiz["two_relations"] == 0 and 0 < quiz["model_claims"] < course.quiz.item("model_claims").points

    @pytest.mark.slow
    def test_the_buggy_cell_says_why(self, graded):
        """The autograded test cell of the buggy problem prints the failed case's feedback, `mha check`'s lines."""
        folder, _, _ = graded
        autograded = json.loads((folder / "autograded" / "buggy" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
        cell = next(c for c in autograded["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == BUGGY_PROBLEM)
        text = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")
        assert "FAIL" in text and not any(o["output_type"] == "error" for o in cell["outputs"])


class TestStudentValidate:
    @pytest.mark.slow
    def test_students_validate_with_the_student_wheel(self, graded, course, tmp_path):
        """`nbgrader validate` where only the released student wheel is installed: the model answers pass every
        public test, the buggy notebook fails parameter_count's cell alone (partial credit)."""
        import shutil
        folder, _, _ = graded
        released = folder / "release" / ASSIGNMENT
        wheel, = released.glob("*.whl")
        python = fresh_venv(tmp_path / "venv", link_farm(tmp_path / "shared", names=None))
        home = tmp_path / "home"
        env = clean_env(tmp_path, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
                        JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                        IPYTHONDIR=str(home / "ipython"))
        env["PATH"] = f"{python.parent}:{Path(sys.executable).parent}:{env['PATH']}"  # as _environment's
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", str(wheel)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        release = json.loads((released / f"{ASSIGNMENT}.ipynb").read_text())
        outputs = {}
        for student in STUDENTS:
            work = tmp_path / student
            shutil.copytree(released / "models", work / "models")
            (work / "notebook.ipynb").write_text(json.dumps(filled(release, course, buggy=student == "buggy")))
            done = subprocess.run([str(python), "-m", "nbgrader", "validate", "notebook.ipynb"], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            outputs[student] = done.stdout
        assert "Success! Your notebook passes all the tests." in outputs["correct"], outputs["correct"][-3000:]
        assert "VALIDATION FAILED ON 1 CELL(S)" in outputs["buggy"], outputs["buggy"][-3000:]
        assert f"problem_score({BUGGY_PROBLEM!r}" in outputs["buggy"]


def _model(name: str):
    """The model answer `name` from solutions/attention.py, defined here as the notebook defines it."""
    namespace: dict = {}
    exec(compile((SOLUTIONS / "attention.py").read_text(), "attention.py", "exec"), namespace)  # our own file
    return namespace[name]


class TestProblemScore:
    def test_the_model_answer_earns_the_points(self, course, capsys):
        """Every case passes: the problem's points, each case reported ok."""
        problem = course.problem("softmax")
        names = [c.name for c in problem.cases]
        assert problem_score("softmax", _model("softmax"), names, EXERCISES) == problem.points
        assert capsys.readouterr().out.count("ok ") == len(names)

    def test_a_bug_earns_mha_grades_share(self, course, cli, write_submission):
        """A wrong answer earns the points `mha grade` gives the same code, and says FAIL."""
        source = (SOLUTIONS / "attention.py").read_text().replace(*BUG)
        namespace: dict = {}
        exec(compile(source, "attention.py", "exec"), namespace)  # our own file, one line changed
        problem = course.problem(BUGGY_PROBLEM)
        score = problem_score(BUGGY_PROBLEM, namespace[problem.function.name], [c.name for c in problem.cases],
                              EXERCISES)
        result = cli("grade", str(write_submission(source)), "--problem", BUGGY_PROBLEM, "--format", "json")
        expected = next(p["score"] for p in json.loads(result.stdout)["problems"] if p["id"] == BUGGY_PROBLEM)
        assert score == expected < problem.points

    def test_student_stderr_and_warnings_stay_out_of_the_cell(self, course, capfd):
        """What student code writes to stderr, and numpy's warnings, never reach the cell's stderr (nbgrader would
        give the cell 0): the score is the model answer's."""
        import sys

        import numpy as np
        model = _model("softmax")

        def noisy(x):
            print("debugging", file=sys.stderr)
            np.exp(np.array([1000.0]))  # overflow: a RuntimeWarning
            return model(x)

        problem = course.problem("softmax")
        assert problem_score("softmax", noisy, [c.name for c in problem.cases], EXERCISES) == problem.points
        assert capfd.readouterr().err == ""

    def test_no_function_earns_nothing(self, course):
        """A function the notebook never defined (None) earns 0 and does not raise."""
        problem = course.problem("softmax")
        assert problem_score("softmax", None, [c.name for c in problem.cases], EXERCISES) == 0


class TestAnswerScore:
    def test_partial_credit_with_penalty(self, course, capsys):
        """A multiple-answers answer with a false statement earns mha grade's share, the key all, a blank nothing."""
        item = course.quiz.item("model_claims")
        key = answer_key(course.quiz, DEFAULT_SEED)["model_claims"]
        expected = grade_item(draw(item, DEFAULT_SEED), ["a", "b", "c", "e"], None, include_hidden=True).score
        assert answer_score("model_claims", ["a", "b", "c", "e"], EXERCISES) == expected
        assert 0 < expected < item.points
        assert answer_score("model_claims", key, EXERCISES) == item.points
        assert answer_score("model_claims", ..., EXERCISES) == 0
        assert "model_claims: not right" in capsys.readouterr().out  # a hidden item: the kind of failure only


class TestSourceNotebook:
    def test_cells_carry_nbgrader_metadata(self, course):
        """Per problem a solution cell and a locked test cell worth its points; per quiz item a test cell or,
        for a written item, a manually graded Markdown cell worth its points with its rubric."""
        import nbformat
        notebook = json.loads(exporter.source_notebook(course, SOLUTIONS / "attention.py", "student.whl"))
        nbformat.validate(nbformat.reads(json.dumps(notebook), as_version=4))
        cells = {c["metadata"]["nbgrader"]["grade_id"]: c for c in notebook["cells"] if "nbgrader" in c["metadata"]}
        for problem in course.problems:
            test = cells[problem.id]["metadata"]["nbgrader"]
            assert (test["grade"], test["solution"], test["locked"], test["points"]) == (True, False, True, problem.points)
            solution = cells[f"{problem.id}-solution"]
            assert solution["metadata"]["nbgrader"]["solution"] and not solution["metadata"]["nbgrader"]["grade"]
            assert "### BEGIN SOLUTION" in _source(solution) and "### END SOLUTION" in _source(solution)
            if any(c.hidden for c in problem.cases):
                assert "### BEGIN HIDDEN TESTS" in _source(cells[problem.id])
        for item in course.quiz.items:
            cell = cells[item.id]
            meta = cell["metadata"]["nbgrader"]
            assert meta["grade"] and meta["points"] == item.points
            if item.manual:
                assert cell["cell_type"] == "markdown" and meta["solution"]
                assert all(r.text in _source(cell) for r in item.rubric)
            else:
                assert cell["cell_type"] == "code" and not meta["solution"] and meta["locked"]


class TestCommand:
    def test_a_bad_assignment_name_is_refused(self, cli, tmp_path):
        """--name must be a name nbgrader can use as a folder: anything else exits 2 naming it, writing nothing."""
        result = cli("export", "nbgrader", "--out", str(tmp_path / "out"), "--name", "../up")
        assert result.exit_code == 2 and "--name must be" in result.stderr and "'../up'" in result.stderr
        assert not (tmp_path / "out").exists()

    def test_help_has_an_example(self, cli):
        """`mha export nbgrader -h` shows the command's example."""
        result = cli("export", "nbgrader", "-h")
        assert result.exit_code == 0 and "nbgrader generate_assignment" in result.output


def from_files(release: dict, files: dict[str, str]) -> dict:
    """The released notebook holding a submission (attention.py and answers.yaml, as text): its
    code in the notebook's first code cell, the solution cells emptied, each quiz answer assigned
    in its answer cell (an unanswered item keeps the release's stub), a written answer's text in
    its cell."""
    import yaml
    notebook = json.loads(json.dumps(release))
    answers = yaml.safe_load(files["answers.yaml"]) or {}
    code_cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code_cell["source"] = files["attention.py"]
    for cell in notebook["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell is code_cell or not meta.get("solution"):
            continue
        item = meta["grade_id"].removesuffix("-answer")
        if meta["grade_id"].endswith("-solution"):
            cell["source"] = ""  # the functions are in the first cell
        elif item in answers:
            cell["source"] = str(answers[item]) if cell["cell_type"] == "markdown" else f"{item} = {answers[item]!r}\n"
    return notebook


def nbgrader_fraction(graded: tuple[Path, dict]) -> float:
    """The share of the automatic points nbgrader's `autograde` gave tests/test_platform_table.py's
    submission (the student every-platform of the shared course, `nbgrader_graded`); written
    answers are left out of the fraction, as on every platform."""
    shared, info = graded
    from grader.course.loader import load_course
    written = {i.id for i in load_course(EXERCISES).quiz.items if i.manual}
    scores = _nbgrader_scores(shared / info["python"], shared / "course", TABLE_STUDENT)
    scored = [score for grade_id, score in scores.items() if grade_id not in written]
    return sum(s for s, _ in scored) / sum(m for _, m in scored)
