"""otter-grader: exception-format test files and an `otter assign` master notebook.

`write(out, assignment, solutions)` writes

    OUT/tests/<problem>.py      one test file per problem, one test case per case: public cases
                                visible, hidden cases `hidden=True`; points split by case weight
    OUT/tests/<item>.py         one test file per quiz item (written items excepted: graded by
                                hand), answered in the notebook as a variable named after the
                                item; a multiple-answers item is one test per true statement, so
                                its partial credit with penalty comes out as `mha grade`'s
    OUT/<name>.ipynb            the master notebook for `otter assign` (written by `ipynb`);
                                a written item is a manual question (`manual: true`: no tests, its
                                points given by hand), a Markdown answer cell whose solution is the
                                rubric (removed from the students' copy)
    OUT/<wheel>                 this grader as a wheel, the course packaged in it (`wheel.py`),
                                for the autograder only (`autograder_files`)
    OUT/<student wheel>         the student package (`wheel.build_student`: no reference, no hidden
                                cases; the public cases' expected answers precomputed), given to
                                students with the notebook (`files`): their checks run on it
    OUT/models/*.npz            the course's trained models (weights only, never models/index.json),
                                given to students with the notebook (`files`), so the notebook's
                                `grader.trained.load_model` finds them in its folder
    OUT/requirements.txt        what the grading environment needs besides otter: this grader
                                (found beside the file or in files/, where otter places the wheel)
                                and numpy, PyYAML, click pinned; `pip install -r` works in OUT too

Every test case calls `grader.grading.otter_checks.check_case`, which grades the student's
function with this package's own checks, and every quiz test `check_answer`, which scores the
answer with `mha grade`'s rule, so otter's per-problem and per-item scores equal `mha grade`'s
(for the default seed). The configuration declares the requirements and ships the wheel to the
autograder only (`autograder_files`), so otter's environment, built from them, has the grader
and its course without this repository. Test code holds no inputs or expected values, so
nothing hidden leaks through otter's feedback.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from ..course.model import Case, Course, Problem, Quiz, QuizItem, QuizKind
from ..errors import InternalError, SpecError
from ..paths import write_atomically
from .ipynb import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell, writes
from .pysource import split_module, stub, student_module

__all__ = ["solution_cell", "test_file", "test_cases", "quiz_items", "quiz_cases", "quiz_test_file", "master_notebook", "write",
           "NOTEBOOK_NAME"]

NOTEBOOK_NAME = "mha-exercises.ipynb"

_HEADER = '''\
"""otter-grader tests for {id} ({title}), exported by `mha export otter`.

Each case is graded by mha's own checks, so the score equals `mha grade`'s. Do not edit: re-export.
"""
from otter.test_files import test_case

OK_FORMAT = False

name = {id!r}
'''


def _points(problem: Problem) -> list[float]:
    """Each case's share of the problem's points, by weight (the same arithmetic as the score)."""
    total = sum(c.weight for c in problem.cases)
    return [problem.points * c.weight / total for c in problem.cases]


def _function_name(index: int, case: Case) -> str:
    slug = re.sub(r"[^0-9a-z]+", "_", case.name.lower()).strip("_")
    return f"test_{index:02d}_{slug}"[:80]


def _body(problem: Problem, index: int, case: Case) -> str:
    fn = problem.function.name
    return (f"def {_function_name(index, case)}({fn}):\n"
            f"    from grader.grading.otter_checks import check_case\n"
            f"    check_case({problem.id!r}, {case.name!r}, {fn})\n")


def test_cases(problem: Problem) -> list[tuple[Case, float, str]]:
    """(case, points, test function source) for every case of `problem`, in file order."""
    return [(case, points, _body(problem, i, case))
            for i, (case, points) in enumerate(zip(problem.cases, _points(problem)), start=1)]


def test_file(problem: Problem) -> str:
    """The exception-format test file of one problem."""
    return _test_file(problem.id, problem.title, [(f"{problem.id}: {case.name}", points, case.hidden, body)
                                                  for case, points, body in test_cases(problem)])


def _test_file(id: str, title: str, tests: list[tuple[str, float, bool, str]]) -> str:
    """The header, then each test function (name, points, hidden, source) under its @test_case."""
    parts = [_HEADER.format(id=id, title=title)]
    for name, points, hidden, body in tests:
        parts.append(f"\n@test_case(name={name!r}, points={points!r}, hidden={hidden!r})\n" + body)
    return "\n".join(parts)


def quiz_items(course: Course) -> list[QuizItem]:
    """The quiz items otter grades: all but the written ones (graded by hand, outside otter)."""
    return [i for i in course.quiz.items if not i.manual] if course.quiz else []


def quiz_cases(item: QuizItem) -> list[tuple[int, float, str]]:
    """(part, points, test function source) of a quiz item: one test, or for a multiple-answers
    item one per true statement, each passing when the answer earns that share (otter_checks)."""
    parts = sum(c.correct for c in item.choices) if item.kind is QuizKind.MULTIPLE_ANSWERS else 1
    return [(part, item.points / parts,
             f"def test_{part:02d}({item.id}):\n"
             f"    from grader.grading.otter_checks import check_answer\n"
             f"    check_answer({item.id!r}, {item.id}, {part}, {parts})\n") for part in range(1, parts + 1)]


def quiz_test_file(item: QuizItem) -> str:
    """The exception-format test file of one quiz item."""
    return _test_file(item.id, item.title, [(f"{item.id}: part {part}", points, item.hidden, body)
                                            for part, points, body in quiz_cases(item)])


def _docstring_split(source: str) -> tuple[list[str], list[str]]:
    """A function's lines up to its docstring (its header) and the lines of its body after it."""
    node = ast.parse(source).body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise InternalError(f"not a function definition: {source[:60]!r}")
    lines = source.split("\n")
    first = node.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    body_start = (first.end_lineno if has_doc else first.lineno - 1)
    return lines[:body_start], lines[body_start:node.end_lineno]


def solution_cell(stub_source: str, solution_source: str, comment: str = "#") -> str:
    """The stub's signature and docstring (what students see), then the model answer's body
    between # BEGIN SOLUTION and # END SOLUTION (which otter assign replaces by `...`; nbgrader's
    markers are the same after `###`, the `comment`)."""
    header, _ = _docstring_split(stub_source)
    _, body = _docstring_split(solution_source)
    body = list(body)
    while body and not body[0].strip():
        body.pop(0)
    indent = body[0][:len(body[0]) - len(body[0].lstrip())] if body else "    "
    return "\n".join(header + [f"{indent}{comment} BEGIN SOLUTION"] + body + [f"{indent}{comment} END SOLUTION"])


REQUIREMENTS = "requirements.txt"
MODELS = "models"  # the trained models' weights, beside the notebook: where grader.trained.load_model looks
STUDENT_SETUP = ("Before you start, install the checking tools once, in the folder of this notebook: "
                 "`pip install otter-grader mha_exercises-*+student-*.whl`. `grader.check(\"{problem}\")` then "
                 "checks one problem on its public cases.")


def _model_files(course: Course) -> list[Path]:
    return sorted((course.root / MODELS).glob("*.npz"))


def requirements() -> str:
    """requirements.txt: this grader at its version, found beside the file (the export folder) or
    in files/ (where otter's autograder zip puts it; pip reads a relative --find-links from the
    requirements file's folder), and the dependencies pinned. The grader is pinned with `===`
    (the exact version string): `==` would also accept the student wheel beside it, whose
    `+student` label PEP 440 ignores there and ranks higher."""
    from . import wheel, wheelhouse
    pins = [p for p in wheelhouse.pinned() if not p.startswith("pip==")]
    own = f"{wheel.DISTRIBUTION}==={wheel.filename().split('-')[1]}"
    return "\n".join(["--find-links=.", "--find-links=files", own, *pins]) + "\n"


def _config(course: Course) -> str:
    from .. import distribution as installed
    from . import wheel
    name = re.sub(r"[^0-9a-z]+", "-", course.title.lower()).strip("-")[:60] or "mha-exercises"
    models = f"  - {MODELS}\n" if _model_files(course) else ""
    return ("# ASSIGNMENT CONFIG\n"
            f"name: {name}\n"
            f"requirements: {REQUIREMENTS}\n"
            f"files:\n  - {wheel.filename(installed.student_version())}\n{models}"
            f"autograder_files:\n  - {wheel.filename()}\n"
            "export_cell: false\n"
            "check_all_cell: false\n"
            "tests:\n"
            "  files: true\n"
            "  ok_format: false\n")


def _quiz_cells(add, item: QuizItem) -> None:
    """A quiz item as an otter question: its prompt and choices, a cell assigning the answer to a
    variable named after the item (the key marked `# SOLUTION`), and its tests."""
    from ..course.quiz import DEFAULT_SEED, answer_key, draw
    from ..starter import ANSWER_FORMS
    v = draw(item, DEFAULT_SEED)
    key = answer_key(Quiz(title="", items=(item,)), DEFAULT_SEED)[item.id]
    choices = "".join(f"\n- ({c.letter}) {c.text}" for c in v.choices)
    add(new_raw_cell, f"# BEGIN QUESTION\nname: {item.id}", f"{item.id}-begin")
    add(new_markdown_cell, f"## {item.title} ({item.points:g} points, quiz)\n\n{v.prompt.rstrip()}\n{choices}\n\n"
                           f"Answer by setting `{item.id}` to {ANSWER_FORMS[item.kind]}"
                           f"{' (letters in quotes)' if item.choices else ''}.",
        f"{item.id}-prompt")
    add(new_raw_cell, "# BEGIN SOLUTION", f"{item.id}-solution-begin")
    add(new_code_cell, f"{item.id} = {key!r}  # SOLUTION", f"{item.id}-solution")
    add(new_raw_cell, "# END SOLUTION", f"{item.id}-solution-end")
    add(new_raw_cell, "# BEGIN TESTS", f"{item.id}-tests-begin")
    for part, points, body in quiz_cases(item):
        config = f'""" # BEGIN TEST CONFIG\npoints: {points!r}\nhidden: {str(item.hidden).lower()}\n""" # END TEST CONFIG\n'
        add(new_code_cell, config + body.rstrip("\n"), f"{item.id}-test-{part}")
    add(new_raw_cell, "# END TESTS", f"{item.id}-tests-end")
    add(new_raw_cell, "# END QUESTION", f"{item.id}-end")


def _written_cells(add, item: QuizItem) -> None:
    """A written item as an otter manual question: its prompt, then a Markdown answer cell whose
    solution (the rubric, for the instructor's copy only) `otter assign` replaces with a blank."""
    add(new_raw_cell, f"# BEGIN QUESTION\nname: {item.id}\npoints: {item.points:g}\nmanual: true", f"{item.id}-begin")
    add(new_markdown_cell, f"## {item.title} ({item.points:g} points, graded by hand)\n\n{item.prompt.rstrip()}\n\n"
                           "Write your answer in the cell below, in your own words: your instructor grades it by "
                           "hand (pending until then; no test scores it).", f"{item.id}-prompt")
    add(new_raw_cell, "# BEGIN SOLUTION", f"{item.id}-solution-begin")
    rubric = "\n".join(f"- {r.points:g} point{'' if r.points == 1 else 's'}: {r.text}" for r in item.rubric)
    add(new_markdown_cell, f"Rubric ({item.points:g} points, graded by hand):\n\n{rubric}", f"{item.id}-solution")
    add(new_raw_cell, "# END SOLUTION", f"{item.id}-solution-end")
    add(new_raw_cell, "# END QUESTION", f"{item.id}-end")


def master_notebook(course: Course, solutions_path: Path) -> str:
    """The `otter assign` master notebook as JSON text: config, then per problem its prompt,
    the stub with the model answer marked as solution, and its test cells."""
    from ..course.quiz import DEFAULT_SEED
    from ..course.render import render_prompt
    solutions = split_module(Path(solutions_path).read_text(encoding="utf-8"))
    stubs = split_module(student_module(course))  # made from the course, never the instructor's code
    cells = []

    def add(kind, source: str, cell_id: str) -> None:
        cell = kind(source)
        cell["id"] = cell_id
        cells.append(cell)

    add(new_raw_cell, _config(course), "config")
    add(new_markdown_cell, f"# {course.title}\n\n{STUDENT_SETUP.format(problem=course.problems[0].id)}", "title")
    add(new_code_cell, solutions.imports or "import numpy as np", "imports")
    for problem in course.problems:
        fn = problem.function
        add(new_raw_cell, f"# BEGIN QUESTION\nname: {problem.id}", f"{problem.id}-begin")
        add(new_markdown_cell, f"## {problem.title} ({problem.points:g} points)\n\n`{fn.signature}`\n\n"
                               f"{render_prompt(problem, DEFAULT_SEED).rstrip()}", f"{problem.id}-prompt")
        add(new_raw_cell, "# BEGIN SOLUTION", f"{problem.id}-solution-begin")
        solution = solutions.functions.get(fn.name)
        if solution is None:
            raise SpecError(str(solutions_path), None, f"the model answers define no function {fn.name}")
        header = (stubs.functions.get(fn.name) if stubs else None) or stub(fn)
        add(new_code_cell, solution_cell(header, solution), f"{problem.id}-solution")
        add(new_raw_cell, "# END SOLUTION", f"{problem.id}-solution-end")
        add(new_raw_cell, "# BEGIN TESTS", f"{problem.id}-tests-begin")
        for i, (case, points, body) in enumerate(test_cases(problem), start=1):
            config = f'""" # BEGIN TEST CONFIG\npoints: {points!r}\nhidden: {str(case.hidden).lower()}\n""" # END TEST CONFIG\n'
            add(new_code_cell, config + body.rstrip("\n"), f"{problem.id}-test-{i}")
        add(new_raw_cell, "# END TESTS", f"{problem.id}-tests-end")
        add(new_raw_cell, "# END QUESTION", f"{problem.id}-end")
    for item in quiz_items(course):
        _quiz_cells(add, item)
    for item in (i for i in course.quiz.items if i.manual) if course.quiz else ():
        _written_cells(add, item)
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    return writes(nb)


def write(out: Path, course: Course, solutions: Path) -> list[Path]:
    """Write the test files and the master notebook into `out`, built beside it and moved in whole;
    returns the paths written."""
    from ..outputs import staged_folder
    out = Path(out)
    with staged_folder(out, merge=True) as staged:
        written = _write_into(staged, course, solutions)
    return [out / path.relative_to(staged) for path in written]


def _write_into(out: Path, course: Course, solutions: Path) -> list[Path]:
    written = []
    for problem in course.problems:
        path = out / "tests" / f"{problem.id}.py"
        write_atomically(path, test_file(problem))
        written.append(path)
    for item in quiz_items(course):
        path = out / "tests" / f"{item.id}.py"
        write_atomically(path, quiz_test_file(item))
        written.append(path)
    from . import wheel
    name, data = wheel.build(course)
    write_atomically(out / name, data)
    student, data = wheel.build_student(course)
    write_atomically(out / student, data)
    write_atomically(out / REQUIREMENTS, requirements())
    from ..classroom.bundles import copy_models
    written += copy_models(course.root, out)
    written += [out / student, out / name, out / REQUIREMENTS]
    path = out / NOTEBOOK_NAME
    write_atomically(path, master_notebook(course, solutions))
    return written + [path]
