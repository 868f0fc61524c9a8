"""grader/pytest_plugin.py: a real pytest, run in a folder `mha init` made, collects each public
case and public quiz item as a test and fails each with the words of `mha check`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from grader.course.model import QuizKind
from grader.paths import STUDENT_MARKER
from grader.pytest_plugin import pytest_collect_file

from .conftest import EXERCISES, ROOT, SOLUTIONS, solution_source


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
# a bug written as a student wrote it (tests/test_real_bugs.py): it costs one problem, which names it
BUG, BUG_PROBLEM, BUG_MISTAKE = "bug_contribution_own_slice", "head_contributions", "contribution-own-slice"


def expected_tests(course) -> dict[str, str]:
    """Test name -> the problem or quiz item it checks, counted from the course: every public case
    of each problem, every public quiz item that `mha check` scores."""
    tests = {f"test_{p.id}[{c.name}]": p.id for p in course.problems for c in p.cases if not c.hidden}
    items = course.quiz.items if course.quiz else ()
    tests.update({i.id: i.id for i in items if not i.hidden and i.kind is not QuizKind.WRITTEN})
    return tests


def student_folder(cli, tmp_path: Path, source: str | None = None, answers: bool = False) -> Path:
    """A folder `mha init` made (the stubs), with `source` as attention.py and the model answers'
    answers.yaml when asked; an empty pytest.ini keeps this repository's settings out."""
    folder = tmp_path / "work"
    result = cli("init", str(folder))
    assert result.exit_code == 0, result.output
    (folder / "pytest.ini").write_text("")
    if source is not None:
        (folder / "attention.py").write_text(source)
    if answers:
        shutil.copy(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
    return folder


def run_pytest(folder: Path, *args: str, cache: bool = False,
               course: Path | None = None) -> tuple[subprocess.CompletedProcess, dict[str, str | None]]:
    """pytest run in `folder` as a student runs it (`cache`: with its cache, as `--lf` needs;
    `course`: as MHA_COURSE); (the process, test name -> its failure text or None when it passed),
    read from pytest's JUnit XML."""
    report = folder.parent / "report.xml"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COLUMNS", "LINES")) and k not in ("MHA_COURSE", "MHA_EXERCISES")}
    if course is not None:
        env["MHA_COURSE"] = str(course)
    done = subprocess.run([sys.executable, "-m", "pytest", *([] if cache else ["-p", "no:cacheprovider"]),
                           "--rootdir", str(folder), f"--junitxml={report}", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    tests: dict[str, str | None] = {}
    if report.is_file():
        for case in ET.parse(report).iter("testcase"):
            failure = case.find("failure")
            tests[case.get("name", "")] = None if failure is None else (failure.text or "")
        report.unlink()
    return done, tests


class TestAStudentFolder:
    def test_the_stubs_fail_every_test_saying_not_implemented(self, cli, course, tmp_path):
        """One test per public case and public quiz item, each failing on the starter files: the
        cases as not implemented, the quiz items as not answered."""
        done, tests = run_pytest(student_folder(cli, tmp_path))
        expected = expected_tests(course)
        assert done.returncode == 1, done.stdout + done.stderr
        assert sorted(tests) == sorted(expected)
        problems = [name for name, checked in expected.items() if name.startswith(f"test_{checked}[")]
        assert all(tests[name] is not None and "not implemented" in tests[name] for name in problems)
        assert all(tests[name] is not None and "not answered" in tests[name] for name in set(expected) - set(problems))
        assert f"{len(expected)} failed" in done.stdout

    def test_the_model_answers_pass_every_test(self, cli, course, tmp_path):
        """attention.py and answers.yaml of solutions/: every test passes, exit 0."""
        done, tests = run_pytest(student_folder(cli, tmp_path, solution_source(), answers=True))
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(tests) == sorted(expected_tests(course))
        assert [name for name, failure in tests.items() if failure is not None] == []

    def test_one_bug_fails_its_problem_only_and_names_its_mistake(self, cli, course, tmp_path):
        """A bug in one function fails exactly its problem's tests, each saying the named mistake
        (its id and the problem file's message) as `mha check` does."""
        source = solution_source() + "\n\n" + (SUBMISSIONS / f"{BUG}.py").read_text()
        done, tests = run_pytest(student_folder(cli, tmp_path, source, answers=True))
        expected = expected_tests(course)
        message = next(m.message for m in course.problem(BUG_PROBLEM).mistakes if m.id == BUG_MISTAKE)
        failed = sorted(name for name, failure in tests.items() if failure is not None)
        assert done.returncode == 1
        assert failed == sorted(name for name, checked in expected.items() if checked == BUG_PROBLEM)
        for name in failed:
            assert f"likely mistake ({BUG_MISTAKE}):" in tests[name]
            assert " ".join(message.split()) in " ".join(tests[name].split())
        assert f"likely mistake ({BUG_MISTAKE})" in done.stdout

    def test_k_selects_one_problem(self, cli, course, tmp_path):
        """`-k softmax` runs softmax's tests only (and grades only softmax)."""
        done, tests = run_pytest(student_folder(cli, tmp_path), "-k", "softmax")
        assert sorted(tests) == sorted(name for name, checked in expected_tests(course).items() if checked == "softmax")
        assert all(failure is not None and "not implemented" in failure for failure in tests.values())
        assert done.returncode == 1

    def test_x_stops_at_the_first_failure(self, cli, tmp_path):
        """`-x`: one failure, then pytest stops."""
        done, tests = run_pytest(student_folder(cli, tmp_path), "-x")
        assert done.returncode == 1
        assert [name for name, failure in tests.items() if failure is not None] == list(tests)[:1]
        assert "1 failed" in done.stdout

    def test_lf_reruns_what_failed(self, cli, tmp_path):
        """`--lf` after a run with one bug runs that problem's tests only, which fail again."""
        source = solution_source() + "\n\n" + (SUBMISSIONS / f"{BUG}.py").read_text()
        folder = student_folder(cli, tmp_path, source, answers=True)
        _, first = run_pytest(folder, cache=True)
        done, again = run_pytest(folder, "--lf", cache=True)
        assert sorted(again) == sorted(name for name, failure in first.items() if failure is not None)
        assert again and all(failure is not None for failure in again.values())
        assert done.returncode == 1

    def test_an_import_failure_is_told_by_every_test(self, cli, course, tmp_path):
        """attention.py with a syntax error: every case fails with the line and a caret, as
        `mha check` says it once; the quiz items are graded as usual."""
        source = solution_source() + "\n\ndef broken(:\n    pass\n"
        done, tests = run_pytest(student_folder(cli, tmp_path, source, answers=True))
        line = source.count("\n", 0, source.index("def broken(")) + 1
        cases = [name for name, checked in expected_tests(course).items() if name.startswith(f"test_{checked}[")]
        assert done.returncode == 1
        for name in cases:
            assert f"FAIL  attention.py has a syntax error on line {line}" in tests[name]
            assert f"{line} | def broken(:" in tests[name]
        assert sorted(name for name, failure in tests.items() if failure is None) == sorted(set(tests) - set(cases))

    def test_xdist_runs_the_same_tests(self, cli, course, tmp_path):
        """With pytest-xdist (`-n 2`) every test runs once and the model answers pass."""
        done, tests = run_pytest(student_folder(cli, tmp_path, solution_source(), answers=True), "-n", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(tests) == sorted(expected_tests(course))


    def test_a_course_not_found_is_a_collection_error_saying_so(self, cli, tmp_path):
        """MHA_COURSE naming a folder without assignment.yaml: both files fail to collect, each
        naming the missing file and how the folder was chosen (pytest's exit 2)."""
        done, _ = run_pytest(student_folder(cli, tmp_path), course=tmp_path / "nowhere")
        assert done.returncode == 2
        said = f"{tmp_path / 'nowhere' / 'assignment.yaml'}: assignment file not found (folder chosen by MHA_COURSE)"
        assert done.stdout.count(said) == 2
        assert "ERROR answers.yaml" in done.stdout and "ERROR attention.py" in done.stdout


class TestNowhereElse:
    def test_no_marker_no_tests(self, cli, tmp_path):
        """Without `.mha` beside them, attention.py and answers.yaml are not collected: pytest finds
        no tests (exit 5)."""
        folder = student_folder(cli, tmp_path)
        (folder / STUDENT_MARKER).unlink()
        done, tests = run_pytest(folder)
        assert (done.returncode, tests) == (5, {})

    def test_p_no_mha_turns_it_off(self, cli, tmp_path):
        """`-p no:mha` disables the plugin in a student folder."""
        done, tests = run_pytest(student_folder(cli, tmp_path), "-p", "no:mha")
        assert (done.returncode, tests) == (5, {})

    def test_this_repository_has_no_student_folder(self):
        """The course's own attention.py and answers.yaml are no tests of this suite: no `.mha` in the checkout."""
        assert list(ROOT.glob(f"**/{STUDENT_MARKER}")) == []
        assert pytest_collect_file(EXERCISES / "attention.py", None) is None
