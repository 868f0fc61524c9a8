"""nbgrader: a course folder that `nbgrader generate_assignment`, `autograde` and `generate_feedback` run.

`write(out, course, solutions)` writes

    OUT/nbgrader_config.py              the course's nbgrader settings (course id, cell timeout)
    OUT/source/<name>/<name>.ipynb      the source notebook (written by `ipynb`)
    OUT/source/<name>/<student wheel>   the student package (`wheel.build_student`: no reference,
                                        no hidden cases), released with the notebook: students
                                        install it to run the test cells themselves
    OUT/source/<name>/models/*.npz      the trained models' weights, released with the notebook
    OUT/<wheel>                         this grader as a wheel, the course packaged in it, for the
                                        grading environment only (outside source/: never released)
    OUT/requirements.txt                what the grading environment installs (otter.requirements)

The source notebook, per problem: its prompt; a solution cell (nbgrader `solution: true`) holding
the stub's signature and docstring and the model answer between `### BEGIN SOLUTION` and
`### END SOLUTION`; an autograded test cell (`grade: true`, locked) worth the problem's points,
which names the problem's cases, the hidden ones between `### BEGIN HIDDEN TESTS` and
`### END HIDDEN TESTS`, and ends in `problem_score(...)` (grading/nbgrader_checks.py): nbgrader
reads that value as the points earned, `mha grade`'s score for the problem. Then the quiz: each
automatically graded item as an answer cell (the key as its solution) and a test cell ending in
`answer_score(...)`, a hidden item's call between the hidden-tests markers; each written item as a
manually graded Markdown cell (`grade: true, solution: true`) worth its points, its rubric as the
solution, which the release replaces by nbgrader's "YOUR ANSWER HERE".

Test cells hold case names, never inputs or expected values, and the release holds no hidden
case's name: nothing hidden reaches students.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..course.model import Course, Problem, QuizItem
from ..errors import SpecError, SubmissionError
from ..paths import write_atomically
from .ipynb import new_code_cell, new_markdown_cell, new_notebook, writes
from .pysource import split_module, stub, student_module

__all__ = ["ASSIGNMENT", "CONFIG", "MODELS", "check_assignment_name", "source_notebook", "write"]

ASSIGNMENT = "mha-exercises"
CONFIG = "nbgrader_config.py"
MODELS = "models"
CELL_TIMEOUT = 300  # seconds per cell: a test cell prepares its problem's cases with the reference first
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

_CONFIG = '''\
# nbgrader's settings for this course, written by `mha export nbgrader`.
# Run nbgrader in this folder (its root). The grading environment needs this package installed:
# `pip install -r requirements.txt` here installs the wheel beside this file and its dependencies.
c = get_config()  # noqa: F821 (given by nbgrader when it reads this file)

c.CourseDirectory.course_id = {course_id!r}
# A test cell prepares its problem's cases (the reference runs) before grading them.
c.Execute.timeout = {timeout}
'''

SETUP = ("Write each function in the cell under its problem, where it says `YOUR CODE HERE`, and run the "
         "test cell below it: it checks your code on the public cases (the hidden cases are graded later). "
         "The test cells need the checking tools, installed once, in the folder of this notebook: "
         "`pip install {wheel}`.")


def check_assignment_name(name: str) -> str:
    """`name` if nbgrader can use it as an assignment's folder and id, else SubmissionError."""
    if not _NAME.fullmatch(name):
        raise SubmissionError(f"--name must be letters, digits, '-' and '_', starting with a letter or digit "
                              f"(got {name!r})")
    return name


def _nbgrader(cell, grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
              points: float | None = None):
    """`cell` with nbgrader's metadata (schema 3)."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = float(points)
    cell["metadata"]["nbgrader"] = meta
    return cell


def _test_cell(problem: Problem) -> str:
    """The test cell's code: the problem's case names (hidden ones between the markers) and the score."""
    fn = problem.function.name
    public = [f"    {c.name!r},\n" for c in problem.cases if not c.hidden]
    hidden = [f"    {c.name!r},\n" for c in problem.cases if c.hidden]
    marked = ["    ### BEGIN HIDDEN TESTS\n", *hidden, "    ### END HIDDEN TESTS\n"] if hidden else []
    return ("from grader.grading.nbgrader_checks import problem_score\n"
            f"problem_score({problem.id!r}, globals().get({fn!r}), [\n" + "".join(public + marked) + "])")


def _answer_test(item: QuizItem) -> str:
    call = f"answer_score({item.id!r}, globals().get({item.id!r}, ...))"
    if item.hidden:
        call = f"### BEGIN HIDDEN TESTS\n{call}\n### END HIDDEN TESTS"
    return f"from grader.grading.nbgrader_checks import answer_score\n{call}"


def _quiz_cells(add, course: Course) -> None:

    from ..course.quiz import DEFAULT_SEED, answer_key, draw
    from ..starter import ANSWER_FORMS
    quiz = course.quiz
    if quiz is None:
        return
    add(new_markdown_cell(f"# {quiz.title}\n\nAnswer each question in the cell under it: a code cell by setting the "
                          "variable it names, a written question in your own words."), "quiz-intro")
    key = answer_key(quiz, DEFAULT_SEED)
    for item in quiz.items:
        v = draw(item, DEFAULT_SEED)
        choices = "".join(f"\n- ({c.letter}) {c.text}" for c in v.choices)
        kind = "written, graded by hand" if item.manual else "quiz"
        how = ("" if item.manual else f"\n\nAnswer by setting `{item.id}` to {ANSWER_FORMS[item.kind]}"
               f"{' (letters in quotes)' if item.choices else ''}.")
        add(new_markdown_cell(f"## {item.title} ({item.points:g} points, {kind})\n\n{v.prompt.rstrip()}\n{choices}{how}"),
            f"{item.id}-prompt")
        if item.manual:
            rubric = "\n".join(f"- {r.points:g} point{'' if r.points == 1 else 's'}: {r.text}" for r in item.rubric)
            add(_nbgrader(new_markdown_cell(f"### BEGIN SOLUTION\nRubric ({item.points:g} points, graded by hand):\n\n"
                                            f"{rubric}\n### END SOLUTION"),
                          item.id, grade=True, solution=True, points=item.points), f"{item.id}-answer")
            continue
        add(_nbgrader(new_code_cell(f"# {item.id} = your answer\n### BEGIN SOLUTION\n{item.id} = {key[item.id]!r}\n"
                                    "### END SOLUTION"),
                      f"{item.id}-answer", solution=True), f"{item.id}-answer")
        add(_nbgrader(new_code_cell(_answer_test(item)), item.id, grade=True, locked=True, points=item.points),
            f"{item.id}-test")


def source_notebook(course: Course, solutions_path: Path, student_wheel: str) -> str:
    """The source notebook as JSON text: per problem its prompt, its solution cell and its test
    cell, then the quiz (see the module docstring)."""
    from ..course.quiz import DEFAULT_SEED
    from ..course.render import render_prompt
    from .otter import solution_cell
    solutions = split_module(Path(solutions_path).read_text(encoding="utf-8"))
    if solutions is None:
        raise SpecError(str(solutions_path), None, "the model answers are not valid Python")
    stubs = split_module(student_module(course))  # made from the course, never the instructor's code
    cells = []

    def add(cell, cell_id: str) -> None:
        cell["id"] = cell_id
        cells.append(cell)

    add(new_markdown_cell(f"# {course.title}\n\n{SETUP.format(wheel=student_wheel)}"), "title")
    add(new_code_cell(solutions.imports or "import numpy as np"), "imports")
    for problem in course.problems:
        fn = problem.function
        add(new_markdown_cell(f"## {problem.title} ({problem.points:g} points)\n\n`{fn.signature}`\n\n"
                              f"{render_prompt(problem, DEFAULT_SEED).rstrip()}"), f"{problem.id}-prompt")
        solution = solutions.functions.get(fn.name)
        if solution is None:
            raise SpecError(str(solutions_path), None, f"the model answers define no function {fn.name}")
        header = (stubs.functions.get(fn.name) if stubs else None) or stub(fn)
        add(_nbgrader(new_code_cell(solution_cell(header, solution, comment="###")), f"{problem.id}-solution", solution=True),
            f"{problem.id}-solution")
        add(_nbgrader(new_code_cell(_test_cell(problem)), problem.id, grade=True, locked=True, points=problem.points),
            f"{problem.id}-test")
    _quiz_cells(add, course)
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    return writes(nb)


def write(out: Path, course: Course, solutions: Path, assignment: str = ASSIGNMENT) -> list[Path]:
    """Write the nbgrader course folder into `out`, built beside it and moved in whole; returns the
    paths written, the source notebook last."""
    from ..outputs import staged_folder
    check_assignment_name(assignment)
    out = Path(out)
    with staged_folder(out, merge=True) as staged:
        written = _write_into(staged, course, solutions, assignment)
    return [out / path.relative_to(staged) for path in written]


def _write_into(out: Path, course: Course, solutions: Path, assignment: str) -> list[Path]:
    from ..classroom.bundles import copy_models
    from . import wheel
    from .otter import requirements
    source = out / "source" / assignment
    written = [out / CONFIG]
    write_atomically(out / CONFIG, _CONFIG.format(course_id=assignment, timeout=CELL_TIMEOUT))
    name, data = wheel.build(course)
    write_atomically(out / name, data)
    student, data = wheel.build_student(course)
    write_atomically(source / student, data)
    write_atomically(out / "requirements.txt", requirements())
    written += [out / name, source / student, out / "requirements.txt"]
    written += copy_models(course.root, source)
    notebook = source / f"{assignment}.ipynb"
    write_atomically(notebook, source_notebook(course, solutions, student))
    return written + [notebook]
