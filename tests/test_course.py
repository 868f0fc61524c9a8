"""A course is a folder: its own code (reference, named mistakes, answer functions) is loaded
by the grader from the course folder, the default course through the same path; every
command refuses a course that `mha validate` rejects; student files are made from the course;
rosters are checked."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import grader
from grader.cli.commands import main
from grader.cli.launch import main as launch_main  # noqa: F401 - the entry point the console script runs
from grader.course.code import read_code
from grader.course.loader import load_course
from grader.course.quiz import draw
from grader.errors import ExitCode, SpecErrors

from ._course import BUGGY, CORRECT, build_course, fill_placeholders, write_submission
from .conftest import EXERCISES, SOLUTIONS, copy_course_code

# the line of the case whose key the tests spoil, read from the shipped file (its prompt may grow)
_WORKED = 1 + (EXERCISES / "problems" / "softmax.yaml").read_text().splitlines().index("  - name: worked example")
BAD_KEY = f"softmax.yaml:{_WORKED}: case 'worked example': 'expect' disagrees with the reference"


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)


@pytest.fixture
def entropy(tmp_path):
    """The entropy course (tests/_course.py) and its quiz answer for the default seed."""
    course_dir = build_course(tmp_path / "entropy")
    answer = draw(load_course(course_dir).quiz.items[0], 0).answer
    return course_dir, answer


class TestCourseCode:
    def test_the_default_course_loads_through_the_course_path(self, course):
        """exercises/assignment.yaml names its code; every problem and quiz item is answered by it."""
        code = EXERCISES / "course.py"
        assert course.code == code
        assert {p.code for p in course.problems} == {code}
        assert {i.code for i in course.quiz.items} == {code}
        declared = read_code(code).functions
        assert {p.function for p in course.problems} == {declared[p.function.name] for p in course.problems}

    def test_the_grader_holds_no_course(self):
        """No table of functions, no reference, no mistakes, no answer functions left in the grader package."""
        package = Path(grader.__file__).parent
        names = {p.name for p in package.rglob("*.py") if "_course" not in p.parts}
        assert not names & {"reference.py", "mistakes.py", "mistakes_flagship.py", "detectors.py", "quiz_answers.py"}
        from grader.course import functions as api, quiz
        assert not hasattr(api, "FUNCTIONS") and not hasattr(quiz, "ANSWER_FUNCTIONS")

    def test_the_course_module_holds_every_name_its_neighbours_export(self):
        """course.py imports each name in its neighbours' `__all__` (a new bug or detector is found by name)."""
        module = read_code(EXERCISES / "course.py").module
        package = module.__name__.rpartition(".")[0]
        neighbours = ("detectors", "mistakes", "mistakes_flagship", "model_problems", "quiz_answers", "reasoning",
                      "reference", "thin_wide")
        missing = [f"{name}.{item}" for name in neighbours for item in sys.modules[f"{package}.{name}"].__all__
                   if getattr(module, item, None) is not getattr(sys.modules[f"{package}.{name}"], item)]
        assert missing == []

    def test_a_course_outside_the_repository_grades_its_own_function(self, entropy, tmp_path):
        """Validated; a correct submission gets full marks, the buggy one fails with its named mistake."""
        course_dir, answer = entropy
        assert run("--course", str(course_dir), "validate").exit_code == 0
        good = write_submission(tmp_path / "good", CORRECT, answer)
        bad = write_submission(tmp_path / "bad", BUGGY, answer)
        graded = run("--course", str(course_dir), "grade", str(good), "--format", "json")
        data = json.loads(graded.stdout)
        assert (graded.exit_code, data["score"], data["max_score"]) == (0, 5, 5)
        graded = run("--course", str(course_dir), "grade", str(bad), "--format", "json")
        data = json.loads(graded.stdout)
        problem, = [p for p in data["problems"] if p["id"] == "attention_entropy"]
        assert data["score"] == 1 and "entropy-in-bits" in {c["mistake"] for c in problem["cases"]}

    def test_the_global_option_works_after_the_subcommand(self, entropy, tmp_path):
        """`mha grade SUB --course DIR` is the same as `mha --course DIR grade SUB`."""
        course_dir, answer = entropy
        good = write_submission(tmp_path / "good", CORRECT, answer)
        graded = run("grade", str(good), "--format", "json", "--course", str(course_dir))
        assert graded.exit_code == 0 and json.loads(graded.stdout)["score"] == 5

    @pytest.mark.parametrize("edit, message", [
        (("bug: entropy_in_bits", "bug: entropy_in_hex"),
         "problems/attention_entropy.yaml:13: unknown mistake bug 'entropy_in_hex' (not a function of entropy_course.py)"),
        (("bug: entropy_in_bits", "bug: entropy_in_bits\n    variant: entropy_in_bits"),
         "problems/attention_entropy.yaml:14: 'variant' is another name for 'bug': give only 'bug'"),
        (("bug: entropy_in_bits", "variant: entropy_in_bits\n    detector: entropy_in_bits"),
         "problems/attention_entropy.yaml:14: a mistake has either 'variant' or 'detector', not both"),
        (("returns: array", "returns: tensor"),
         "problems/attention_entropy.yaml:7: 'function': 'returns' must be one of array, int, shapes, head, "
         "head_pair or a list of two or more names for a tuple of arrays (got 'tensor')"),
        (("params: {weights: array}", "params: {weights: matrix}"),
         "problems/attention_entropy.yaml:6: 'function': parameter 'weights' needs a kind in 'params': array, mask, "
         "int or bool (got 'matrix')"),
        (("signature: attention_entropy(weights) -> ndarray", "signature: attention_entropy(w) -> ndarray"),
         "problems/attention_entropy.yaml:6: 'function': 'params' names 'weights', which is not a parameter of "
         "attention_entropy(w) -> ndarray"),
    ])
    def test_bad_declarations_are_named_with_their_line(self, entropy, edit, message):
        """A wrong mistake name or function declaration is a spec error at its line (exit 3)."""
        course_dir, _ = entropy
        problem = course_dir / "problems" / "attention_entropy.yaml"
        problem.write_text(problem.read_text().replace(*edit))
        result = run("--course", str(course_dir), "validate")
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert f"{course_dir}/{message}" in result.stderr

    def test_variant_is_read_as_bug(self, entropy, tmp_path):
        """A mistake's function under `variant:`, the older name of `bug:`, names the same mistake."""
        course_dir, answer = entropy
        problem = course_dir / "problems" / "attention_entropy.yaml"
        problem.write_text(problem.read_text().replace("    bug: entropy_in_bits", "    variant: entropy_in_bits"))
        mistake, = load_course(course_dir).problem("attention_entropy").mistakes
        assert (mistake.id, mistake.bug, mistake.detector) == ("entropy-in-bits", "entropy_in_bits", False)
        graded = run("--course", str(course_dir), "grade", str(write_submission(tmp_path / "bad", BUGGY, answer)),
                     "--format", "json")
        problem_result, = [p for p in json.loads(graded.stdout)["problems"] if p["id"] == "attention_entropy"]
        assert "entropy-in-bits" in {c["mistake"] for c in problem_result["cases"]}

    def test_a_reference_missing_from_the_code_is_named(self, entropy):
        """A declared function that the course code does not define is refused."""
        course_dir, _ = entropy
        code = course_dir / "entropy_course.py"
        code.write_text(code.read_text().replace("def attention_entropy(", "def attention_entropy_(")
                        .replace("return attention_entropy(", "return attention_entropy_("))
        with pytest.raises(SpecErrors) as info:
            load_course(course_dir)
        assert "'attention_entropy' has no reference: define a function attention_entropy() in entropy_course.py" \
            in str(info.value)

    def test_course_code_that_fails_to_load_is_named_with_its_line(self, entropy):
        """An exception while the course code loads is reported at the code's file and line."""
        course_dir, _ = entropy
        code = course_dir / "entropy_course.py"
        code.write_text(code.read_text() + "\n1 / 0\n")
        with pytest.raises(SpecErrors) as info:
            load_course(course_dir)
        line = len(code.read_text().splitlines())
        assert str(info.value) == (f"{code}:{line}: the course code failed to load: "
                                   "ZeroDivisionError: division by zero")

    def test_quiz_answer_is_a_function_of_the_course_code(self, entropy):
        """An answer naming no function of the course code is refused at its line."""
        course_dir, _ = entropy
        quiz = course_dir / "quiz.yaml"
        quiz.write_text(quiz.read_text().replace("answer: uniform_entropy", "answer: uniform_entropie"))
        with pytest.raises(SpecErrors) as info:
            load_course(course_dir)
        assert f"{quiz}:10: 'answer' must be a number, a parameter (params: T) or an answer function of the course " \
               "code (entropy_course.py) (got 'uniform_entropie')" == str(info.value)


@pytest.fixture(scope="module")
def wrong_key(tmp_path_factory):
    """A copy of the default course whose softmax `expect` disagrees with the reference, and a submission."""
    tmp = tmp_path_factory.mktemp("wrong_key")
    course_dir = tmp / "exercises"
    shutil.copytree(EXERCISES, course_dir, ignore=shutil.ignore_patterns("__pycache__"))
    softmax = course_dir / "problems" / "softmax.yaml"
    text = softmax.read_text()
    assert text.count("expect: [0.09003057, 0.24472847, 0.66524096]") == 2
    softmax.write_text(text.replace("expect: [0.09003057, 0.24472847, 0.66524096]",
                                    "expect: [0.1, 0.2, 0.7]", 1))
    submissions = tmp / "class"
    shutil.copytree(SOLUTIONS, submissions / "ada")
    return course_dir, submissions


class TestWrongKey:
    @pytest.mark.parametrize("command", [
        ["grade", "{sub}/ada"], ["check", "--path", "{sub}/ada/attention.py"], ["grade-all", "{sub}", "--out", "{out}"],
        ["compile"], ["release", "--out", "{out}"], ["list"],
        ["export", "notebook", "--out", "{out}/n.ipynb"], ["export", "otter", "--out", "{out}",
                                                           "--solutions", "{sub}/ada/attention.py"],
        ["export", "github-classroom", "--out", "{out}"], ["export", "gradescope", "--out", "{out}/g.zip"],
        ["export", "qti", "--out", "{out}/q.zip"], ["export", "moodle", "--out", "{out}/m.xml"],
    ], ids=lambda c: " ".join(c[:2]))
    def test_every_command_refuses_a_key_that_disagrees_with_the_reference(self, wrong_key, tmp_path, command):
        """Exit 3 with the file:line of the wrong key; nothing graded or written with it."""
        course_dir, submissions = wrong_key
        out = tmp_path / "out"
        args = [a.format(sub=submissions, out=out) for a in command]
        result = run("--course", str(course_dir), *args, env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == ExitCode.INVALID_SPEC, result.output
        assert f"{course_dir}/problems/{BAD_KEY}" in result.stderr
        assert not out.exists() or not any(out.iterdir())


class TestStudentFiles:
    @pytest.fixture
    def implemented(self, tmp_path):
        """A course whose instructor's attention.py and answers.yaml hold the model answers."""
        course_dir = tmp_path / "exercises"
        shutil.copytree(EXERCISES, course_dir, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(SOLUTIONS / "attention.py", course_dir / "attention.py")
        shutil.copy(SOLUTIONS / "answers.yaml", course_dir / "answers.yaml")
        return course_dir

    def _assert_stubs(self, text: str) -> None:
        import ast
        tree = ast.parse(text)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert len(functions) == len(load_course(EXERCISES).problems)
        for fn in functions:  # a docstring and `raise NotImplementedError(...)`, nothing else
            assert len(fn.body) == 2 and isinstance(fn.body[1], ast.Raise), fn.name
            assert "NotImplementedError" in ast.unparse(fn.body[1])

    def test_release_ships_stubs_and_blank_answers(self, implemented, tmp_path):
        """An implemented exercises/attention.py is never shipped: the bundle has stubs and blank answers."""
        result = run("--course", str(implemented), "release", "--out", str(tmp_path / "rel"),
                     env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 0, result.output
        student = tmp_path / "rel" / "student"
        self._assert_stubs((student / "attention.py").read_text())
        answers = (student / "answers.yaml").read_text()
        assert "distributions_one_head:   # a number" in answers
        assert all(line.split("#")[0].rstrip().endswith(":") for line in answers.splitlines()
                   if line and not line.startswith("#"))
        shipped = {p.name for p in student.rglob("*.py")}
        assert not shipped & {"course_dir.py", "reference.py", "mistakes.py", "detectors.py", "quiz_answers.py",
                              "model_problems.py", "analysis.py", "train.py", "thin_wide.py"}

    def test_github_classroom_and_notebook_ship_stubs(self, implemented, tmp_path):
        """The starter repository and the notebook hold stubs, never the instructor's implementations."""
        result = run("--course", str(implemented), "export", "github-classroom", "--out", str(tmp_path / "gh"),
                     "--install", "mha-exercises")
        assert result.exit_code == 0, result.output
        self._assert_stubs((tmp_path / "gh" / "attention.py").read_text())
        assert "distributions_one_head: 1" not in (tmp_path / "gh" / "answers.yaml").read_text()
        pytest.importorskip("nbformat")
        result = run("--course", str(implemented), "export", "notebook", "--out", str(tmp_path / "n.ipynb"))
        assert result.exit_code == 0, result.output
        cells = json.loads((tmp_path / "n.ipynb").read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "not implemented yet" in code and "np.exp" not in code


class TestRoster:
    @pytest.mark.parametrize("text, message", [
        ("name,mail\nAda,ada@uni.edu\n", "roster.csv:1: the header names no 'email' column (got 'name,mail'): "
                                         "name the column of each student's email, or list one email per line"),
        ("email,name\nada@uni.edu,Ada\n,Bob\n", "roster.csv:3: no email on this line"),
        ("ada@uni.edu\nbob@uni.edu\nada@uni.edu\n", "roster.csv:3: 'ada@uni.edu' is listed twice (line 1)"),
        ("ada@uni.edu\nAda@Uni.edu\n", "roster.csv:2: 'Ada@Uni.edu' and 'ada@uni.edu' become one id (line 1)"),
        ("ada@uni.edu\nbob\n", "roster.csv:2: 'bob' does not look like an email"),
        ("# the class\n\n", "roster.csv: the roster lists no student"),
    ], ids=["header", "empty", "duplicate", "colliding", "not-an-id", "no-one"])
    def test_bad_rosters_are_refused_naming_the_line(self, tmp_path, text, message):
        """Exit 2, the roster's line, and nothing released."""
        roster = tmp_path / "roster.csv"
        roster.write_text(text)
        result = run("--course", str(EXERCISES), "release", "--out", str(tmp_path / "rel"), "--roster",
                     str(roster), env={"MHA_COURSE_SECRET": "s3cret"})
        assert result.exit_code == ExitCode.USAGE
        assert f"{tmp_path}/{message}" in result.stderr
        assert not (tmp_path / "rel").exists()

    def test_an_sid_roster_takes_the_named_column(self, tmp_path):
        """With seed_key sid, the sid column of a Gradescope roster export."""
        from grader.classroom.bundles import read_roster
        roster = tmp_path / "roster.csv"
        roster.write_text("Full Name,Email,SID\nAnn Lee,ann@example.edu,2024001\nBen Ong,ben@example.edu,2024002\n")
        assert read_roster(roster, "sid") == ["2024001", "2024002"]
        assert read_roster(roster, "email") == ["ann@example.edu", "ben@example.edu"]


def test_copy_course_code_copies_no_student_file(tmp_path):
    """The test helper copies the course code, never the student's stubs."""
    copy_course_code(tmp_path)
    assert (tmp_path / "course.py").is_file() and not (tmp_path / "attention.py").exists()


def test_grade_all_refuses_one_students_folder(tmp_path):
    """grade-all given a folder that is itself a submission says so (exit 2) and grades nobody."""
    one = tmp_path / "ada"
    shutil.copytree(SOLUTIONS, one)
    result = run("--course", str(EXERCISES), "grade-all", str(one), "--out", str(tmp_path / "out"))
    assert result.exit_code == ExitCode.USAGE
    assert f"{one} is one student's submission (it holds attention.py): grade it with `mha grade {one}`" \
        in result.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()


class TestGradescopeZip:
    @pytest.mark.slow  # setup.sh installs the wheels into a fresh venv
    def test_the_zip_built_offline_grades_the_course_as_the_cli_does(self, entropy, tmp_path):
        """The entropy course's Gradescope zip carries its code to the autograder (setup.sh builds the image
        with the network off): the correct submission gets 5/5, the buggy one 1/5 with its named mistake."""
        from .test_export_gradescope import autograder, run_autograder, setup_offline
        course_dir, answer = entropy
        root = autograder(tmp_path, load_course(course_dir), secret=None)
        assert (root / "source" / "exercises" / "entropy_course.py").is_file()
        done = setup_offline(root)
        assert done.returncode == 0, done.stdout + done.stderr
        answers = f"uniform_row: {answer}\n"
        good = run_autograder(root, {"attention.py": CORRECT, "answers.yaml": answers}, image=True)
        assert good["score"] == 5
        bad = run_autograder(root, {"attention.py": BUGGY, "answers.yaml": answers}, image=True)
        assert bad["score"] == 1
        assert "entropy-in-bits" in json.dumps(bad["tests"])


class TestInit:
    def test_init_writes_the_starter_files_of_the_course(self, entropy, tmp_path):
        """`mha init DIR` writes stubs and blank answers made from the course; never over a file already there."""
        course_dir, _ = entropy
        folder = tmp_path / "mine"
        result = run("init", str(folder), "--course", str(course_dir))
        assert result.exit_code == 0, result.output
        stubs = (folder / "attention.py").read_text()
        assert "def attention_entropy(weights):" in stubs and "np.log" not in stubs
        assert (folder / "answers.yaml").read_text().splitlines()[-1].split("#")[0].strip() == "uniform_row:"
        again = run("init", str(folder), "--course", str(course_dir))
        assert again.exit_code == ExitCode.USAGE
        assert f"{folder / 'attention.py'} already exists: nothing was written (--force replaces it)" in again.stderr
        graded = run("--course", str(course_dir), "check", "--path", str(folder / "attention.py"))
        assert graded.exit_code == ExitCode.FAILED and "not implemented yet" in graded.stdout


class TestNewProblem:
    def test_a_course_from_nothing_validates_and_grades(self, tmp_path):
        """`mha new problem ID` in an empty folder writes assignment.yaml, the problem with its
        `function:` block, the reference and the stub: refused while they are placeholders, the
        course validates once they are written, and the stub scores 0."""
        course_dir = tmp_path / "mine"
        result = run("--course", str(course_dir), "new", "problem", "row_sums")
        assert result.exit_code == 0, result.output
        assert (course_dir / "problems" / "row_sums.yaml").is_file()
        assert "def row_sums(x):" in (course_dir / "course.py").read_text()
        assert "raise NotImplementedError" in (course_dir / "attention.py").read_text()
        assert "code: course.py" in (course_dir / "assignment.yaml").read_text()
        assert run("--course", str(course_dir), "new", "problem", "second").exit_code == 0
        refused = run("validate", str(course_dir))
        assert refused.exit_code == ExitCode.INVALID_SPEC and len(refused.stderr.splitlines()) == 8  # 4 a problem
        fill_placeholders(course_dir, "row_sums")
        fill_placeholders(course_dir, "second")
        validated = run("validate", str(course_dir))
        assert validated.exit_code == 0 and validated.stdout.startswith("OK: 2 problem(s), 4 cases")
        graded = run("--course", str(course_dir), "grade", str(course_dir / "attention.py"), "--format", "json")
        assert (graded.exit_code, json.loads(graded.stdout)["score"]) == (0, 0)

    @pytest.mark.parametrize("problem_id, message", [
        ("Row", "'Row': a problem id is a Python function name in lower case, like attention_entropy"),
        ("attention_entropy", "problems/attention_entropy.yaml already exists: nothing was written"),
    ])
    def test_refusals(self, entropy, problem_id, message):
        """A bad id, or one the course already has, is refused (exit 2) and nothing changes."""
        course_dir, _ = entropy
        before = (course_dir / "assignment.yaml").read_text()
        result = run("--course", str(course_dir), "new", "problem", problem_id)
        assert result.exit_code == ExitCode.USAGE and message in result.stderr
        assert (course_dir / "assignment.yaml").read_text() == before


def test_a_key_edited_after_validation_is_refused_again(tmp_path):
    """The note that a course passed validation holds for that version of it only: a key edited
    afterwards is refused by the next command."""
    course_dir = tmp_path / "exercises"
    shutil.copytree(EXERCISES, course_dir, ignore=shutil.ignore_patterns("__pycache__"))
    assert run("--course", str(course_dir), "list").exit_code == 0
    softmax = course_dir / "problems" / "softmax.yaml"
    softmax.write_text(softmax.read_text().replace("expect: [0.09003057, 0.24472847, 0.66524096]",
                                                   "expect: [0.1, 0.2, 0.7]", 1))
    result = run("--course", str(course_dir), "grade", str(SOLUTIONS))
    assert result.exit_code == ExitCode.INVALID_SPEC and f"{course_dir}/problems/{BAD_KEY}" in result.stderr


COMPUTED_CASE = """\
  - name: rows the course computes
    visibility: public
    args:
      weights: {course: peaked_rows, with: {T: $T, sharpness: 3}}
"""

COMPUTED_CODE = '''

def peaked_rows(T, sharpness):
    """Rows over T positions, each peaked on its own position (an input the course computes)."""
    scores = sharpness * np.eye(T)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
'''


def _with_computed_case(course_dir: Path, params: str = "  T: {randint: [3, 6], shared: true}\n") -> Path:
    """The entropy course with a case whose input is computed by the course code, its size T a
    per-student param shared with the quiz item."""
    (course_dir / "entropy_course.py").write_text((course_dir / "entropy_course.py").read_text() + COMPUTED_CODE)
    problem = course_dir / "problems" / "attention_entropy.yaml"
    problem.write_text(problem.read_text().replace("cases:\n", f"params:\n{params}cases:\n{COMPUTED_CASE}", 1))
    return problem


class TestComputedInputs:
    def test_a_case_input_computed_by_the_course_code_for_each_student(self, entropy, tmp_path):
        """{course: fn, with: {...}} calls the course's function with the student's numbers: the
        reference grades it, the correct submission gets every point and the buggy one is named."""
        from grader.grading.prepared import prepare
        course_dir, _ = entropy
        _with_computed_case(course_dir)
        course = load_course(course_dir)
        problem = course.problems[0]
        case = next(c for c in problem.cases if c.name == "rows the course computes")
        sizes = {prepare(problem, case, seed).args[0].shape for seed in range(30)}
        assert sizes == {(3, 3), (4, 4), (5, 5), (6, 6)}   # each student's T
        first = prepare(problem, case, 0)
        np.testing.assert_allclose(first.args[0].sum(axis=-1), 1.0)
        right = write_submission(tmp_path / "right", CORRECT, None)
        result = run("--course", str(course_dir), "grade", str(right), "--format", "json")
        assert json.loads(result.stdout)["problems"][0]["score"] == 4
        wrong = write_submission(tmp_path / "wrong", BUGGY, None)
        result = run("--course", str(course_dir), "grade", str(wrong))
        assert "entropy-in-bits" in result.stdout or "log base 2" in result.stdout

    def test_a_shared_param_is_one_number_in_problems_and_quiz(self, entropy):
        """T declared `shared: true` in the problem and the quiz item is the same for each student."""
        from grader.course.generators import draw_params
        course_dir, _ = entropy
        _with_computed_case(course_dir, "  T: {choice: [2, 4, 8], shared: true}\n")
        quiz = course_dir / "quiz.yaml"
        quiz.write_text(quiz.read_text().replace("params: {T: {choice: [2, 4, 8]}}",
                                                 "params: {T: {choice: [2, 4, 8], shared: true}}"))
        course = load_course(course_dir)
        problem, item = course.problems[0], course.quiz.items[0]
        pairs = {(draw_params(problem.params, problem.id, seed)["T"], draw(item, seed).params["T"])
                 for seed in range(40)}
        assert {a for a, _ in pairs} == {2, 4, 8} and all(a == b for a, b in pairs)

    @pytest.mark.parametrize("edit, message", [
        (("peaked_rows, with", "peaked_rowz, with"),
         "argument 'weights': 'course': 'peaked_rowz' is not a function of the course code"),
        (("sharpness: 3", "sharpness: 3 apples"),
         "argument 'weights': 'with.sharpness' must be an int, a \"$var\" product or a plain word "
         "(got '3 apples')"),
        (("with: {T: $T, sharpness: 3}", "with: {T: $U, sharpness: 3}"),
         "argument 'weights': 'with.T' uses undefined variable $U (define it under 'let')"),
        (("T: {randint: [3, 6], shared: true}", "T: {randint: [3, 6], shared: yes please}"),
         "params.T: 'shared' must be true (got 'yes please')"),
    ])
    def test_bad_computed_inputs_are_named_with_their_line(self, entropy, edit, message):
        course_dir, _ = entropy
        problem = _with_computed_case(course_dir)
        problem.write_text(problem.read_text().replace(*edit))
        line = 1 + next(i for i, text in enumerate(problem.read_text().splitlines()) if edit[1] in text)
        result = run("--course", str(course_dir), "validate")
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert f"{problem}:{line}: {message}" in result.stderr

    def test_a_course_function_that_raises_is_the_case_line(self, entropy, tmp_path):
        """A computed input whose function raises is a spec error naming the case (exit 3), not a traceback."""
        course_dir, _ = entropy
        problem = _with_computed_case(course_dir)
        code = course_dir / "entropy_course.py"
        code.write_text(code.read_text().replace("scores = sharpness * np.eye(T)", "raise ValueError('no rows today')"))
        line = 1 + problem.read_text().splitlines().index("  - name: rows the course computes")
        result = run("--course", str(course_dir), "validate")
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert (f"{problem}:{line}: case 'rows the course computes': peaked_rows(T=" in result.stderr
                and "raised ValueError: no rows today" in result.stderr)
        assert "Traceback" not in result.stderr

    def test_a_shared_param_declared_two_ways_is_refused(self, entropy):
        course_dir, _ = entropy
        _with_computed_case(course_dir)
        quiz = course_dir / "quiz.yaml"
        quiz.write_text(quiz.read_text().replace("params: {T: {choice: [2, 4, 8]}}",
                                                 "params: {T: {choice: [2, 4, 8], shared: true}}"))
        result = run("--course", str(course_dir), "validate")
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert (f"{quiz}:3: shared param 'T' is drawn as {{'choice': [2, 4, 8], 'shared': True}} here but as "
                "{'randint': [3, 6], 'shared': True} in attention_entropy.yaml" in result.stderr)
