"""Notebooks written without nbformat (grader/exports/ipynb.py): nbformat's own text, valid by its schema."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from grader.errors import InternalError
from grader.exports import ipynb, jupyter, nbgrader, otter

from .conftest import ROOT, SOLUTIONS


def exported(course) -> dict[str, str]:
    """Every notebook the exports write for `course`: the student notebook (two seeds), otter's
    master notebook and nbgrader's source notebook."""
    solutions = SOLUTIONS / "attention.py"
    return {"notebook": jupyter.render(course), "notebook, seed 7": jupyter.render(course, 7),
            "otter": otter.master_notebook(course, solutions),
            "nbgrader": nbgrader.source_notebook(course, solutions, "mha_exercises-0.1.0+student-py3-none-any.whl")}


class TestExports:
    @pytest.mark.parametrize("which", ["core", "everything on"])
    def test_every_export_is_nbformats_own_text_and_valid(self, which, core_course, course):
        """Each notebook passes nbformat's schema, and nbformat writes back the very same bytes."""
        for name, text in exported(core_course if which == "core" else course).items():
            notebook = nbformat.reads(text, as_version=4)
            nbformat.validate(notebook)
            assert nbformat.writes(notebook) + "\n" == text, name
            assert len({c["id"] for c in notebook.cells}) == len(notebook.cells), name

    def test_exporting_loads_no_nbformat(self):
        """Building the three notebooks imports neither nbformat nor jsonschema."""
        solutions = str(SOLUTIONS / "attention.py")
        script = ("import sys; from pathlib import Path; from grader.course.loader import load_course; "
                  "from grader.exports import jupyter, nbgrader, otter; "
                  f"course = load_course(Path({str(ROOT / 'exercises')!r})); jupyter.render(course); "
                  f"otter.master_notebook(course, Path({solutions!r})); "
                  f"nbgrader.source_notebook(course, Path({solutions!r}), 'w.whl'); "
                  "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbformat', 'jsonschema')))")
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"


class TestWrites:
    def test_sources_split_into_lines_keys_sorted(self):
        """A cell's source is written as its lines, each keeping its newline; keys are sorted."""
        cell = ipynb.new_code_cell("a = 1\nb = 2\n")
        cell["id"] = "first"
        text = ipynb.writes(ipynb.new_notebook([cell], {"z": 1, "a": 2}))
        assert '"source": [\n    "a = 1\\n",\n    "b = 2\\n"\n   ]' in text
        assert text.index('"a": 2') < text.index('"z": 1') and text.endswith("}\n")
        assert nbformat.writes(nbformat.reads(text, as_version=4)) + "\n" == text

    @pytest.mark.parametrize("cell_id", ["", "has space", "x" * 65, "dots.in.it"])
    def test_an_id_nbformat_refuses_is_an_internal_error(self, cell_id):
        cell = ipynb.new_markdown_cell("text")
        cell["id"] = cell_id
        with pytest.raises(InternalError, match="notebook cell id"):
            ipynb.writes(ipynb.new_notebook([cell], {}))
