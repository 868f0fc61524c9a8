"""A course's manifest: releases and exports copy what the course declares and uses, nothing else lying in its folder."""
from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.cli.new import COURSE_CODE, COURSE_PROBLEM
from grader.course.loader import load_course
from grader.course.manifest import course_files
from grader.exports import wheelhouse

from .conftest import EXERCISES, SOLUTIONS

MARK = "manifest-marker-7f3a9c"  # in every stray file, so a copy of any of them is found by content
SOLVED = (SOLUTIONS / "attention.py").read_text() + f"\n\ndef _helper():\n    return '{MARK}-solved'\n"
STRAY = {"submissions/ann/attention.py": SOLVED, "graded/gradebook.csv": f"student,score\n{MARK}-graded,1\n",
         "dist/autograder/exercises/notes.md": f"{MARK}-dist\n", "attention.py": SOLVED,
         "notes.txt": f"{MARK}-notes\n", "answers.yaml": f"# {MARK}-answers\n",
         "problems/draft.txt": f"{MARK}-draft\n", "models/train_log.txt": f"{MARK}-log\n"}
STRAY_NAMES = {"submissions", "graded", "dist", "notes.txt", "draft.txt", "train_log.txt", "gradebook.csv"}

# What the default course uses: assignment.yaml, its problems and quiz, course.py with every course
# file it imports (models/model.py too, imported by model_problems.py), the models' weights and index.
PYTHON = {"course.py", "detectors.py", "mistakes.py", "mistakes_flagship.py", "model_problems.py",
          "quiz_answers.py", "reasoning.py", "reference.py", "models/__init__.py", "models/model.py",
          "thin_wide.py"}


def default_manifest() -> set[str]:
    problems = {f"problems/{p.name}" for p in (EXERCISES / "problems").glob("*.yaml")}
    models = {f"models/{p.name}" for p in (EXERCISES / "models").iterdir() if p.suffix in (".npz", ".json")}
    return {"assignment.yaml", "quiz.yaml", *PYTHON, *problems, *models}


@pytest.fixture(scope="module")
def cluttered(tmp_path_factory) -> Path:
    """A copy of the default course with submissions, graded reports, an old release, a solved attention.py and notes in it."""
    root = tmp_path_factory.mktemp("cluttered")
    course = root / "course"
    shutil.copytree(EXERCISES, course, ignore=shutil.ignore_patterns("__pycache__", "course.yaml"))
    for name, text in STRAY.items():
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        (course / name).write_text(text)
    return course


def members(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself), with zips and wheels opened, nested ones too."""
    found: dict[str, bytes] = {}

    def add(name: str, data: bytes) -> None:
        found[name] = data
        if data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for member in archive.namelist():
                    add(f"{name}!{member}", archive.read(member))

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        add(str(file), file.read_bytes())
    return found


def assert_nothing_stray(path: Path) -> None:
    files = members(path)
    assert files, f"{path} holds nothing"
    for name, data in files.items():
        parts = set(Path(name.replace("!", "/")).parts)
        assert not parts & STRAY_NAMES, f"{name} is not a file of the course"
        assert MARK.encode() not in data, f"{name} holds a stray file's content"
        assert SOLVED.encode() not in data, f"{name} holds the solved attention.py"


def fake_wheels(monkeypatch) -> None:
    """The dependency wheels, as names only: what the exports pack of the course is what this test reads."""
    wheels = {"pip-24.0-py3-none-any.whl": b"pip", "numpy-2.0.0-cp311-cp311-manylinux2014_x86_64.whl": b"numpy"}
    monkeypatch.setattr(wheelhouse, "resolve", lambda python, *a, **k: (dict(wheels), []))


def mha(course: Path, *args: str):
    result = CliRunner().invoke(main, ["--course", str(course), *args], env={"MHA_COURSE_SECRET": ""})
    assert result.exit_code == 0, result.output
    return result


class TestCourseFiles:
    def test_default_course_lists_exactly_what_it_uses(self):
        """The default course's manifest: its declared files, the Python it imports, the models' data; no stub, no key."""
        listed = {p.as_posix() for p in course_files(load_course(EXERCISES))}
        assert listed == default_manifest()
        assert "attention.py" not in listed and "answers.yaml" not in listed and "models/train.py" not in listed

    def test_clutter_is_never_listed(self, cluttered):
        """Submissions, reports, old releases, a solved attention.py and notes in the folder change nothing."""
        assert {p.as_posix() for p in course_files(load_course(cluttered))} == default_manifest()

    def test_imports_are_followed_without_importing(self, tmp_path):
        """`import x`, `from x import y`, `from .pkg.mod import y` and `from . import x` reach sibling files, recursively."""
        (tmp_path / "problems").mkdir()
        (tmp_path / "problems" / "softmax.yaml").write_text(COURSE_PROBLEM)
        (tmp_path / "assignment.yaml").write_text("title: T\ncode: course.py\nproblems: [softmax]\n")
        (tmp_path / "course.py").write_text("from . import helpers\nfrom .pkg.deep import f\nimport numpy as np\n"
                                            "from .reference import softmax, softmax_without_max\n")
        (tmp_path / "helpers.py").write_text("def g():\n    import plain\n    from other import x\n")
        (tmp_path / "plain.py").write_text("")
        (tmp_path / "other.py").write_text("x = 1\n")
        (tmp_path / "unused.py").write_text("raise SystemExit('never imported')\n")
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "__init__.py").write_text("")
        (tmp_path / "pkg" / "deep.py").write_text("def f():\n    pass\n")
        (tmp_path / "reference.py").write_text(COURSE_CODE)
        listed = {p.as_posix() for p in course_files(load_course(tmp_path))}
        assert listed == {"assignment.yaml", "problems/softmax.yaml", "course.py", "helpers.py", "plain.py",
                          "other.py", "pkg/__init__.py", "pkg/deep.py", "reference.py"}


class TestOutputs:
    def test_release(self, cluttered, tmp_path):
        """`mha release`: neither bundle holds a stray file, by name or by content; the autograder holds the manifest."""
        mha(cluttered, "release", "--out", str(tmp_path / "rel"))
        assert_nothing_stray(tmp_path / "rel")
        shipped = {p.relative_to(tmp_path / "rel" / "autograder" / "exercises").as_posix()
                   for p in (tmp_path / "rel" / "autograder" / "exercises").rglob("*") if p.is_file()}
        assert shipped == default_manifest()

    def test_release_into_dist_inside_the_course(self, cluttered):
        """`mha release --out dist2` inside the course: a dist/ already there is not copied into it."""
        mha(cluttered, "release", "--out", str(cluttered / "dist2"))
        try:
            assert_nothing_stray(cluttered / "dist2")
        finally:
            shutil.rmtree(cluttered / "dist2")

    def test_gradescope(self, cluttered, tmp_path, monkeypatch):
        """The Gradescope zip and the grader wheel in it hold the course's files and no stray one."""
        fake_wheels(monkeypatch)
        mha(cluttered, "export", "gradescope", "--out", str(tmp_path / "autograder.zip"))
        assert_nothing_stray(tmp_path / "autograder.zip")
        files = members(tmp_path / "autograder.zip")
        packaged = {n.split("!grader/_course/")[1] for n in files if "!grader/_course/" in n}
        packaged = {n for n in packaged if "!" not in n}  # the .npz files' own members aside
        assert packaged == default_manifest()

    def test_prairielearn(self, cluttered, tmp_path, monkeypatch):
        """The PrairieLearn course folder holds no stray file; its editors hold stubs, not the solved attention.py."""
        fake_wheels(monkeypatch)
        mha(cluttered, "export", "prairielearn", "--out", str(tmp_path / "pl"))
        assert_nothing_stray(tmp_path / "pl")

    def test_otter(self, cluttered, tmp_path):
        """The otter export (tests, wheels, notebook) holds no stray file."""
        pytest.importorskip("nbformat")
        mha(cluttered, "export", "otter", "--out", str(tmp_path / "otter"), "--solutions",
            str(SOLUTIONS / "attention.py"))
        assert_nothing_stray(tmp_path / "otter")

    def test_github_classroom(self, cluttered, tmp_path):
        """The starter repository, the vendored grader and the private grader wheel hold no stray file."""
        mha(cluttered, "export", "github-classroom", "--out", str(tmp_path / "gh"), "--vendor-grader",
            "--grader-wheel", str(tmp_path / "private"))
        assert_nothing_stray(tmp_path / "gh")
        assert_nothing_stray(tmp_path / "private")

    def test_notebook(self, cluttered, tmp_path):
        """The student notebook and the models beside it hold no stray file."""
        pytest.importorskip("nbformat")
        mha(cluttered, "export", "notebook", "--out", str(tmp_path / "nb" / "attention.ipynb"))
        assert_nothing_stray(tmp_path / "nb")

    @pytest.mark.parametrize("platform,name", [("qti", "quiz.zip"), ("moodle", "quiz.xml")])
    def test_quiz_exports(self, cluttered, tmp_path, platform, name):
        """The quiz exports hold no stray file."""
        mha(cluttered, "export", platform, "--out", str(tmp_path / name))
        assert_nothing_stray(tmp_path / name)

    @pytest.mark.parametrize("command", [["export", "qti", "--out", "problems/quiz.zip"],
                                         ["export", "moodle", "--out", "quiz.yaml"],
                                         ["export", "otter", "--out", "models"],
                                         ["export", "github-classroom", "--out", ".", "--install", "mha-exercises"]])
    def test_an_output_the_export_reads_is_refused(self, cluttered, command):
        """An export into the course folder, a file of the course or a folder it reads: exit 2, one line, nothing written."""
        before = members(cluttered)
        out = command.index("--out") + 1
        command = [*command[:out], str(cluttered / command[out]), *command[out + 1:]]
        result = CliRunner().invoke(main, ["--course", str(cluttered), *command], env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "the course" in result.output
        assert members(cluttered) == before
