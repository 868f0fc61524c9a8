"""The student notebook export, and notebooks as submissions (grader.grading.notebook_submission)."""
from __future__ import annotations

import json
import shutil

import pytest

from grader.errors import ExitCode
from grader.exports import jupyter as exporter
from grader.grading.notebook_submission import ANSWERS_TAG, CHECK_TAG, definitions, extract_answers, extract_source

from ._student_models import assert_models_shipped, load_in
from ._submissions import solution_functions
from .conftest import SOLUTIONS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course



def _key_lines() -> dict[str, str]:
    """Each quiz item's line of the answer key, solutions/answers.yaml."""
    return {line.split(":")[0]: line.split("#")[0].rstrip() for line in (SOLUTIONS / "answers.yaml").read_text().splitlines()
            if line and not line.startswith("#") and ":" in line}


def _solved(text: str, answers: bool = True):
    """The exported notebook (an nbformat node) with each stub cell replaced by the model answer
    and, with `answers`, each answer cell filled in with the key."""
    import nbformat
    nb = nbformat.reads(text, as_version=4)
    functions = solution_functions()
    key = _key_lines()
    for cell in nb.cells:
        if cell.id.endswith("-code"):
            cell.source = functions[cell.id.removesuffix("-code")]
        elif answers and cell.id.endswith("-answer"):
            cell.source = key[cell.id.removesuffix("-answer")]
    return nb


class TestRender:
    def test_each_problem_has_prompt_stub_and_tagged_check(self, course):
        """Per problem: a Markdown prompt, a stub cell defining the function, a check cell tagged mha-check."""
        nb = json.loads(exporter.render(course))
        cells = {c["id"]: c for c in nb["cells"]}
        for problem in course.problems:
            prompt = "".join(cells[f"{problem.id}-prompt"]["source"])
            assert cells[f"{problem.id}-prompt"]["cell_type"] == "markdown" and problem.title in prompt
            assert "".join(cells[f"{problem.id}-code"]["source"]).startswith(f"def {problem.function.name}(")
            check = cells[f"{problem.id}-check"]
            assert check["metadata"]["tags"] == [CHECK_TAG]
            assert f"check({problem.id!r})" in "".join(check["source"])

    def test_each_quiz_item_has_its_question_and_a_tagged_answer_cell(self, course):
        """Per quiz item: the prompt with its choices, then a raw answer cell `id: ` tagged mha-answers."""
        nb = json.loads(exporter.render(course))
        cells = {c["id"]: c for c in nb["cells"]}
        for item in course.quiz.items:
            question = "".join(cells[f"{item.id}-question"]["source"])
            assert cells[f"{item.id}-question"]["cell_type"] == "markdown" and item.title in question
            answer = cells[f"{item.id}-answer"]
            assert answer["cell_type"] == "raw" and answer["metadata"]["tags"] == [ANSWERS_TAG]
            assert "".join(answer["source"]) == f"{item.id}: "
        assert "**b)**" in "".join(cells["pruning-question"]["source"])

    def test_render_is_deterministic(self, course):
        """The same course gives byte-identical notebooks (cell ids are not random)."""
        assert exporter.render(course) == exporter.render(course)


class TestDefinitions:
    def test_keeps_definitions_and_drops_scratch_work(self):
        """Imports, defs and assignments stay; calls, magics, tools and API-calling assignments go."""
        source = ("import numpy as np\nimport otter\ngrader = otter.Notebook('a.ipynb')\n"
                  "from grader.grading.notebook_submission import check\n!mha check softmax\n%timeit 1\nEPS = 1e-9\n"
                  "x = softmax(np.ones(3))\n\n@staticmethod\ndef softmax(s):\n    return s\nprint(softmax(1))\n")
        assert definitions(source) == "import numpy as np\nEPS = 1e-9\n@staticmethod\ndef softmax(s):\n    return s"

    def test_invalid_python_is_kept_for_the_grader_to_report(self):
        """A cell with a syntax error is kept as it is (magic lines blanked)."""
        assert definitions("def f(:\n    pass") == "def f(:\n    pass"

    def test_cell_magic_cells_are_dropped(self):
        """%%timeit and the like make the whole cell non-Python."""
        assert definitions("%%timeit\nsoftmax(1)") == ""

    def test_not_a_notebook_costs_the_problems(self, cli, tmp_path):
        """A .ipynb that is not JSON is graded (exit 0): every problem 0, saying why; the quiz still counts."""
        path = tmp_path / "attention.ipynb"
        path.write_text("{not json")
        (tmp_path / "answers.yaml").write_text("pruning: a\n")
        result = cli("grade", str(path), "--format", "json")
        assert result.exit_code == ExitCode.OK, result.output
        data = json.loads(result.stdout)
        problems = [p for p in data["problems"] if p["cases"][0]["name"] != "answer"]
        assert problems and {p["score"] for p in problems} == {0}
        assert {p["message"] for p in problems} == {"attention.ipynb: not a Jupyter notebook (the notebook is not "
                                                    "valid JSON (Expecting property name enclosed in double quotes: "
                                                    "line 1 column 2 (char 1)))"}
        assert next(p for p in data["problems"] if p["id"] == "pruning")["score"] > 0


@pytest.mark.slow
class TestSolvedNotebook:
    def test_executes_with_every_check_passing_and_grades_full_marks(self, course, cli, tmp_path):
        """Solutions pasted into the stubs: nbclient runs it top to bottom, every check passes,
        and `mha grade` on the notebook gives full marks."""
        import nbformat
        from nbclient import NotebookClient
        nb = _solved(exporter.render(course))
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        checks = [c for c in nb.cells if CHECK_TAG in c.metadata.get("tags", [])]
        assert len(checks) == len(course.problems)
        for cell, problem in zip(checks, course.problems):
            text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs)
            assert f"PASS  {problem.id}:" in text and "FAIL" not in text, text
            html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
            assert html.startswith('<div class="mha-report"') and f"PASS  {problem.id}:" in html
        path = tmp_path / "attention.ipynb"
        nbformat.write(nb, path)
        shutil.copy(SOLUTIONS / "answers.yaml", tmp_path / "answers.yaml")
        result = cli("grade", str(path), "--format", "json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["score"] == data["max_score"] == course.max_score

    def test_unsolved_notebook_scores_zero_on_the_problems(self, course, tmp_path):
        """The exported stubs, graded as a notebook, earn nothing: `not implemented yet`."""
        path = tmp_path / "attention.ipynb"
        path.write_text(exporter.render(course))
        source = extract_source(path)
        assert "def softmax(scores):" in source and "check(" not in source
        from grader.grading.grade import grade
        from grader.grading.submission import read_submission
        result = grade(course, read_submission(path), problem_ids=[p.id for p in course.problems])
        assert result.score == 0
        assert all(p.message == "not implemented yet" for p in result.problems)


def test_cli_writes_the_notebook(cli, tmp_path):
    """`mha export notebook --out FILE` writes a valid nbformat 4 notebook."""
    out = tmp_path / "hw.ipynb"
    result = cli("export", "notebook", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["nbformat"] == 4


def test_notebook_alone_earns_its_quiz_points(course, cli, tmp_path):
    """A notebook with its answer cells filled in and no answers.yaml anywhere: full marks, quiz included."""
    import nbformat
    folder = tmp_path / "only"
    folder.mkdir()
    nbformat.write(_solved(exporter.render(course)), folder / "attention.ipynb")
    assert "pruning: " in extract_answers(folder / "attention.ipynb")
    result = cli("grade", str(folder / "attention.ipynb"), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["score"] == data["max_score"] == course.max_score


def test_blank_answer_cells_score_no_quiz_points(course, cli, tmp_path):
    """The answer cells as exported (blank): the problems still count, every quiz item is 0."""
    import nbformat
    nbformat.write(_solved(exporter.render(course), answers=False), tmp_path / "attention.ipynb")
    shutil.copyfile(SOLUTIONS / "answers.yaml", tmp_path / "answers.yaml")  # cells win over a file beside
    result = cli("grade", str(tmp_path / "attention.ipynb"), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["score"] == sum(p.points for p in course.problems)


def test_folder_holding_only_a_notebook_is_graded(course, cli, tmp_path):
    """A submission folder with one .ipynb and no attention.py (a Gradescope notebook upload) is graded."""
    import nbformat
    folder = tmp_path / "submission"
    folder.mkdir()
    nbformat.write(_solved(exporter.render(course)), folder / "homework.ipynb")
    shutil.copyfile(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
    result = cli("grade", str(folder), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["score"] == data["max_score"] == course.max_score
    (folder / "second.ipynb").write_text((folder / "homework.ipynb").read_text())
    two = cli("grade", str(folder))
    assert two.exit_code == ExitCode.USAGE
    assert "no attention.py in this folder (and 2 notebooks: upload one)" in two.stderr


class TestBrokenCell:
    """A notebook with one code cell that is not Python is graded cell by cell: that cell costs the
    functions it defines, named by its number and its line; every other problem is graded."""

    @staticmethod
    def notebook(course, folder):
        import nbformat
        nb = _solved(exporter.render(course))
        broken = next(i for i, c in enumerate(nb.cells, start=1) if c.id == "parameter_count-code")
        lines = nb.cells[broken - 1].source.split("\n")
        nb.cells[broken - 1].source = "\n".join(lines[:2] + ["    total = = 4 * d_model"] + lines[2:])
        scratch = nbformat.v4.new_code_cell("for i in range(3)\n    print(softmax(i))")
        nb.cells.insert(1, scratch)  # a scratch cell, before it: the broken cell is one further on
        shutil.copyfile(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
        nbformat.write(nb, folder / "homework.ipynb")
        return folder / "homework.ipynb", broken + 1

    def test_the_broken_cell_costs_its_function_only(self, course, tmp_path):
        """parameter_count (its cell has `= =` on line 3) scores 0, told "cell N, line 3: invalid syntax";
        every other problem full marks; a broken scratch cell costs nothing and is named too."""
        from grader.grading.grade import grade
        from grader.grading.submission import read_submission
        path, number = self.notebook(course, tmp_path)
        result = grade(course, read_submission(path))
        scores = {p.id: (p.score, p.max_score) for p in result.problems if not p.quiz}
        assert scores.pop("parameter_count")[0] == 0
        assert all(score == top for score, top in scores.values()), scores
        problem = next(p for p in result.problems if p.id == "parameter_count")
        assert problem.message == (f"cell {number}, line 3: invalid syntax; parameter_count is defined in that "
                                   "cell, which is not valid Python, so it was not run")
        assert all(c.summary == problem.message for c in problem.cases)
        assert result.load_error is None and result.score == course.max_score - course.problem("parameter_count").points
        assert f"cell {number}, line 3: invalid syntax (not valid Python: it was left out, so parameter_count " \
               "could not be graded)" in result.messages
        assert "cell 2, line 1: expected ':' (not valid Python: it was left out; it defines no function graded " \
               "here, so it costs nothing)" in result.messages

    def test_the_report_names_the_cell_not_attention_py(self, cli, course, tmp_path):
        """`mha check` on the notebook: the cell and its line, no line of an attention.py the student never wrote."""
        path, number = self.notebook(course, tmp_path)
        result = cli("check", "--path", str(path))
        assert result.exit_code == 1
        assert "FAIL  parameter_count: " in result.stdout
        assert f"cell {number}, line 3: invalid syntax" in result.stdout
        assert "attention.py" not in result.stdout.replace("attention.py:", "")
        assert f"PASS  the {len(course.problems) - 1} other problems: every case right" in result.stdout

    def test_a_redefined_function_is_graded_on_the_cell_that_parses(self, course, tmp_path):
        """A broken cell that redefines a function another cell defines costs nothing (the kernel keeps the other)."""
        from grader.grading.notebook_submission import notebook_parts
        cells = [{"cell_type": "code", "metadata": {}, "source": "def f(x):\n    return x\n"},
                 {"cell_type": "code", "metadata": {}, "source": "def f(x):\n    return x +\n"},
                 {"cell_type": "code", "metadata": {}, "source": "def g(:\n    pass\n"}]
        raw = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}).encode()
        source, _, broken = notebook_parts(raw, "n.ipynb")
        assert "def f(x):\n    return x\n" in source and "def g" not in source and "x +" not in source
        assert [(b.label, b.line, b.functions) for b in broken] == [("cell 2", 2, ()), ("cell 3", 1, ("g",))]


class TestModels:
    def test_the_models_go_beside_the_notebook(self, cli, tmp_path):
        """The .npz files in models/ beside the notebook (no index.json); `load_model` there finds them."""
        folder = tmp_path / "student"
        result = cli("export", "notebook", "--out", str(folder / "attention.ipynb"))
        assert result.exit_code == 0, result.output
        assert f"into {folder / 'models'}" in result.stderr
        assert_models_shipped(folder)
        _, models, shape = load_in(folder)
        assert models == folder / "models" and shape == "2 8"
