"""The student notebook: each problem's prompt as Markdown, a stub cell, and a check cell.

Built as plain dicts and written in nbformat's form (`ipynb`). Cell ids are derived from the
problem ids, so the same course always gives a byte-identical notebook. The check cells are
tagged `mha-check`; they call `grader.notebook.check`, which runs `mha check` on the cells run so far.
After the problems comes the concept quiz: per item its prompt and choices, and a raw cell tagged
`mha-answers` holding the item's answers.yaml line, for the student to fill in. `mha grade
NOTEBOOK.ipynb` grades the saved notebook's definitions and, from those cells, its quiz answers.
A written item's answer cell is a manually graded answer for nbgrader too (`metadata.nbgrader`:
grade and solution, its points): its points are given by hand, never by `mha grade`.
"""
from __future__ import annotations

from ..course.model import Course, QuizItem
from ..grading.notebook_submission import ANSWERS_TAG, CHECK_TAG
from .ipynb import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell, writes
from .pysource import split_module, stub, student_module

__all__ = ["manual_grading", "render"]

INTRO = """\
# {title}

Write each function in the code cell under its problem, replacing `raise NotImplementedError(...)`,
then run the check cell below it: it checks your code on the public cases, with hints. The hidden
cases are graded later.

Submit this notebook. `mha grade` grades the imports, functions and assignments of its code cells;
calls and prints (your own experiments) are left out, so they may stay. Keep the function names and
parameters as they are. The concept quiz is at the end: write each answer after the colon in its
answer cell.
"""

QUIZ_INTRO = """# {title}

Write each answer after the colon in the answer cell under its question: {forms}. These cells
are graded like an answers.yaml file; keep the item names before the colons.
"""


def _cell(kind, source: str, cell_id: str, tags: tuple[str, ...] = ()):
    cell = kind(source)
    cell["id"] = cell_id
    if tags:
        cell["metadata"]["tags"] = list(tags)
    return cell


def manual_grading(item: QuizItem) -> dict:
    """nbgrader's metadata of a manually graded answer cell: a written item's points, given by hand."""
    return {"grade": True, "solution": True, "locked": False, "points": item.points,
            "grade_id": f"{item.id}-answer", "schema_version": 3}


def _quiz_cells(quiz, seed: int) -> list:
    """The quiz: an intro, then per item its Markdown prompt and its answer cell (raw, tagged)."""
    from ..course.quiz import ANSWER_FORMS, draw
    forms = "; ".join(sorted(set(ANSWER_FORMS.values())))
    cells = [_cell(new_markdown_cell, QUIZ_INTRO.format(title=quiz.title, forms=forms).rstrip(), "quiz-intro")]
    for item in quiz.items:
        v = draw(item, seed)
        choices = "".join(f"\n- **{c.letter})** {c.text}" for c in v.choices)
        note = " Hidden: graded when you submit." if item.hidden else ""
        if item.manual:
            note += " Graded by hand by your instructor: pending until then, never scored by `mha grade`."
        cells.append(_cell(new_markdown_cell, f"### {item.title} ({item.points:g} points)\n\n{v.prompt.rstrip()}\n"
                                              f"{choices}\n\nAnswer with {ANSWER_FORMS[item.kind]}.{note}",
                           f"{item.id}-question"))
        cells.append(_cell(new_raw_cell, f"{item.id}: ", f"{item.id}-answer", (ANSWERS_TAG,)))
        if item.manual:  # a manually graded answer for nbgrader too
            cells[-1]["metadata"]["nbgrader"] = manual_grading(item)
    return cells


def render(course: Course, seed: int | None = None) -> str:
    """The notebook as JSON text (nbformat 4), for the seed `seed` (default: the default one)."""
    from ..course.quiz import DEFAULT_SEED
    from ..course.render import render_prompt
    seed = DEFAULT_SEED if seed is None else seed
    module = split_module(student_module(course))  # stubs made from the course, never the instructor's code
    cells = [_cell(new_markdown_cell, INTRO.format(title=course.title).rstrip(), "intro"),
             _cell(new_code_cell, module.imports if module and module.imports else "import numpy as np", "imports")]
    for problem in course.problems:
        fn = problem.function
        prompt = render_prompt(problem, seed).rstrip()
        cells.append(_cell(new_markdown_cell, f"## {problem.title} ({problem.points:g} points)\n\n"
                                              f"`{fn.signature}`\n\n{prompt}", f"{problem.id}-prompt"))
        code = module.functions.get(fn.name) if module else None
        cells.append(_cell(new_code_cell, code or stub(fn), f"{problem.id}-code"))
        cells.append(_cell(new_code_cell, f"from grader.notebook import check\ncheck({problem.id!r})",
                           f"{problem.id}-check", (CHECK_TAG,)))
    if course.quiz is not None:
        cells += _quiz_cells(course.quiz, seed)
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "mha": {"assignment": course.title, "problems": [p.id for p in course.problems]},
    })
    return writes(nb)
