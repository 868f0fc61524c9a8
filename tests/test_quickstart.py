"""README's instructor quick start runs verbatim from an empty folder, and a release never nests or leaves debris."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main

from .conftest import ROOT

COURSE = "my-course"
STUDENTS = ("ann@example.edu", "ben@example.edu")


def quick_start_lines() -> list[str]:
    """The lines of the fenced block under README's "Quick start: an instructor"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start: an instructor", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README's instructor quick start has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def shell_env() -> dict[str, str]:
    """This venv's `mha` first on PATH; no course chosen from outside."""
    env = {k: v for k, v in os.environ.items() if k not in ("MHA_COURSE", "MHA_COURSE_SECRET")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def run_line(line: str, cwd: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run one README line with bash in `cwd`; returns its result and the folder it ends in (a `cd` carries)."""
    where = cwd / ".quickstart-pwd"
    result = subprocess.run(["bash", "-c", f'{line}\nstatus=$?\npwd > "{where}"\nexit $status'], cwd=cwd,
                            env=shell_env(), capture_output=True, text=True, timeout=600)
    ended = Path(where.read_text().strip()) if where.is_file() else cwd
    where.unlink(missing_ok=True)
    return result, ended


def what_the_block_needs(folder: Path) -> None:
    """The roster and the submissions an instructor brings: README's block names them, in the course folder."""
    if (folder / "assignment.yaml").is_file() and not (folder / "roster.csv").exists():
        (folder / "roster.csv").write_text("email\n" + "\n".join(STUDENTS) + "\n")
        for name, body in (("ann", "e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                                   "    return e / e.sum(axis=-1, keepdims=True)"),
                           ("ben", "e = np.exp(scores)\n    return e / e.sum(axis=-1, keepdims=True)")):
            (folder / "submissions" / name).mkdir(parents=True)
            (folder / "submissions" / name / "attention.py").write_text(
                f"import numpy as np\n\n\ndef softmax(scores):\n    scores = np.asarray(scores, dtype=float)\n"
                f"    {body}\n")


def course_files(folder: Path) -> list[Path]:
    """The files of `folder`, but Python's bytecode (__pycache__, which loading the course's code
    writes unless PYTHONDONTWRITEBYTECODE is set, and which a new course's .gitignore lists)."""
    return [p for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.relative_to(folder).parts]


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in course_files(folder)}


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory):
    """README's block run line by line in an empty folder; (the empty folder, [(line, result)])."""
    home = tmp_path_factory.mktemp("empty")
    cwd, results = home, []
    for line in quick_start_lines():
        what_the_block_needs(cwd)
        result, cwd = run_line(line, cwd)
        results.append((line, result))
        if result.returncode != 0:
            break
        if line.startswith("mha release"):  # the same release from the parent, of the course as it is now
            parent, _ = run_line(f"mha --course {COURSE} release --out dist2 --roster {COURSE}/roster.csv", home)
            results.append(("(from the parent) mha --course my-course release --out dist2", parent))
    return home, results


class TestQuickStart:
    def test_every_line_succeeds_in_order(self, quick_start):
        """Each line of README's instructor quick start exits 0, from an empty folder."""
        _, results = quick_start
        assert len(results) == len(quick_start_lines()) + 1
        for line, result in results:
            assert result.returncode == 0, f"{line!r} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"

    def test_the_block_starts_a_course_and_releases_it_inside(self, quick_start):
        """The block makes my-course, releases into my-course/dist and grades into my-course/graded."""
        home, _ = quick_start
        course = home / COURSE
        assert (course / "assignment.yaml").is_file()
        assert {p.name for p in (course / "dist").iterdir()} == {"student", "autograder"}
        assert (course / "graded" / "gradebook.csv").is_file()
        assert "attention_entropy" in (course / "assignment.yaml").read_text()

    def test_release_from_the_parent_is_the_same_and_nothing_nests(self, quick_start):
        """`mha --course my-course release` from the parent gives the same bundles; no bundle holds a dist or the course twice."""
        home, _ = quick_start
        course = home / COURSE
        first = course / "dist"
        second = home / "dist2"
        assert tree(first / "student") == tree(second / "student")
        ours = tree(first / "autograder")
        assert ours.keys() == tree(second / "autograder").keys()
        assert ours == tree(second / "autograder")
        for bundle in (first, second):
            for path in bundle.rglob("*"):
                relative = path.relative_to(bundle)
                assert "dist" not in relative.parts and "dist2" not in relative.parts, relative
                assert COURSE not in relative.parts, relative
                for kept in ("submissions", "graded", "roster.csv"):
                    assert kept not in relative.parts, relative
        assert not [p for p in home.rglob("*") if str(p).count(COURSE) > 1]


def _course(tmp_path: Path) -> Path:
    result = CliRunner().invoke(main, ["new", "course", str(tmp_path / COURSE)])
    assert result.exit_code == 0, result.output
    return tmp_path / COURSE


class TestReleaseFailure:
    def test_a_failed_copy_leaves_nothing_and_says_one_line(self, tmp_path, monkeypatch):
        """A copy failing midway: exit 4, one line naming what failed, no bundle, temporary or parent folder left."""
        course = _course(tmp_path)
        (course / "course.yaml").unlink()
        from grader.classroom import bundles
        real = shutil.copyfile
        calls = []

        def failing(src, dst, *args, **kwargs):
            calls.append(src)
            if len(calls) == 3:
                raise OSError(28, "No space left on device", str(dst))
            return real(src, dst, *args, **kwargs)

        monkeypatch.setattr(bundles.shutil, "copyfile", failing)
        result = CliRunner().invoke(main, ["--course", str(course), "release", "--out", str(tmp_path / "a" / "b" / "out")],
                                    env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 4, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "No space left on device" in result.output and "nothing was written" in result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == [COURSE]

    def test_failure_inside_an_existing_out_leaves_it_as_it_was(self, tmp_path, monkeypatch):
        """--out an existing folder: a failure leaves it holding only what it held."""
        course = _course(tmp_path)
        (course / "course.yaml").unlink()
        out = tmp_path / "out"
        out.mkdir()
        (out / "keep.txt").write_text("mine\n")
        from grader.classroom import bundles
        monkeypatch.setattr(bundles, "_copy_package", lambda target: (_ for _ in ()).throw(
            shutil.Error([("grader/a.py", str(target / "a.py"), "[Errno 36] File name too long")] * 900)))
        result = CliRunner().invoke(main, ["--course", str(course), "release", "--out", str(out)],
                                    env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 4, result.output
        assert result.output.strip().splitlines() == [result.output.strip()]
        assert "File name too long (and 899 more)" in result.output
        assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [COURSE, "out"]

    @pytest.mark.parametrize("out", [".", "problems", "problems/new"])
    def test_an_out_the_copy_reads_is_refused(self, tmp_path, out):
        """--out the course folder, or in a folder it reads from: exit 2, one line saying why, nothing written."""
        course = _course(tmp_path)
        (course / "course.yaml").unlink()
        before = tree(course)
        result = CliRunner().invoke(main, ["--course", str(course), "release", "--out", str(course / out)],
                                    env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "the course" in result.output
        assert tree(course) == before

    def test_a_second_release_inside_the_course_ignores_the_first(self, tmp_path):
        """dist/ inside the course is never read: a release into dist2/ holds no dist/."""
        course = _course(tmp_path)
        (course / "course.yaml").unlink()
        for out in ("dist", "dist2"):
            result = CliRunner().invoke(main, ["--course", str(course), "release", "--out", str(course / out)],
                                        env={"MHA_COURSE_SECRET": ""})
            assert result.exit_code == 0, result.output
        assert not [p for p in (course / "dist2").rglob("*") if p.name == "dist"]
        assert tree(course / "dist" / "autograder") == tree(course / "dist2" / "autograder")


class TestNewCourse:
    def test_new_problem_without_a_course_says_how_to_start_one(self, tmp_path):
        """`mha new problem` in a folder with no course: exit 2, pointing at `mha new course DIR`."""
        env = shell_env()
        result = subprocess.run(["mha", "new", "problem", "attention_entropy"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 2, result.stderr
        assert "no course here: start one with `mha new course DIR`" in result.stderr
        assert list(tmp_path.iterdir()) == []

    def test_new_course_refuses_a_folder_that_holds_anything(self, tmp_path):
        """`mha new course` into a non-empty folder: exit 2, nothing written."""
        (tmp_path / "notes.txt").write_text("mine\n")
        result = CliRunner().invoke(main, ["new", "course", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert "not an empty folder" in result.output
        assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]

    def test_new_course_validates_and_keeps_its_secret_private(self, tmp_path):
        """A new course passes `mha validate`, has no TODO, and its course.yaml is mode 0600."""
        course = _course(tmp_path)
        result = CliRunner().invoke(main, ["--course", str(course), "validate"])
        assert result.exit_code == 0, result.output
        assert "1 problem(s)" in result.output
        assert not [p for p in course_files(course) if "TODO" in p.read_text()]
        assert (course / "course.yaml").stat().st_mode & 0o777 == 0o600


class TestStudentReadme:
    def test_the_readme_names_the_courses_own_problems(self, quick_start):
        """The new course's student README shows its own problem and names no problem of another course."""
        home, _ = quick_start
        readme = (home / COURSE / "dist" / "student" / "README.md").read_text()
        assert "mha show softmax --student YOUR_EMAIL" in readme and "mha show softmax " in readme
        assert "attention_budget" not in readme and "answers.yaml (public cases)" not in readme

    def test_the_examples_follow_the_course(self):
        """Another first problem and a quiz: the README's examples are that problem and a quiz item with numbers."""
        import dataclasses

        from grader.classroom.bundles import student_readme
        from grader.course.loader import load_course

        from .conftest import EXERCISES
        course = load_course(EXERCISES)
        course = dataclasses.replace(course, problems=course.problems[2:])
        readme = student_readme(course, personal=True)
        assert f"mha show {course.problems[0].id} " in readme and "mha show softmax" not in readme
        first_with_numbers = next(i.id for i in course.quiz.items if i.params)
        assert f"mha show {first_with_numbers} --student YOUR_EMAIL" in readme
