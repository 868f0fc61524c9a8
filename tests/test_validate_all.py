"""`mha validate` reports every error of every file and stage in one run, sorted by file and line;
an untouched `mha new problem` scaffold is refused by its placeholders; a scaffold made in a copy
of the default course runs."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.code import course_function
from grader.course.loader import load_problem, read_course
from grader.errors import ExitCode, SpecErrors

from ._course import fill_placeholders, replace_once
from .conftest import EXERCISES

ASSIGNMENT = """\
title: Rows
code: rows.py
colour: blue
quiz: quiz.yaml
problems:
  - row_max
  - row_min
  - row_sum
"""

CODE = '''\
"""The rows course's own code: references and quiz answers."""
import numpy as np


def row_max(x):
    """The largest entry of each row: (..., T) -> (...)."""
    return np.asarray(x, dtype=np.float64).max(axis=-1)


def row_min(x):
    """The smallest entry of each row: (..., T) -> (...)."""
    return np.asarray(x, dtype=np.float64).min(axis=-1)


def row_sum(x):
    """The sum of each row: (..., T) -> (...)."""
    return np.asarray(x, dtype=np.float64).sum(axis=-1)


def row_count(R):
    """The number of rows of an (R, 4) array."""
    return float(R)


def row_count_again(R):
    """Meant as a known-wrong answer, but it equals the answer."""
    return float(R)
'''

PROBLEM = """\
id: {id}
title: The {id} of each row
points: 2
function:
  signature: {id}(x) -> ndarray
  params: {{x: array}}
  returns: array
prompt: Return the {id} of each row of x.
cases:
  - name: worked example
    visibility: public
    args: {{x: [[1.0, 2.0, 3.0]]}}
  - name: random rows
    visibility: hidden
    args:
      x: {{random: normal, shape: [3, 4]}}
"""

QUIZ = """\
title: Rows quiz
items:
  - id: how_many_rows
    title: How many rows
    kind: numeric
    points: 1
    visibility: public
    params: {R: {choice: [2, 3]}}
    prompt: How many rows does an ({R}, 4) array have?
    answer: row_count
    wrong:
      - {value: row_count_again, mistake: counted_columns, feedback: That is the number of columns.}
    feedback: The first axis counts the rows.
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def spoiled_course(root: Path) -> Path:
    """The rows course with an error in each stage: assignment.yaml has an unknown key and an
    unlisted problem file; row_max two key errors (found in the order line 4, then 3); row_min an
    unknown bug; row_sum a wrong `expect:`; the quiz a known-wrong value equal to the answer."""
    (root / "problems").mkdir(parents=True)
    (root / "assignment.yaml").write_text(ASSIGNMENT)
    (root / "rows.py").write_text(CODE)
    (root / "quiz.yaml").write_text(QUIZ)
    for name in ("row_max", "row_min", "row_sum", "stray"):
        (root / "problems" / f"{name}.yaml").write_text(PROBLEM.format(id=name))
    replace_once(root / "problems" / "row_max.yaml", "points: 2\n", "points: two\ncolour: red\n")
    replace_once(root / "problems" / "row_min.yaml", "cases:\n",
          "mistakes:\n  - {id: took-the-max, message: You took the max., bug: row_min_wrong}\ncases:\n")
    replace_once(root / "problems" / "row_sum.yaml", "args: {x: [[1.0, 2.0, 3.0]]}\n",
          "args: {x: [[1.0, 2.0, 3.0]]}\n    expect: [7.0]\n")
    return root


class TestEveryErrorInOneRun:
    def test_one_error_of_each_stage_is_reported_in_one_run(self, tmp_path):
        """Key, name, `expect:` and quiz errors of four files come in one run, sorted by file and
        line (an error without a line last in its file), as `file:line: message`; exit 3."""
        root = spoiled_course(tmp_path / "rows")
        result = run("validate", str(root))
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert result.stderr.splitlines() == [
            f"{root}/assignment.yaml:3: unknown key 'colour' in assignment.yaml (allowed: code, optional, problems, quiz, title)",
            f"{root}/assignment.yaml: problems/stray.yaml is not listed under 'problems' or 'optional' (add it or move it out)",
            f"{root}/problems/row_max.yaml:3: 'points' must be a number (got 'two')",
            f"{root}/problems/row_max.yaml:4: unknown key 'colour' in a problem (allowed: cases, compare, function, "
            "hints, id, mistakes, params, points, prompt, timeout, title)",
            f"{root}/problems/row_min.yaml:10: unknown mistake bug 'row_min_wrong' (not a function of rows.py)",
            f"{root}/problems/row_sum.yaml:10: case 'worked example': 'expect' disagrees with the reference "
            "(1 of 1 element(s) differ; worst at [0]: got 7, expected 6)",
            f"{root}/quiz.yaml:12: known-wrong value 2 equals the answer when R=2",
        ]
        assert result.stdout == ""

    def test_every_command_is_refused_with_the_same_errors(self, tmp_path):
        """The gate every command loads through (`mha list` here) reports the same errors at once:
        the keys of the problems that loaded are still checked against the reference."""
        root = spoiled_course(tmp_path / "rows")
        validated = run("validate", str(root))
        listed = run("--course", str(root), "list")
        assert listed.exit_code == ExitCode.INVALID_SPEC
        assert listed.stderr == validated.stderr

    def test_the_parts_that_load_are_kept(self, tmp_path):
        """read_course keeps the problems and the quiz that load beside the errors of the others."""
        root = spoiled_course(tmp_path / "rows")
        course, errors = read_course(root)
        assert course is not None
        assert [p.id for p in course.problems] == ["row_sum"]
        assert course.quiz is not None and [i.id for i in course.quiz.items] == ["how_many_rows"]
        assert len(errors) == 5

    def test_a_problem_with_an_unknown_function_still_has_its_fields_checked(self, tmp_path):
        """An unknown function and a bad `points` of one file are reported together."""
        root = spoiled_course(tmp_path / "rows")
        path = root / "problems" / "row_min.yaml"
        path.write_text(PROBLEM.format(id="row_min").replace("points: 2", "points: -1").replace(
            "signature: row_min(x)", "signature: row_least(x)"))
        from grader.course.code import course_of
        with pytest.raises(SpecErrors) as info:
            load_problem(path, course_of(root))
        assert str(info.value).splitlines() == [
            f"{path}:3: 'points' must be greater than 0 (got -1)",
            f"{path}:5: 'function': 'signature' names 'row_least', expected 'row_min'",
        ]


class TestPlaceholders:
    def test_an_untouched_scaffold_is_refused_naming_each_placeholder(self, tmp_path):
        """`mha new problem` then `mha validate`: the TODO title and prompt, the scaffold reference and
        the stub's TODO docstring are each refused at their line; exit 3."""
        root = tmp_path / "mine"
        assert run("--course", str(root), "new", "problem", "attention_entropy").exit_code == 0
        result = run("validate", str(root))
        assert result.exit_code == ExitCode.INVALID_SPEC
        problem = root / "problems" / "attention_entropy.yaml"
        def_line = 1 + (root / "course.py").read_text().splitlines().index("def attention_entropy(x):")
        stub_line = 1 + (root / "attention.py").read_text().splitlines().index("def attention_entropy(x):")
        assert result.stderr.splitlines() == [
            f"{root}/attention.py:{stub_line}: the docstring of the stub attention_entropy() is still the "
            "placeholder from `mha new problem`: say what the student writes",
            f"{root}/course.py:{def_line}: the reference attention_entropy() is still the placeholder from "
            "`mha new problem`: write the real computation",
            f"{problem}:2: 'title' is still the placeholder from `mha new problem`: write the problem's title",
            f"{problem}:8: 'prompt' is still the placeholder from `mha new problem`: write what the student "
            "computes, with a worked example",
        ]

    def test_a_reference_with_its_body_written_but_its_todo_docstring_left_is_refused(self, tmp_path):
        """Only the scaffold's docstring left in the reference is still named, at its `def` line."""
        root = tmp_path / "mine"
        assert run("--course", str(root), "new", "problem", "row_copy").exit_code == 0
        fill_placeholders(root, "row_copy")
        replace_once(root / "course.py", '"""A float64 copy of x (row_copy)', '"""TODO what row_copy computes')
        result = run("validate", str(root))
        def_line = 1 + (root / "course.py").read_text().splitlines().index("def row_copy(x):")
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert result.stderr.splitlines() == [
            f"{root}/course.py:{def_line}: the docstring of the reference row_copy() is still the placeholder "
            "from `mha new problem`: say what it computes"]

    def test_a_filled_scaffold_validates(self, tmp_path):
        """Once every placeholder is written, the scaffolded course validates."""
        root = tmp_path / "mine"
        assert run("--course", str(root), "new", "problem", "row_copy").exit_code == 0
        fill_placeholders(root, "row_copy")
        result = run("validate", str(root))
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("OK: 1 problem(s), 2 cases")


class TestScaffoldInTheDefaultCourse:
    def test_the_scaffold_reference_runs_in_a_copy_of_the_default_course(self, tmp_path):
        """exercises/course.py binds no `np` of its own: the appended reference imports numpy, so it
        answers the scaffold's worked example, and validate reports only the placeholders."""
        root = tmp_path / "exercises"
        shutil.copytree(EXERCISES, root, ignore=shutil.ignore_patterns("__pycache__"))
        result = run("--course", str(root), "new", "problem", "my_fn")
        assert result.exit_code == 0, result.output
        assert "\nimport numpy as np" in (root / "course.py").read_text()
        course, errors = read_course(root)
        assert course is not None
        answer = course_function(course.code, "my_fn")([1.0, 2.0, 3.0])  # type: ignore[misc]
        np.testing.assert_array_equal(answer, [1.0, 2.0, 3.0])
        assert answer.dtype == np.float64
        validated = run("validate", str(root))
        assert validated.exit_code == ExitCode.INVALID_SPEC
        lines = validated.stderr.splitlines()
        assert len(lines) == 4 and all("is still the placeholder from `mha new problem`" in line for line in lines)
        assert "NameError" not in validated.stderr

    def test_a_module_that_binds_np_gets_no_second_import(self, tmp_path):
        """A course module with its own `import numpy as np` is appended to without another import."""
        root = tmp_path / "mine"
        assert run("--course", str(root), "new", "problem", "first").exit_code == 0
        assert run("--course", str(root), "new", "problem", "second").exit_code == 0
        assert (root / "course.py").read_text().count("import numpy as np") == 1
