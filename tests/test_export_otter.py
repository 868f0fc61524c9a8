"""otter-grader export: `otter assign`, `otter generate` and `otter run` work on it, and otter's
per-problem scores equal `mha grade`'s for a correct and a buggy submission.

Slow-ish (about half a minute: a kernel for `otter assign`, two `otter run`s in parallel), but
part of the default run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.course.quiz import DEFAULT_SEED, draw
from grader.exports import otter as exporter
from grader.grading.answers import grade_item
from grader.grading.otter_checks import check_answer, check_case, plain

from ._install import clean_env, fresh_venv, link_farm
from ._shared import copy_of
from ._student_models import assert_models_shipped, load_in
from .conftest import EXERCISES


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports ship it: the core, optional problems switched off."""
    return core_course


BUGS = {  # a named mistake in softmax (which MHA reuses) and a miscount in parameter_count
    "return e / e.sum(axis=-1, keepdims=True)": "return e / e.sum()",
    "biases = 4 * d_model if bias else 0": "biases = d_model if bias else 0",
}
# quiz answers in the buggy notebook: a wrong choice, a wrong number, a multiple-answers item with
# a false statement added (partial credit with penalty), a public item left as otter leaves it (...)
WRONG_ANSWERS = {"two_relations": "a", "attention_budget": 0.85, "model_claims": ["a", "b", "c", "e"],
                 "precise_claim": ...}


def _otter(*args: str, cwd: Path, python: Path | None = None, env: dict | None = None) -> subprocess.Popen:
    env = env or {**os.environ, "MHA_COURSE": str(EXERCISES)}
    return subprocess.Popen([str(python or sys.executable), "-m", "otter", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def declared_environment(zip_path: Path, tmp: Path) -> tuple[Path, dict]:
    """A fresh venv built from what the autograder zip declares (environment.yml's pip list, run
    from the unpacked zip as its setup does): the export's requirements are installed by pip;
    otter-grader itself (otter's own line) and third-party packages come from this environment
    by links, never this checkout or its grader (tests/_install.py)."""
    import zipfile

    import yaml
    image = tmp / "image"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(image)
    environment = yaml.safe_load((image / "environment.yml").read_text())
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict) and "pip" in d)
    declared = [line for line in pip if not line.startswith("otter-grader")]
    assert "--find-links=files" in declared and any(line.startswith("mha-exercises==") for line in declared), pip
    python = fresh_venv(tmp / "venv", link_farm(tmp / "shared", names=None))
    env = clean_env(tmp)
    env["PATH"] = f"{python.parent}:{env['PATH']}"  # a kernel started by name is this venv's python
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *declared], cwd=image, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return python, env


def _wait(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    return output


def _buggy(notebook: str) -> str:
    for right, wrong in BUGS.items():
        assert right in notebook
        notebook = notebook.replace(right, wrong)
    data = json.loads(notebook)
    for cell in data["cells"]:
        name = cell.get("id", "").removesuffix("-solution")
        if name in WRONG_ANSWERS and cell["cell_type"] == "code":
            value = WRONG_ANSWERS[name]
            cell["source"] = f"{name} = {'...' if value is ... else repr(value)}\n"
    return json.dumps(data)


def _answers(notebook: str) -> dict:
    """The quiz answers the notebook's answer cells assign, by item id (as otter's tests receive them)."""
    import ast
    found = {}
    for cell in json.loads(notebook)["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        name = cell.get("id", "").removesuffix("-solution")
        if cell["cell_type"] == "code" and cell.get("id", "").endswith("-solution") and source.startswith(f"{name} ="):
            value = source.split("=", 1)[1].split("#")[0].strip()
            found[name] = ... if value == "..." else ast.literal_eval(value)
    return found


def build_autograder(folder: Path) -> dict:
    """In `folder`: the export, `otter assign` (dist/), `otter generate` (dist/autograder/autograder.zip)
    and the venv the zip declares (declared/venv). Built once per test run for this file and
    test_platform_table.py (the `otter_autograder` fixture); tests use a copy (`autograder_copy`)."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "export", "otter", "--out", str(folder / "export")])
    assert result.exit_code == 0, result.output
    assign = _wait(_otter("assign", "-v", exporter.NOTEBOOK_NAME, str(folder / "dist"), cwd=folder / "export"))
    assert "All autograder tests passed" in assign
    autograder = folder / "dist" / "autograder"
    # the config's autograder_files, copied by otter assign (beside the student wheel, +student)
    wheel, = (w for w in autograder.glob("mha_exercises-*.whl") if "+student" not in w.name)
    _wait(_otter("generate", "-o", "autograder.zip", wheel.name, cwd=autograder))
    (folder / "declared").mkdir()
    declared_environment(autograder / "autograder.zip", folder / "declared")
    return {}


def autograder_copy(shared: Path, tmp: Path) -> tuple[Path, dict]:
    """A private copy in `tmp` of the shared dist/ and declared venv: (the venv's python, its env)."""
    copy_of(shared / "dist", tmp / "dist")
    python = copy_of(shared / "declared" / "venv", tmp / "venv") / "bin" / "python"
    env = clean_env(tmp)
    env["PATH"] = f"{python.parent}:{env['PATH']}"  # a kernel started by name is this venv's python
    return python, env


@pytest.fixture(scope="module")
def otter_run(tmp_path_factory, otter_autograder):
    """`otter run` on a correct and a buggy notebook (after export, `otter assign` and `otter
    generate`), in a venv built from the autograder zip's declared requirements (no MHA_COURSE,
    no checkout); `otter check` on both with only the student wheel."""
    tmp = tmp_path_factory.mktemp("otter")
    python, env = autograder_copy(otter_autograder, tmp)
    autograder = tmp / "dist" / "autograder"
    solved = (autograder / exporter.NOTEBOOK_NAME).read_text()
    student_python, student_env = student_environment(tmp / "dist" / "student", tmp / "student-env")
    checks = {}
    for name, text in (("correct", solved), ("buggy", _buggy(solved))):
        folder = tmp / f"student-{name}"
        shutil.copytree(tmp / "dist" / "student" / "tests", folder / "tests")
        (folder / exporter.NOTEBOOK_NAME).write_text(text)
        checks[name] = _otter("check", exporter.NOTEBOOK_NAME, "-t", "tests", cwd=folder, python=student_python,
                              env=student_env)
    runs = {}
    for name, text in (("correct", solved), ("buggy", _buggy(solved))):
        folder = tmp / name
        (folder / "out").mkdir(parents=True)
        (folder / exporter.NOTEBOOK_NAME).write_text(text)
        (folder / "answers.json").write_text(json.dumps({k: None if v is ... else v for k, v in _answers(text).items()}))
        runs[name] = (folder, _otter("run", "-a", str(autograder / "autograder.zip"), "-o", "out",
                                     exporter.NOTEBOOK_NAME, cwd=folder, python=python, env=env))
    for _folder, process in runs.values():
        _wait(process)
    student_checks = {name: process.communicate(timeout=300)[0] for name, process in checks.items()}
    return {name: folder for name, (folder, _) in runs.items()}, tmp, student_checks


def student_environment(student: Path, tmp: Path) -> tuple[Path, dict]:
    """A fresh venv with what otter assign gives students: the student wheel beside the notebook
    (otter-grader and third-party packages linked from this environment, never this grader)."""
    wheel, = student.glob("mha_exercises-*+student-py3-none-any.whl")
    assert [w.name for w in student.glob("*.whl")] == [wheel.name]  # the full grader stays with the autograder
    python = fresh_venv(tmp / "venv", link_farm(tmp / "shared", names=None))
    env = clean_env(tmp)
    env["PATH"] = f"{python.parent}:{env['PATH']}"
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", str(wheel)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return python, env


def _otter_scores(folder: Path) -> dict[str, float]:
    tests = json.loads((folder / "out" / "results.json").read_text())["tests"]
    return {t["name"]: t["score"] for t in tests if "score" in t}


def _mha_scores(cli, notebook: Path, problem_ids) -> dict[str, float]:
    args = [arg for pid in problem_ids for arg in ("--problem", pid)]
    result = cli("grade", str(notebook), "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return {p["id"]: p["score"] for p in json.loads(result.stdout)["problems"]}


class TestOtterRun:
    @pytest.mark.slow
    @pytest.mark.parametrize("submission", ["correct", "buggy"])
    def test_per_problem_scores_equal_mha_grade(self, otter_run, cli, course, submission):
        """otter's score for every problem is mha grade's score for the same notebook."""
        folders, _, _ = otter_run
        ids = [p.id for p in course.problems]
        items = exporter.quiz_items(course)
        otter_scores = _otter_scores(folders[submission])
        mha_scores = _mha_scores(cli, folders[submission] / exporter.NOTEBOOK_NAME, ids)
        assert sorted(otter_scores) == sorted(ids + [i.id for i in items])  # written items: not in otter
        assert {i: otter_scores[i] for i in ids} == pytest.approx(mha_scores, abs=1e-4)  # mha rounds to 4 decimals
        answers = json.loads((folders[submission] / "answers.json").read_text())
        quiz = {i.id: grade_item(draw(i, DEFAULT_SEED), answers.get(i.id), None, include_hidden=True).score
                for i in items}
        assert {i.id: otter_scores[i.id] for i in items} == pytest.approx(quiz, abs=1e-4)
        if submission == "correct":
            assert quiz == {i.id: i.points for i in items}
        else:
            assert quiz["two_relations"] == quiz["attention_budget"] == quiz["precise_claim"] == 0
            assert 0 < quiz["model_claims"] < course.quiz.item("model_claims").points
        if submission == "correct":
            assert mha_scores == {p.id: p.points for p in course.problems}
        else:
            wrong = {pid for pid in ids if mha_scores[pid] < course.problem(pid).points}
            assert {"softmax", "parameter_count", "multi_head_attention"} <= wrong
            assert sum(mha_scores.values()) > 0

    @pytest.mark.slow
    def test_hidden_cases_are_hidden_in_the_student_tests(self, otter_run, course):
        """otter assign keeps hidden cases out of the student's copy of the tests."""
        _, tmp, _ = otter_run
        source = (tmp / "dist" / "student" / "tests" / "softmax.py").read_text()
        public = [c.name for c in course.problem("softmax").cases if not c.hidden]
        assert source.count("@test_case(") == len(public)
        assert "hidden=True" not in source


class TestStudentChecks:
    @pytest.mark.slow
    def test_students_check_on_precomputed_public_cases(self, otter_run, course):
        """`otter check` with only the student wheel: a correct notebook passes every public test,
        a buggy one fails softmax's; that wheel has no reference, no loader and no hidden case."""
        _, tmp, checks = otter_run
        assert "All tests passed!" in checks["correct"], checks["correct"][-3000:]
        assert "softmax results:" in checks["buggy"] and "All tests passed!" not in checks["buggy"]
        python = tmp / "student-env" / "venv" / "bin" / "python"
        probe = subprocess.run([str(python), "-c", "import importlib.util as u, grader, pathlib; "
                                "print([m for m in ('grader.course.code', 'grader._course', "
                                "'grader.course.loader', 'grader.course.quiz') if u.find_spec(m)]); "
                                "print(pathlib.Path(grader.__file__).parent)"],
                               capture_output=True, text=True, timeout=60, cwd=tmp)
        found, location = probe.stdout.splitlines()
        assert found == "[]" and "student-env/venv" in location
        seed_cases = json.loads((Path(location) / "_seed_cases" / "default.json").read_text())
        hidden = sum(c.hidden for p in course.problems for c in p.cases)
        assert hidden and all(c["visibility"] == "public" for p in seed_cases["problems"] for c in p["cases"])


class TestModels:
    def test_the_export_ships_the_models_to_students(self, course, tmp_path):
        """OUT/models holds the .npz files (no index.json), and the config gives them to students with the notebook."""
        import yaml

        from .conftest import SOLUTIONS
        exporter.write(tmp_path, course, SOLUTIONS / "attention.py")
        assert_models_shipped(tmp_path)
        notebook = json.loads((tmp_path / exporter.NOTEBOOK_NAME).read_text())
        config = yaml.safe_load("".join(notebook["cells"][0]["source"]).removeprefix("# ASSIGNMENT CONFIG\n"))
        assert exporter.MODELS in config["files"] and exporter.MODELS not in config.get("autograder_files", [])

    @pytest.mark.slow
    def test_students_load_the_models_with_the_student_wheel(self, otter_run):
        """What `otter assign` gives students holds models/; with only the student wheel installed (no course in
        it), `load_model` run in that folder finds them there."""
        _, tmp, _ = otter_run
        student = tmp / "dist" / "student"
        assert_models_shipped(student)
        package, models, shape = load_in(student, tmp / "student-env" / "venv" / "bin" / "python")
        assert "student-env/venv" in str(package)
        assert models == student / "models" and shape == "2 8"


class TestTestFiles:
    def test_one_case_per_test_with_visibility_and_points(self, course):
        """Each case is a test_case with its hidden flag; the points add up to the problem's."""
        from otter.test_files import ExceptionTestFile
        for problem in course.problems:
            parsed = ExceptionTestFile.from_string(exporter.test_file(problem), path=f"{problem.id}.py")
            assert [tc.hidden for tc in parsed.test_cases] == [c.hidden for c in problem.cases]
            assert sum(tc.points for tc in parsed.test_cases) == pytest.approx(problem.points)
            assert parsed.name == problem.id

    def test_write_is_deterministic(self, course, tmp_path):
        """Exporting twice gives byte-identical files."""
        from .conftest import SOLUTIONS
        first = exporter.write(tmp_path / "a", course, SOLUTIONS / "attention.py")
        second = exporter.write(tmp_path / "b", course, SOLUTIONS / "attention.py")
        assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


class TestCheckAnswer:
    def test_multiple_answers_pass_up_to_the_credit_earned(self):
        """A multiple-answers item is n tests; an answer with credit k/n passes exactly the first k."""
        item = next(i for i in exporter.quiz_items(load_course(EXERCISES)) if i.id == "model_claims")
        v = draw(item, DEFAULT_SEED)
        right = list(v.correct_letters)
        wrong = next(c.letter for c in v.choices if not c.correct)
        n = len(right)
        passed = []
        for part in range(1, n + 1):
            try:
                check_answer("model_claims", right[:-1] + [wrong], part, n, course_dir=EXERCISES)
                passed.append(part)
            except AssertionError:
                pass
        credit = grade_item(v, right[:-1] + [wrong], None, include_hidden=True).fraction
        assert passed == list(range(1, round(credit * n) + 1)) and len(passed) == n - 2

    def test_public_failure_names_the_mistake_hidden_says_only_wrong(self):
        """A wrong public choice shows its misconception; a hidden item's failure gives nothing away."""
        with pytest.raises(AssertionError, match=r"precise_claim: you chose b\nlikely mistake \(heads_are_rules\)"):
            check_answer("precise_claim", "b", course_dir=EXERCISES)
        with pytest.raises(AssertionError) as caught:
            check_answer("two_relations", "a", course_dir=EXERCISES)
        assert str(caught.value) == "two_relations: not right (failed)"

    def test_written_items_are_manual_questions(self, course, tmp_path):
        """Written items are graded by hand: no otter test file, a manual question in the notebook."""
        from .conftest import SOLUTIONS
        exporter.write(tmp_path, course, SOLUTIONS / "attention.py")
        written = [i.id for i in course.quiz.items if i.manual]
        assert written and not any((tmp_path / "tests" / f"{i}.py").exists() for i in written)
        cells = {c["id"]: "".join(c["source"]) for c in json.loads((tmp_path / exporter.NOTEBOOK_NAME).read_text())["cells"]}
        assert all(cells[f"{i}-begin"] == f"# BEGIN QUESTION\nname: {i}\npoints: 2\nmanual: true" for i in written)


class TestCheckCase:
    def test_missing_function_fails_with_the_grader_message(self):
        """A name the notebook never defined arrives as None: the case fails, saying so."""
        with pytest.raises(AssertionError, match="defines no function softmax"):
            check_case("softmax", "worked example", None, course_dir=EXERCISES)

    def test_hidden_case_failure_shows_no_expected_values(self):
        """A wrong answer on a hidden case says only the kind of failure."""
        import numpy as np
        with pytest.raises(AssertionError) as caught:
            check_case("softmax", "one long row", lambda s: np.zeros_like(s), course_dir=EXERCISES)
        assert "[hidden] one long row" in str(caught.value) and "expected" not in str(caught.value)

    def test_plain_reads_values_like_the_sandbox(self):
        """numpy scalars become Python numbers, subclasses plain arrays, objects opaque."""
        import numpy as np

        from grader.sandbox.codec import Opaque
        assert plain((np.int64(3), [np.float32(0.5)], {"a": None})) == (3, [0.5], {"a": None})
        assert type(plain(np.ma.masked_array([1.0]))) is np.ndarray
        assert plain(object()) == Opaque("object")


def test_requirements_install_from_the_export_folder(cli, tmp_path):
    """`pip install -r requirements.txt`, run from another folder with no package index: the grader
    comes from the wheel beside the file, the pinned dependencies from a folder of their wheels."""
    from grader.exports import wheelhouse
    out = tmp_path / "export"
    result = cli("export", "otter", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    deps = tmp_path / "deps"
    deps.mkdir()
    for name, data in wheelhouse.download(wheelhouse.running_python()).items():
        (deps / name).write_bytes(data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
                           "--find-links", str(deps), "--report", str(report), "-r", str(out / "requirements.txt")],
                          cwd=elsewhere, env=clean_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    installs = {i["metadata"]["name"].lower(): i["download_info"]["url"] for i in json.loads(report.read_text())["install"]}
    assert installs["mha-exercises"].startswith("file://") and str(out) in installs["mha-exercises"]
    assert {"numpy", "pyyaml", "click"} <= set(installs)
