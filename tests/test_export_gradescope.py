"""The Gradescope zip, unpacked into an /autograder-like folder: setup.sh builds the image with the
network off, and run_autograder grades through it."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.course.quiz import answer_key, answers_template, draw
from grader.course.seeds import student_seed
from grader.exports import wheelhouse
from grader.exports.gradescope import build as build_zip

from ._install import clean_env
from .conftest import EXERCISES, SOLUTIONS, mha_command


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


SECRET = "gradescope-course-secret"
STUB = '    raise NotImplementedError("not done")\n'
DONE = ("softmax", "attention_reading", "count_routing_distributions", "split_heads", "merge_heads")


PYTHON = wheelhouse.running_python()
_WHEELS: dict[str, bytes] = {}


def wheels() -> dict[str, bytes]:
    """The dependency wheels for this Python, downloaded once per test run (pip's cache serves it)."""
    if not _WHEELS:
        _WHEELS.update(wheelhouse.download(PYTHON))
    return _WHEELS


def build(course, secret: str | None, python: str = PYTHON) -> bytes:
    return build_zip(course, secret, wheels(), python)


def autograder(tmp_path: Path, course, secret: str | None, python: str = PYTHON) -> Path:
    """Lay out $AUTOGRADER_ROOT with the zip unpacked into source/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(io.BytesIO(build(course, secret, python))) as archive:
        archive.extractall(root / "source")
        names = archive.namelist()
    assert {"setup.sh", "run_autograder", "exercises/assignment.yaml", "wheels/mha_exercises-0.1.0-py3-none-any.whl"} \
        <= set(names)
    assert {n.split("/")[1].split("-")[0] for n in names if n.startswith("wheels/")} == \
        {"mha_exercises", "numpy", "pyyaml", "click", "pip"}
    assert not any(n.startswith(("solutions/", "grader/")) for n in names)
    (root / "submission").mkdir()
    return root


def setup_offline(root: Path, **env: str) -> subprocess.CompletedProcess:
    """Run setup.sh as Gradescope does when it builds the image, in a network namespace with no
    network at all (so pip can reach no index), with this Python as the image's python3."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode:
        pytest.skip("cannot make a network namespace here (unshare --net needs root or user namespaces)")
    environment = clean_env(root.parent, **{"AUTOGRADER_ROOT": str(root), "MHA_PYTHON": sys.executable, **env})
    return subprocess.run(["unshare", "--net", "bash", str(root / "source" / "setup.sh")], env=environment,
                          capture_output=True, text=True, timeout=600)


def run_autograder(root: Path, files: dict[str, str], sid: str = "s1", image: bool = False) -> dict:
    """Grade `files` with run_autograder: with the image's own mha when `image`, else this checkout's."""
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    (root / "submission_metadata.json").write_text(json.dumps(
        {"id": 7, "created_at": "2026-11-30T10:00:00", "assignment": {"total_points": 142},
         "users": [{"email": f"{sid}@example.edu", "name": "Student", "sid": sid}], "previous_submissions": []}))
    env = {**os.environ, "AUTOGRADER_ROOT": str(root)}
    if not image:
        env["MHA_BIN"] = mha_command()
    env.pop("MHA_COURSE_SECRET", None)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def half_done() -> str:
    """The model answers with every function outside DONE turned back into a stub."""
    lines, out, skipping = (SOLUTIONS / "attention.py").read_text().splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith("def "):
            name = line[4:line.index("(")]
            skipping = name not in DONE
            out.append(line)
            if skipping:
                out.append(STUB)
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            if not line.strip():
                out.append(line)
            continue
        skipping = False
        out.append(line)
    return "".join(out)


class TestOfflineImage:
    @pytest.mark.slow  # setup.sh installs the wheels into a fresh venv
    def test_setup_builds_the_image_offline_and_grades_a_solution(self, tmp_path, course):
        """setup.sh, with no network, installs everything from the zip's wheels and compiles the
        assignment; run_autograder then gives a solution full marks with the image's own mha."""
        root = autograder(tmp_path, course, secret=None)
        done = setup_offline(root)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"prepared {len(course.problems)} problem(s)" in done.stdout
        assert (root / "venv" / "bin" / "mha").is_file()
        assert os.stat(root / "source").st_mode & 0o077 == 0  # the source is root-only afterwards
        files = {"attention.py": (SOLUTIONS / "attention.py").read_text(),
                 "answers.yaml": (SOLUTIONS / "answers.yaml").read_text()}
        result = run_autograder(root, files, image=True)
        assert result["score"] == course.max_score > 0

    def test_another_python_is_a_clear_error(self, tmp_path, course):
        """Wheels for another Python version: setup.sh stops at once and says how to export again."""
        other = "3.10" if PYTHON != "3.10" else "3.12"
        root = autograder(tmp_path, course, secret=None, python=other)
        done = setup_offline(root)
        assert done.returncode == 1
        assert f"the wheels in this autograder are for Python {other} on x86_64, but this image has {PYTHON}" \
            in done.stderr
        assert f"mha export gradescope --python {PYTHON} --out autograder.zip" in done.stderr
        assert not (root / "venv").exists()

    def test_setup_honours_autograder_root_and_needs_no_index(self, tmp_path, course):
        """setup.sh names no /autograder path of its own, upgrades nothing, and installs --no-index."""
        root = autograder(tmp_path, course, secret=None)
        setup = (root / "source" / "setup.sh").read_text()
        assert 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in setup
        assert setup.count("/autograder") == 1
        assert "--upgrade" not in setup and "--no-index --find-links" in setup
        assert "numpy==" in setup and "mha-exercises==0.1.0" in setup


class TestGradescopeZip:
    def test_solutions_stubs_and_half_done(self, tmp_path, course):
        """Full marks for the solutions, 0 for the stubs, exactly the finished problems for a half-done one."""
        root = autograder(tmp_path, course, secret=None)
        answers = (SOLUTIONS / "answers.yaml").read_text()
        full = run_autograder(root, {"attention.py": (SOLUTIONS / "attention.py").read_text(), "answers.yaml": answers})
        assert full["score"] == course.max_score
        assert all(t.get("status", "passed") == "passed" for t in full["tests"])  # written: no status, pending
        stubs = run_autograder(root, {"attention.py": (EXERCISES / "attention.py").read_text(),
                                      "answers.yaml": (EXERCISES / "answers.yaml").read_text()})
        assert stubs["score"] == 0
        half = run_autograder(root, {"attention.py": half_done(), "answers.yaml": answers})
        by_problem: dict[str, float] = {}
        for test in half["tests"]:  # a problem's public test and its hidden cases' test
            name = test["name"].split(":")[0]
            by_problem[name] = by_problem.get(name, 0) + test.get("score", 0)  # written: no score, pending
        deserved = sum(p.points for p in course.problems if p.id in DONE) + course.quiz.max_score
        assert half["score"] == pytest.approx(deserved)
        assert all(by_problem[p.id] == pytest.approx(p.points if p.id in DONE else 0) for p in course.problems)

    def test_missing_file_gives_a_visible_message(self, tmp_path, course):
        """An upload without attention.py scores 0 with a visible explanation, not a crash."""
        root = autograder(tmp_path, course, secret=None)
        data = run_autograder(root, {"notes.txt": "oops"})
        assert data["score"] == 0
        assert data["tests"][0]["name"] == "submission not gradable"
        assert "no attention.py" in data["tests"][0]["output"]

    def test_each_student_is_graded_on_their_seed(self, tmp_path, course):
        """With the secret in the zip, the email in submission_metadata.json (the default seed_key) picks the
        quiz numbers."""
        root = autograder(tmp_path, course, secret=SECRET)
        key = answers_template(course.quiz, answer_key(course.quiz, student_seed(SECRET, "s42@example.edu")))
        files = {"attention.py": (SOLUTIONS / "attention.py").read_text(), "answers.yaml": key}
        own = run_autograder(root, files, sid="s42")
        assert own["score"] == course.max_score
        other = run_autograder(root, files, sid="s43")
        assert other["score"] < course.max_score

    def test_zip_is_deterministic(self, course):
        """Two exports of the same course are byte-identical."""
        assert build(course, SECRET) == build(course, SECRET)


def test_cli_refuses_a_python_that_is_not_a_version(cli, tmp_path):
    """`--python three`: a usage error naming the expected form, and no zip."""
    result = cli("export", "gradescope", "--out", str(tmp_path / "a.zip"), "--python", "three")
    assert result.exit_code == 2
    assert "--python must be a version like 3.11 (got 'three')" in result.stderr
    assert not (tmp_path / "a.zip").exists()


def _hidden_ids(course) -> tuple[set[str], set[str]]:
    """(hidden quiz item ids, names of every hidden case)."""
    items = {i.id for i in course.quiz.items if i.hidden}
    cases = {c.name for p in course.problems for c in p.cases if c.hidden}
    return items, cases


class TestHiddenItems:
    @pytest.mark.parametrize("visibility", ["after_due_date", "hidden"])
    def test_hidden_cases_and_items_carry_no_visible_feedback(self, tmp_path, course, visibility):
        """Hidden quiz items and each problem's hidden cases are tests of their own with the chosen
        visibility; no visible test or summary shows their score, their feedback or their mistakes,
        and the top-level score still counts them."""
        root = tmp_path / "autograder"
        with zipfile.ZipFile(io.BytesIO(build_zip(course, None, wheels(), PYTHON, hidden=visibility))) as archive:
            archive.extractall(root / "source")
        (root / "submission").mkdir()
        wrong = "\n".join(f"{i.id}: {'a' if i.kind.value != 'numeric' else 12345}" for i in course.quiz.items)
        result = run_autograder(root, {"attention.py": half_done(), "answers.yaml": wrong + "\n"})
        items, cases = _hidden_ids(course)
        assert items and cases
        concealed = [t for t in result["tests"] if t["visibility"] == visibility]
        shown = [t for t in result["tests"] if t["visibility"] == "visible"]
        assert {t["name"].split(":")[0] for t in concealed} == items | {p.id for p in course.problems}
        assert all(t["name"].split(":")[0] not in items for t in shown)
        visible_text = result["output"] + "".join(t["output"] + " ".join(t["tags"]) for t in shown)
        assert not any(name in visible_text for name in cases)
        feedback = {c.feedback[:60] for i in course.quiz.items if i.hidden for c in draw(i, 0).choices}
        concealed_text = "".join(t["output"] for t in concealed)
        assert any(f in concealed_text for f in feedback)  # the feedback exists, in the concealed tests only
        assert not any(f in visible_text for f in feedback)
        assert "Recorded and graded" in result["output"] and "Score:" not in result["output"]
        assert result["score"] == pytest.approx(sum(t.get("score", 0) for t in result["tests"]), abs=1e-3)

    def test_secret_with_no_student_in_the_metadata_is_a_visible_error(self, tmp_path, course):
        """A course secret and an empty users list: "autograder failed" saying why, never the
        default seed's grade."""
        root = autograder(tmp_path, course, secret=SECRET)
        (root / "submission" / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
        (root / "submission" / "answers.yaml").write_text((SOLUTIONS / "answers.yaml").read_text())
        (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": []}))
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "MHA_BIN": mha_command()}
        env.pop("MHA_COURSE_SECRET", None)
        done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        result = json.loads((root / "results" / "results.json").read_text())
        assert result["score"] == 0
        assert result["tests"][0]["name"] == "autograder failed"
        assert "an empty 'users' list" in result["tests"][0]["output"]


def test_cli_help_says_how_students_are_identified(cli):
    """`mha export gradescope --help`: the email by default, the sid on request, both visibility choices."""
    result = cli("export", "gradescope", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "first user's email in submission_metadata.json" in text and "seed_key: sid" in text
    assert "after_due_date" in text and "never the default seed" in text


def _python310() -> str | None:
    """A CPython 3.10 on this machine, if there is one (the image's python3 in the 3.10 test)."""
    for candidate in ("python3.10", "/usr/bin/python3.10", "/root/.pyenv/versions/3.10.13/bin/python3.10"):
        path = shutil.which(candidate)
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                                   capture_output=True, timeout=60).returncode == 0:
            return path
    return None


class TestOtherPython:
    @pytest.mark.slow  # pip resolves wheels for 3.10, setup.sh installs them
    def test_a_310_export_from_this_install_builds_and_grades(self, tmp_path, course):
        """From this install (numpy newer than any with 3.10 wheels), `--python 3.10` resolves the
        dependencies for 3.10 and says so; with a 3.10 python3 at hand, setup.sh builds the image
        offline with those wheels and run_autograder gives the model answers full marks."""
        if PYTHON == "3.10":
            pytest.skip("this test exports for 3.10 from another Python")
        wheels, notes = wheelhouse.resolve("3.10")
        names = sorted(wheels)
        assert all("cp310" in n or "py3-none-any" in n for n in names)
        numpy = next(n for n in names if n.startswith("numpy-"))
        installed = dict(p.split("==") for p in wheelhouse.pinned())["numpy"]
        if numpy.split("-")[1] != installed:
            assert notes == [f"numpy {installed} has no wheel for Python 3.10: the export carries numpy "
                             f"{numpy.split('-')[1]}, the newest release from 1.23 up with one"]
        root = tmp_path / "autograder"
        with zipfile.ZipFile(io.BytesIO(build_zip(course, None, wheels, "3.10"))) as archive:
            archive.extractall(root / "source")
        (root / "submission").mkdir()
        setup = (root / "source" / "setup.sh").read_text()
        assert f"numpy=={numpy.split('-')[1]}" in setup
        python310 = _python310()
        if python310 is None:
            pytest.skip("no CPython 3.10 here to play the image's python3")
        done = setup_offline(root, MHA_PYTHON=python310)
        assert done.returncode == 0, done.stdout + done.stderr
        files = {"attention.py": (SOLUTIONS / "attention.py").read_text(),
                 "answers.yaml": (SOLUTIONS / "answers.yaml").read_text()}
        result = run_autograder(root, files, image=True)
        assert result["score"] == course.max_score

    def test_no_wheel_for_a_dependency_says_how_to_get_one(self, monkeypatch):
        """When no release of a dependency has a wheel for the target, the error names the
        requirement and the pip download command that fetches it."""
        from grader.errors import InternalError

        def nothing(python, platforms=(), requirements=None, timeout=0):
            raise InternalError("no wheels")
        monkeypatch.setattr(wheelhouse, "download", nothing)
        with pytest.raises(InternalError) as caught:
            wheelhouse.resolve("3.99")
        message = str(caught.value)
        assert "no wheel of numpy>=1.23,<=" in message and "for Python 3.99" in message
        assert "pip download 'numpy>=1.23,<=" in message and "--python-version 3.99" in message


SNOOP = '''
def softmax(scores):
    try:
        with open({path!r}) as handle:
            seen = handle.read()
    except OSError as exc:
        seen = type(exc).__name__
    raise ValueError("metadata: " + seen[:300])
'''


@pytest.mark.root
class TestEarlierResults:
    @pytest.mark.parametrize("namespaces", ["on", "off"])
    def test_student_code_cannot_read_the_submission_metadata(self, course, namespaces):
        """Gradescope's submission_metadata.json, readable by anyone as Gradescope leaves it, holds an earlier
        submission's results with hidden feedback. Student code that opens it (as root with namespaces, and
        with MHA_NAMESPACES=off as Gradescope's container runs it) gets an error, never its text; the
        metadata still gives the seed (the course has a secret: a student's own numbers)."""
        import tempfile
        top = Path(tempfile.mkdtemp(prefix="mha-gs-"))  # not under pytest's 0700 folder: reachable by others
        try:
            top.chmod(0o755)
            root = autograder(top, course, secret=SECRET)
            metadata = root / "submission_metadata.json"
            key = answers_template(course.quiz, answer_key(course.quiz, student_seed(SECRET, "s42@example.edu")))
            files = {"attention.py": SNOOP.format(path=str(metadata)), "answers.yaml": key}
            for name, text in files.items():
                (root / "submission" / name).write_text(text)
            metadata.write_text(json.dumps({
                "id": 8, "users": [{"email": "s42@example.edu", "name": "Student", "sid": "s42"}],
                "previous_submissions": [{"results": {"tests": [{"output": "EARLIER-HIDDEN-FEEDBACK"}]}}]}))
            metadata.chmod(0o644)
            for folder in (root, root / "submission"):
                folder.chmod(0o755)
            env = {**os.environ, "AUTOGRADER_ROOT": str(root), "MHA_BIN": mha_command(),
                   "MHA_NAMESPACES": namespaces}
            env.pop("MHA_COURSE_SECRET", None)
            done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            text = (root / "results" / "results.json").read_text()
            result = json.loads(text)
            assert "EARLIER-HIDDEN-FEEDBACK" not in text
            assert "metadata: PermissionError" in text or "metadata: FileNotFoundError" in text
            assert result["score"] == pytest.approx(course.quiz.max_score)  # the quiz on s42's own numbers
            assert os.stat(metadata).st_mode & 0o077 == 0
        finally:
            shutil.rmtree(top, ignore_errors=True)


def test_mha_grade_keeps_hidden_feedback_until_the_due_date_by_default(cli, tmp_path, course):
    """`mha grade --format gradescope` without --hidden-visibility: as the export, hidden cases and hidden
    quiz items are tests of their own shown after the due date, and no visible test holds them."""
    out = tmp_path / "results.json"
    result = cli("grade", str(SOLUTIONS), "--format", "gradescope", "--output", str(out))
    assert result.exit_code == 0, result.output
    tests = json.loads(out.read_text())["tests"]
    items, cases = _hidden_ids(course)
    concealed = {t["name"].split(":")[0] for t in tests if t["visibility"] == "after_due_date"}
    assert concealed == items | {p.id for p in course.problems}
    shown = "".join(t["output"] for t in tests if t["visibility"] == "visible")
    assert not any(name in shown for name in cases)
