"""The package as users install it: the sdist and the wheel built from it (`python -m build`, once
for this module), installed into a fresh venv and used from another folder; which course
`mha` uses, by the one precedence README states."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.course.quiz import draw as quiz_draw
from grader.paths import locate_course, packaged_course

from ._course import BUGGY, CORRECT, build_course, write_submission as write_course_submission
from ._install import clean_env, fresh_venv, link_farm
from .conftest import EXERCISES, ROOT, SOLUTIONS

pytestmark = pytest.mark.slow  # builds the sdist and the wheel with `python -m build`, installs them in a venv

SECRET_LINE = "secret: do-not-ship-this-secret\n"
_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv*", "venv", "__pycache__", "*.pyc", ".pytest_cache",
                                      "*.egg-info", "build", "dist", "course.yaml", "*.zip")


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """(sdist, wheel) built by `python -m build` from a copy of this checkout whose exercises/
    holds a course.yaml (which neither may carry); the wheel is built from the sdist."""
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("dists")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=_COPY_IGNORE)
    (source / "exercises" / "course.yaml").write_text(SECRET_LINE)
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp / "dist"), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sdist, = (tmp / "dist").glob("*.tar.gz")
    wheel, = (tmp / "dist").glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory):
    """A fresh venv with the wheel installed by pip (its dependencies shared, see tests/_install.py)."""
    tmp = tmp_path_factory.mktemp("venv")
    python = fresh_venv(tmp / "venv", link_farm(tmp / "shared"))
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(dists[1])],
                          capture_output=True, text=True, timeout=300, env=clean_env(tmp))
    assert done.returncode == 0, done.stderr
    return tmp / "venv" / "bin" / "mha"


def _names_in_sdist(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        return {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}


class TestInstalledWheel:
    def test_grades_the_solutions_from_another_folder(self, installed, tmp_path):
        """Installed from the wheel, `mha grade` in an unrelated folder gives the solutions full marks."""
        elsewhere = tmp_path / "elsewhere" / "deeper"
        elsewhere.mkdir(parents=True)
        shutil.copytree(SOLUTIONS, elsewhere / "mine")
        done = subprocess.run([str(installed), "grade", "mine", "--format", "json"], cwd=elsewhere,
                              capture_output=True, text=True, timeout=300, env=clean_env(tmp_path))
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["score"] == data["max_score"] == load_course(ROOT / "exercises").max_score

    def test_check_reads_attention_py_of_the_working_folder(self, installed, tmp_path):
        """With the packaged course, `mha check` checks ./attention.py (not the packaged stubs)."""
        shutil.copyfile(SOLUTIONS / "attention.py", tmp_path / "attention.py")
        done = subprocess.run([str(installed), "check", "softmax"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, env=clean_env(tmp_path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "PASS  softmax:" in done.stdout

    def test_trained_models_load_from_the_installed_package(self, installed, tmp_path):
        """The wheel carries the trained models and their code: the installed package loads a
        model file without pickle and finds the head roles its index records."""
        script = ("import json; from importlib.resources import files\n"
                  "from grader._course.models import analysis, model\n"
                  "folder = files('grader._course.models')\n"
                  "m = model.load(folder / 'd8_h2_s0.npz')\n"
                  "print(json.dumps([analysis.head_roles(*analysis.head_scores(analysis.attention_maps(m))),\n"
                  "                  model.read_index(folder)['models'][0]['name']]))\n")
        done = subprocess.run([str(installed.parent / "python"), "-c", script], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=clean_env(tmp_path))
        assert done.returncode == 0, done.stderr
        roles = next(e["roles"] for e in json.loads((EXERCISES / "models" / "index.json").read_text())["models"]
                     if e["name"] == "d8_h2_s0")
        assert json.loads(done.stdout) == [roles, "d8_h1_s0"]

    def test_says_it_uses_the_packaged_course(self, installed, tmp_path):
        """`mha list` names the assignment it uses: the one inside the installed package."""
        done = subprocess.run([str(installed), "list"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env=clean_env(tmp_path))
        assert done.returncode == 0, done.stderr
        line = done.stderr.strip().splitlines()[-1]
        assert line.startswith("course: ") and line.endswith(" (packaged)")
        assert "/site-packages/grader/_course" in line
        assert f"total {load_course(ROOT / 'exercises').max_score:g} points" in done.stdout

    def test_missing_course_names_both_ways_to_choose_one(self, installed, tmp_path):
        """MHA_COURSE naming an empty folder: exit 3, and the message says how to choose one."""
        done = subprocess.run([str(installed), "list"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env=clean_env(tmp_path, MHA_COURSE=str(tmp_path)))
        assert done.returncode == 3
        assert f"{tmp_path}/assignment.yaml: assignment file not found (folder chosen by MHA_COURSE)" in done.stderr
        assert "--course DIR" in done.stderr and "MHA_COURSE=DIR" in done.stderr


class TestDistributions:
    def test_sdist_holds_what_its_tests_need(self, dists):
        """Every file of tests/, the solutions, the exercises, LICENSE and the CI script are in the sdist."""
        names = _names_in_sdist(dists[0])
        wanted = {p.relative_to(ROOT).as_posix() for folder in ("tests", "solutions", "exercises", "grader")
                  for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.name != "course.yaml"}
        assert wanted - names == set()
        assert {"LICENSE", "README.md", "CONTRIBUTING.md", "CHANGELOG.md", "pyproject.toml", "MANIFEST.in", ".ci/run",
                "docs/PYPI.md", "docs/security.md"} <= names

    def test_wheel_carries_the_package_and_the_course(self, dists):
        """Every grader module and every assignment file is in the wheel (a subpackage missing
        from pyproject.toml's list fails here), the assignment under grader/_course."""
        with zipfile.ZipFile(dists[1]) as archive:
            names = set(archive.namelist())
        modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "grader").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        course = {"grader/_course/" + p.relative_to(EXERCISES).as_posix() for p in EXERCISES.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and p.name != "course.yaml"}
        assert modules - names == set()
        assert course - names == set()
        assert "grader/_course/problems/softmax.yaml" in names

    def test_no_course_secret_in_either(self, dists):
        """A course.yaml beside the exercises goes into neither the sdist nor the wheel."""
        with zipfile.ZipFile(dists[1]) as archive:
            assert not [n for n in archive.namelist() if n.endswith("course.yaml")]
            assert all(SECRET_LINE.encode() not in archive.read(n) for n in archive.namelist())
        assert not [n for n in _names_in_sdist(dists[0]) if n.endswith("course.yaml")]

    def test_metadata_license_and_classifiers(self, dists):
        """PEP 639 metadata (License-Expression, License-File), classifiers, and LICENSE in the wheel."""
        with zipfile.ZipFile(dists[1]) as archive:
            info = next(n.split("/")[0] for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = archive.read(f"{info}/METADATA").decode()
            license_text = archive.read(f"{info}/licenses/LICENSE").decode()
        assert "License-Expression: MIT" in metadata.splitlines()
        assert "License-File: LICENSE" in metadata.splitlines()
        assert "Classifier: Topic :: Education :: Testing" in metadata.splitlines()
        assert not [line for line in metadata.splitlines() if line.startswith("License: ")]
        assert license_text.startswith("MIT License")
        assert "](docs/" not in metadata  # no relative image or link on the package index page
        assert "Requires-Dist: numpy>=1.23" in metadata.splitlines()
        assert not [line for line in metadata.splitlines()
                    if line.startswith("Requires-Dist:") and "extra ==" not in line
                    and not line.split(":")[1].strip().startswith(("numpy", "pyyaml", "click"))]

    def test_twine_check_passes(self, dists):
        """`twine check` accepts both distributions (metadata and the rendered description)."""
        pytest.importorskip("twine")
        done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("PASSED") == 2


def _grader_files(venv: Path) -> set[str]:
    """The files of the package `grader` installed in `venv` (no bytecode)."""
    site, = venv.glob("lib/python*/site-packages")
    return {p.relative_to(site).as_posix() for p in (site / "grader").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if n.startswith("grader/")}


def _pip(python: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=300,
                          env=clean_env(tmp))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def student_wheel(course, tmp_path_factory) -> Path:
    """The otter export's student wheel, as a file."""
    from grader.exports import wheel
    name, data = wheel.build_student(course)
    path = tmp_path_factory.mktemp("student-wheel") / name
    path.write_bytes(data)
    return path


class TestStudentAndFullInstalls:
    """The student wheel and the full one install the same package `grader`: they are one
    distribution (the student's versioned `<version>+student`), so pip replaces either with the
    other whole and never mixes their files."""

    @pytest.mark.parametrize("order", ["student then full", "full then student"])
    def test_the_second_install_replaces_the_first_whole(self, order, dists, student_wheel, tmp_path):
        """After either order, `grader` holds exactly the files of the wheel installed last, and
        pip lists one mha-exercises, at that wheel's version."""
        full = dists[1]
        first, last = (student_wheel, full) if order == "student then full" else (full, student_wheel)
        python = fresh_venv(tmp_path / "venv", link_farm(tmp_path / "shared"))
        for wheel_file in (first, last):
            _pip(python, tmp_path, "install", "--quiet", "--no-deps", "--no-index", str(wheel_file))
        assert _grader_files(tmp_path / "venv") == _wheel_files(last)
        listed = json.loads(_pip(python, tmp_path, "list", "--format", "json").stdout)
        ours = [(d["name"], d["version"]) for d in listed if "mha" in d["name"].lower()]
        version = last.name.split("-")[1]
        assert ours == [("mha-exercises", version)]
        assert version.endswith("+student") == (last == student_wheel)

    def test_the_two_wheels_differ_in_what_they_hold(self, dists, student_wheel):
        """The check above can fail: the student wheel lacks modules of the full one (the course
        loader) and holds the public seed cases the full one does not."""
        full, student = _wheel_files(dists[1]), _wheel_files(student_wheel)
        assert "grader/course/loader.py" in full - student
        assert "grader/_seed_cases/default.json" in student - full


class TestPrecedence:
    """--course, then MHA_COURSE, then found from the working folder up, then the packaged one."""

    def test_option_wins_over_everything(self, tmp_path):
        """--course is used even when MHA_COURSE is set and an exercises/ is nearby."""
        (tmp_path / "exercises").mkdir()
        (tmp_path / "exercises" / "assignment.yaml").write_text("title: x\n")
        assert locate_course(tmp_path / "mine", {"MHA_COURSE": "/elsewhere"}, tmp_path) == \
            (tmp_path / "mine", "--course")

    def test_environment_before_the_working_folder(self, tmp_path):
        """MHA_COURSE wins over an exercises/ found from the working folder."""
        (tmp_path / "exercises").mkdir()
        (tmp_path / "exercises" / "assignment.yaml").write_text("title: x\n")
        assert locate_course(None, {"MHA_COURSE": "/elsewhere"}, tmp_path) == \
            (Path("/elsewhere"), "MHA_COURSE")

    def test_found_from_the_working_folder_up(self, tmp_path):
        """An exercises/ in an ancestor of the working folder is found."""
        (tmp_path / "exercises").mkdir()
        (tmp_path / "exercises" / "assignment.yaml").write_text("title: x\n")
        deep = tmp_path / "a" / "b"
        deep.mkdir(parents=True)
        assert locate_course(None, {}, deep) == ((tmp_path / "exercises").resolve(), "found from the working folder")

    def test_packaged_last(self, tmp_path):
        """Nothing chosen and nothing found: the packaged course (exercises/ in a checkout)."""
        assert locate_course(None, {}, tmp_path) == (packaged_course(), "packaged")
        assert (packaged_course() / "assignment.yaml").is_file()

    def test_the_word_packaged_names_the_packaged_course(self, tmp_path):
        """`--course packaged` wins over MHA_COURSE and an exercises/ in the working folder; `./packaged` is a folder."""
        (tmp_path / "exercises").mkdir()
        (tmp_path / "exercises" / "assignment.yaml").write_text("title: x\n")
        assert locate_course("packaged", {"MHA_COURSE": "/elsewhere"}, tmp_path) == (packaged_course(), "packaged")
        assert locate_course("./packaged", {}, tmp_path) == (Path("packaged"), "--course")

    def test_cli_takes_course_packaged_in_a_folder_with_another_course(self, tmp_path, monkeypatch):
        """`mha --course packaged list` in a folder holding an exercises/ (a student's) lists the packaged course."""
        from click.testing import CliRunner

        from grader.cli.commands import main
        forged = tmp_path / "exercises"
        forged.mkdir()
        (forged / "assignment.yaml").write_text("title: forged\n")
        monkeypatch.chdir(tmp_path)
        result = CliRunner().invoke(main, ["--course", "packaged", "list"], env={"MHA_COURSE": ""})
        assert result.exit_code == 0, result.output
        assert result.stderr.strip() == f"course: {packaged_course()} (packaged)"
        assert "forged" not in result.stdout

    def test_cli_says_which_course_on_stderr(self, cli):
        """`mha list` prints the chosen folder and the reason on stderr, the listing on stdout."""
        result = cli("list")
        assert result.exit_code == 0
        assert result.stderr.strip() == f"course: {EXERCISES} (--course)"
        assert "assignment:" not in result.stdout


class TestCourseFromNothing:
    def test_the_wheel_grades_a_course_outside_the_repository(self, installed, tmp_path):
        """With the wheel installed in a fresh venv and run from another folder: a course of its own
        (tests/_course.py) validates, a correct submission gets full marks, the buggy one is told its
        named mistake, and its release's student bundle holds the stub and blank answers, no course code."""
        course = build_course(tmp_path / "courses" / "entropy")
        answer = quiz_draw(load_course(course).quiz.items[0], 0).answer
        good = write_course_submission(tmp_path / "class" / "good", CORRECT, answer)
        bad = write_course_submission(tmp_path / "class" / "bad", BUGGY, answer)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()

        def mha(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(installed), *args], cwd=elsewhere, capture_output=True, text=True, timeout=300,
                                  env=clean_env(tmp_path))

        done = mha("validate", str(course))
        assert done.returncode == 0 and done.stdout.startswith("OK: 1 problem(s), 3 cases"), done.stderr
        done = mha("--course", str(course), "grade", str(good), "--format", "json")
        assert done.returncode == 0, done.stderr
        assert (json.loads(done.stdout)["score"], json.loads(done.stdout)["max_score"]) == (5, 5)
        done = mha("grade", str(bad), "--format", "json", "--course", str(course))
        data = json.loads(done.stdout)
        mistakes = {c["mistake"] for p in data["problems"] for c in p["cases"]}
        assert data["score"] == 1 and "entropy-in-bits" in mistakes
        done = mha("--course", str(course), "release", "--out", str(tmp_path / "rel"))
        assert done.returncode == 0, done.stderr
        student = tmp_path / "rel" / "student"
        stubs = (student / "attention.py").read_text()
        assert "def attention_entropy(weights):" in stubs and "raise NotImplementedError(" in stubs
        assert "np.log" not in stubs
        assert (student / "answers.yaml").read_text().splitlines()[-1].split("#")[0].strip() == "uniform_row:"
        files = [p for p in student.rglob("*") if p.is_file()]
        assert "entropy_course.py" not in {p.name for p in files}
        assert not [p for p in files if b"def entropy_in_bits" in p.read_bytes() or b"def uniform_entropy" in p.read_bytes()]
        assert (tmp_path / "rel" / "autograder" / "exercises" / "entropy_course.py").is_file()
