"""What students receive is an allow-list: the student bundle and the otter student wheel hold exactly
STUDENT_MODULES (and the wheel its otter checks), and nothing they hold imports the course's code."""
from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.classroom import bundles as release_module
from grader.classroom.bundles import STUDENT_MODULES, student_package
from grader.cli.commands import main
from grader.errors import InternalError
from grader.exports import wheel
from grader.paths import PACKAGE

from .conftest import EXERCISES, SOLUTIONS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


# Grader modules that load or hold the course's code, its hidden cases or its quiz key.
COURSE_MODULES = frozenset({"grader.course.code", "grader.course.loader", "grader.course.quiz"})
# The course folder's own modules: the reference, the named mistakes, the detectors, the quiz's answers.
COURSE_CODE = frozenset({"course", "reference", "mistakes", "mistakes_flagship", "detectors", "quiz_answers"})
# The autograder's side of shared modules: function-level imports of modules a student never has,
# on paths the student `mha` does not take (it grades from precomputed seed cases). Each is listed
# here on purpose: a new one fails the test until it is looked at.
AUTOGRADER_ONLY = frozenset({
    ("cli/launch.py", "main", "grader.cli.commands"),  # the full `mha`; the bundle's entry point is `student`
    ("grading/otter_checks.py", "_course", "grader.course.loader"),  # a full grader, not the student wheel
    ("grading/otter_checks.py", "drawn_item", "grader.course.quiz"),  # a hidden item: the autograder's full grader
    ("grading/answers.py", "grade_quiz", "grader.course.quiz"),
    ("grading/diagnosis.py", "wrong_answer", "grader.course.code"),
    ("grading/diagnosis.py", "_fit", "grader.course.code"),  # only with course code (problem.code)
    ("grading/diagnosis.py", "_pairs", "grader.course.code"),  # only with course code (problem.code)
    ("grading/cascade.py", "helper_references", "grader.course.code"),  # only with course code (problem.code)
    ("grading/seed_cases.py", "build", "grader.course.quiz"),
    ("grading/seed_cases.py", "build", "grader.course.render"),
    ("grading/seed_cases.py", "_shown_params", "grader.course.generators"),  # called by build only
    ("grading/prepared.py", "build_args", "grader.course.generators"),
    ("grading/prepared.py", "course_fn", "grader.course.code"),  # a case input the course computes
    ("grading/prepared.py", "reference_answer", "grader.course.code"),
    ("grading/prepared.py", "quiz_item", "grader.course.quiz"),
    ("grading/prepared.py", "_from_store", "grader.course.quiz"),  # the prepared-cases store: grade-all's alone
    ("grading/grade.py", "grade", "grader.course.quiz"),
})


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    """The student bundle of `mha release` (no course secret: the default numbers)."""
    out = tmp_path_factory.mktemp("release") / "r"
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "release", "--out", str(out)],
                                env={"MHA_COURSE_SECRET": ""}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out / "student"


@pytest.fixture(scope="module")
def student_wheel(course) -> dict[str, bytes]:
    """The otter export's student wheel, as {path: bytes}."""
    _, data = wheel.build_student(course)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _module(path: str) -> str:
    """'grading/grade.py' -> 'grader.grading.grade'; 'cli/__init__.py' -> 'grader.cli'."""
    parts = ["grader", *Path(path).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: str, source: str) -> list[tuple[str | None, str]]:
    """(enclosing function or None at module level, absolute module name) of every import in
    `source`, the module at `path` inside the grader package; `from X import y` names X and X.y."""
    package = _module(path) if path.endswith("__init__.py") else _module(path).rpartition(".")[0]
    found: list[tuple[str | None, str]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found.extend((function, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - child.level + 1] if child.level else []
                module = ".".join([*base, *([child.module] if child.module else [])])
                found.append((function, module))
                found.extend((function, f"{module}.{alias.name}") for alias in child.names)
            visit(child, inner)

    visit(ast.parse(source, path), None)
    return found


def _shipped_modules(files: dict[str, str]) -> set[str]:
    return {_module(name) for name in files}


def _check_imports(files: dict[str, str]) -> list[str]:
    """What is wrong with the imports of `files` ({path in the package: source}): a course module
    named anywhere (module level or not) outside AUTOGRADER_ONLY, a module-level import of a grader
    module the files do not hold, or an import of the course folder's code."""
    shipped = _shipped_modules(files)
    problems = []
    for path, source in sorted(files.items()):
        for function, name in imports(path, source):
            parts = name.split(".")
            if parts[0] != "grader":
                if parts[0] == "exercises" or COURSE_CODE & set(parts):
                    problems.append(f"{path}: imports the course's code {name}")
                continue
            # `from .x import y` also names x.y, which may be an attribute: the module is the longest shipped prefix
            module = next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in shipped), None)
            if module == name or (module is not None and len(parts) - len(module.split(".")) == 1
                                  and name not in COURSE_MODULES and not _is_module(name)):
                continue
            if (path, function, name) in AUTOGRADER_ONLY:
                continue
            if name in COURSE_MODULES or function is None or _is_module(name):
                problems.append(f"{path}:{function or '<module>'}: imports {name}, which a student never has")
    return problems


def _is_module(name: str) -> bool:
    """Whether `name` is a module of the full grader package."""
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


class TestAllowList:
    def test_the_bundle_holds_exactly_the_listed_modules(self, student):
        """The student bundle's grader package: STUDENT_MODULES, its __main__.py and its seed cases, nothing else."""
        grader = student / "grader"
        files = {p.relative_to(grader).as_posix() for p in grader.rglob("*") if p.is_file()}
        seed_cases = {f for f in files if f.startswith("_seed_cases/")}
        assert seed_cases == {"_seed_cases/default.json", "_seed_cases/index.json"}
        assert files - seed_cases == {*STUDENT_MODULES, "__main__.py"}
        for name in STUDENT_MODULES:
            assert (grader / name).read_bytes() == (PACKAGE / name).read_bytes(), name

    def test_the_student_wheel_holds_the_listed_modules_and_the_otter_checks(self, student_wheel):
        """The otter student wheel: STUDENT_MODULES, the otter checks and the default fixtures under grader/."""
        package = {name.removeprefix("grader/") for name in student_wheel if name.startswith("grader/")}
        assert package == {*STUDENT_MODULES, *wheel.STUDENT_EXTRA, wheel.SEED_CASES}
        assert not any(name.startswith("grader/") for name in student_wheel if "dist-info" in name)

    def test_a_new_module_is_not_shipped(self, tmp_path, monkeypatch):
        """A module added to the package (here grader/course/solutions.py) is left out until it is listed."""
        package = tmp_path / "grader"
        shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "_course"))
        (package / "course" / "solutions.py").write_text("def softmax(x):\n    return x\n")
        monkeypatch.setattr(release_module, "PACKAGE", package)
        files = student_package()
        assert set(files) == set(STUDENT_MODULES) and "course/solutions.py" not in files

    def test_a_listed_module_that_is_missing_is_named(self, tmp_path, monkeypatch):
        """A listed module the installation lacks is an InternalError naming it, not a bundle without it."""
        package = tmp_path / "grader"
        shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "_course"))
        (package / "sandbox" / "jail.py").unlink()
        monkeypatch.setattr(release_module, "PACKAGE", package)
        with pytest.raises(InternalError, match=r"lists grader/sandbox/jail\.py"):
            student_package()

    def test_the_list_names_no_course_or_instructor_module(self):
        """None of the modules that load the course's code, the hidden cases or the quiz key is listed."""
        listed = {_module(name) for name in STUDENT_MODULES}
        assert not listed & (COURSE_MODULES | {"grader.course.render", "grader.cli.commands", "grader.cli.course_source",
                                               "grader.grading.validation", "grader.grading.seed_cache"})
        assert not any(name.startswith(("classroom/", "exports/", "_course")) for name in STUDENT_MODULES)


class TestNothingImportsTheCourse:
    def test_the_import_walk_finds_a_course_import(self):
        """The walk itself: a module-level or lazy import of the course's code is reported."""
        files = {"grading/extra.py": "from ..course.code import course_function\n",
                 "grading/other.py": "def f():\n    from exercises import reference\n    import detectors\n"}
        assert _check_imports(files) == [
            "grading/extra.py:<module>: imports grader.course.code, which a student never has",
            "grading/extra.py:<module>: imports grader.course.code.course_function, which a student never has",
            "grading/other.py: imports the course's code exercises",
            "grading/other.py: imports the course's code exercises.reference",
            "grading/other.py: imports the course's code detectors"]

    def test_no_file_of_the_bundle_imports_the_course(self, student):
        """Every .py file of the student bundle: no import of the course's code, the loader or the quiz key
        (beyond the autograder paths listed in AUTOGRADER_ONLY), no module-level import of an absent module."""
        grader = student / "grader"
        files = {p.relative_to(grader).as_posix(): p.read_text() for p in grader.rglob("*.py")}
        assert len(files) == len(STUDENT_MODULES) + 1
        assert _check_imports(files) == []

    def test_no_file_of_the_student_wheel_imports_the_course(self, student_wheel):
        """The same walk over the otter student wheel's .py files."""
        files = {name.removeprefix("grader/"): data.decode() for name, data in student_wheel.items()
                 if name.startswith("grader/") and name.endswith(".py")}
        assert _check_imports(files) == []

    def test_the_autograder_only_imports_are_still_there(self):
        """Each AUTOGRADER_ONLY entry names an import that exists: the list does not outlive the code."""
        for path, function, name in AUTOGRADER_ONLY:
            assert (function, name) in imports(path, (PACKAGE / path).read_text()), (path, function, name)


def test_the_bundle_checks_stubs_and_solutions_with_only_its_own_modules(student, tmp_path):
    """Run from the bundle's own package (not the full grader): `mha check` grades the stubs (not
    implemented, exit 1) and the solutions (full score, exit 0), and loads no course module."""
    probe = ("import os, sys\n"  # `mha check` ends with os._exit (grader/cli/launch.py): what it loaded is printed then
             "_exit = os._exit\n"
             "os._exit = lambda status: print('LOADED', ' '.join(sorted(m for m in sys.modules if m.startswith('grader'))),"
             " flush=True) or _exit(status)\n"
             "import grader\nprint('PACKAGE', grader.__file__)\nfrom grader.cli.launch import student\nstudent()\n")
    env = {**{k: v for k, v in os.environ.items() if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT")},
           "PYTHONPATH": str(student)}
    runs = {}
    for name, path in (("stubs", student / "attention.py"), ("solutions", SOLUTIONS / "attention.py")):
        runs[name] = subprocess.run([sys.executable, "-c", probe, "check", "--path", str(path)], cwd=tmp_path,
                                    capture_output=True, text=True, env=env)
    assert runs["stubs"].returncode == 1 and "not implemented yet" in runs["stubs"].stdout, runs["stubs"].stderr[-2000:]
    solved = runs["solutions"]
    assert solved.returncode == 0, solved.stdout[-2000:] + solved.stderr[-2000:]
    assert re.search(r"Score: (\d+)/\1 \(100%\)", solved.stdout), solved.stdout[-2000:]
    for run in runs.values():
        loaded = set(run.stdout.rpartition("LOADED ")[2].split())
        assert "grader.cli.student_commands" in loaded and not loaded & (COURSE_MODULES | {"grader.cli.commands"}), loaded
        assert f"PACKAGE {student / 'grader' / '__init__.py'}" in run.stdout


class TestOneCommandLine:
    """The bundle's `mha` is the installed one's student commands over the bundle's seed cases."""

    @staticmethod
    def _run(student: Path | None, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        """`mha ARGS`: the installed one on the course folder, or (`student`) the bundle's own package."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT", "MHA_COURSE", "MHA_EXERCISES", "PYTHONPATH")}
        env.update(NO_COLOR="1", COLUMNS="100")
        if student is not None:
            env["PYTHONPATH"] = str(student)
        course = [] if student is not None else ["--course", str(EXERCISES)]
        return subprocess.run([sys.executable, "-m", "grader", *course, *args], cwd=cwd, capture_output=True,
                              text=True, env=env)

    def test_check_output_is_the_installed_ones_byte_for_byte(self, student, tmp_path):
        """`mha check` on the same submission (solved with the model answers to the quiz; solved
        without answers.yaml; parameter_count without the biases and a wrong softmax, with the
        model answers): the bundle's stdout is the installed `mha`'s, byte for byte, and so is
        its exit code, on every problem without a withheld case. (The wrong softmax is checked alone: in
        a course folder, the functions that call a wrong one are graded again with the reference in
        its place, which the bundle never has.)"""
        folders = {name: tmp_path / name for name in ("solved", "unanswered", "wrong")}
        for name, folder in folders.items():
            folder.mkdir()
            (folder / "attention.py").write_text((SOLUTIONS / "attention.py").read_text() + (
                "\n\ndef parameter_count(d_model, num_heads, bias=True):\n    return 4 * d_model * d_model\n"
                "\n\ndef softmax(scores):\n    x = np.asarray(scores, dtype=np.float64)\n"
                "    e = np.exp(x - x.max(axis=0, keepdims=True))\n    return e / e.sum(axis=0, keepdims=True)\n"
                if name == "wrong" else ""))
            if name != "unanswered":
                shutil.copy(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
        # a problem with a withheld case is said to be graded on submission in the bundle, which holds
        # no expected value the grader never shows (test_no_answers_in_bundle.py): the rest compare
        from grader.course.loader import load_course
        from grader.grading.seed_cases import withheld

        from .conftest import EXERCISES
        course = load_course(EXERCISES)
        shown = [p.id for p in course.problems if not any(withheld(p, c) for c in p.cases if not c.hidden)]
        assert len(shown) >= len(course.problems) - 4
        quiz = [i.id for i in course.quiz.items] if course.quiz else []
        runs = [(folders["solved"], ["check", *shown, *quiz], 0), (folders["unanswered"], ["check", *shown, *quiz], 1),
                (folders["wrong"], ["check", "attention_budget", "softmax", "previous_token_head"], 1),
                (folders["wrong"], ["check", "softmax"], 1)]
        for folder, args, code in runs:
            installed = self._run(None, [*args, "--path", str(folder / "attention.py")], tmp_path)
            bundled = self._run(student, [*args, "--path", str(folder / "attention.py")], tmp_path)
            assert installed.returncode == code, installed.stdout[-2000:] + installed.stderr[-2000:]
            assert re.search(r"^Score: ", installed.stdout, re.M), installed.stdout
            assert (bundled.stdout, bundled.returncode) == (installed.stdout, installed.returncode)
        assert "FAIL  softmax" in installed.stdout and "softmax-wrong-axis" in installed.stdout

    def test_show_list_and_init_are_the_installed_ones(self, student, tmp_path):
        """`mha show` (a problem, a public and a hidden quiz item), `mha list` and the files `mha init`
        writes: the same from the bundle as from the installed `mha`."""
        for args in (["show", "softmax"], ["show", "attention_budget"], ["show", "two_relations"], ["list"]):
            installed, bundled = self._run(None, args, tmp_path), self._run(student, args, tmp_path)
            assert installed.returncode == 0, installed.stderr
            expected = installed.stdout
            if args == ["list"]:   # the bundle ships the core only: it cannot name the optional problems
                expected = expected.split("\noptional, switched off", 1)[0] + "\n"
            assert (bundled.stdout, bundled.returncode) == (expected, 0)
        for who, source in (("installed", None), ("bundled", student)):
            made = self._run(source, ["init", who], tmp_path)
            assert made.returncode == 0, made.stderr
        assert {p.name: p.read_bytes() for p in (tmp_path / "bundled").iterdir()} == \
            {p.name: p.read_bytes() for p in (tmp_path / "installed").iterdir()}

    def test_train_runs_from_the_bundle_and_gives_the_pools_run(self, student, tmp_path):
        """`mha train SEED` from the bundle's own package, in an empty folder, prints what the installed
        one prints, and its last row is the course's record of that seed (models/pool.json)."""
        import json
        pool = {run["seed"]: run for run in json.loads((EXERCISES / "models" / "pool.json").read_text())["runs"]}
        bundled = self._run(student, ["train", "10", "--every", "500"], tmp_path)
        installed = self._run(None, ["train", "10", "--every", "500"], tmp_path)
        assert bundled.returncode == 0, bundled.stderr[-2000:]
        assert (bundled.stdout, bundled.returncode) == (installed.stdout, installed.returncode)
        rows = [line for line in bundled.stdout.splitlines() if line.startswith("step")]
        assert [int(row.split()[1]) for row in rows] == [0, 500, 1000]
        (p1, f1), (p2, f2) = zip(pool[10]["previous"][-1], pool[10]["first"][-1])
        assert rows[-1].endswith(f"head 1: prev {p1:.2f} first {f1:.2f}  head 2: prev {p2:.2f} first {f2:.2f}")

    def test_a_mistyped_id_and_an_empty_folder_say_what_to_do(self, student, tmp_path):
        """The bundle's `mha` says "did you mean" for a mistyped id and `mha init` in an empty folder."""
        typo = self._run(student, ["show", "sofmax"], tmp_path)
        assert (typo.returncode, typo.stderr) == (2, "unknown problem 'sofmax': did you mean 'softmax'? "
                                                     "(`mha list` lists them all)\n")
        empty = self._run(student, ["check"], tmp_path)
        assert empty.returncode == 2 and "run `mha init`" in empty.stderr, empty.stderr
