"""One source for each fact: the version, summary, Python requirement, dependencies, entry point
and build requirement are pyproject.toml's, wherever the grader writes or reports them."""
from __future__ import annotations

import ast
import io
import re
import sys
import zipfile

import pytest

import grader
from grader import distribution
from grader.classroom.bundles import write_student
from grader.course.loader import load_course
from grader.exports import wheel

from .conftest import ROOT


def parse_toml(text: str) -> dict:
    """pyproject.toml as a dict: tomllib from Python 3.11; before it, a reader of the subset used
    here (tables, and keys whose values are strings or arrays of strings; others left out)."""
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib.loads(text)
    data: dict = {}
    table = data
    pending = ""
    for line in text.splitlines():
        header = re.fullmatch(r"\s*\[([^\[\]]+)\]\s*(#.*)?", line)
        if not pending and header:
            table = data
            for part in re.findall(r'"[^"]*"|[^.\s]+', header.group(1)):
                table = table.setdefault(part.strip('"'), {})
            continue
        if not pending and ("=" not in line or line.lstrip().startswith("#")):
            continue
        pending += re.sub(r'\s+#[^"\']*$', "", line) + "\n"  # a comment after the value
        key, _, value = pending.partition("=")
        if value.count("[") > value.count("]"):
            continue  # an array going on over the next lines
        pending = ""
        try:
            table[key.strip().strip('"')] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):  # an inline table or another type: not needed here
            pass
    return data


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return parse_toml((ROOT / "pyproject.toml").read_text())


def test_the_fallback_reader_agrees_with_tomllib_on_pyproject():
    """The reader for Python 3.10 gives the values this test reads exactly as tomllib does."""
    tomllib = pytest.importorskip("tomllib")
    text = (ROOT / "pyproject.toml").read_text()
    real = tomllib.loads(text)
    major = sys.version_info
    try:
        sys.version_info = (3, 10)  # type: ignore[assignment]
        ours = parse_toml(text)
    finally:
        sys.version_info = major  # type: ignore[assignment]
    for table, key in (("project", "version"), ("project", "description"), ("project", "requires-python"),
                       ("project", "dependencies"), ("build-system", "requires")):
        assert ours[table][key] == real[table][key]
    assert ours["project"]["scripts"] == real["project"]["scripts"]


class TestInstalledMetadata:
    def test_version(self, pyproject):
        """grader.__version__ is pyproject.toml's version."""
        assert grader.__version__ == distribution.version() == pyproject["project"]["version"]

    def test_summary_python_dependencies_entry_point(self, pyproject):
        project = pyproject["project"]
        assert distribution.summary() == project["description"]
        assert distribution.requires_python() == project["requires-python"]
        assert distribution.dependencies() == tuple(project["dependencies"])
        assert distribution.entry_point("mha") == project["scripts"]["mha"]

    def test_build_requirement(self, pyproject):
        """The one fact installed metadata lacks is kept once, and agrees too."""
        assert pyproject["build-system"]["requires"] == [distribution.BUILD_REQUIRES]


class TestExports:
    def test_wheel_metadata(self, pyproject):
        """The grader wheel the exports ship: METADATA and entry_points.txt say what pyproject.toml says."""
        project = pyproject["project"]
        name, data = wheel.build(load_course(ROOT / "exercises"))
        assert name == f"mha_exercises-{project['version']}-py3-none-any.whl"
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = f"mha_exercises-{project['version']}.dist-info"
            metadata = archive.read(f"{info}/METADATA").decode().splitlines()
            entry_points = archive.read(f"{info}/entry_points.txt").decode()
        assert f"Version: {project['version']}" in metadata
        assert f"Summary: {project['description']}" in metadata
        assert f"Requires-Python: {project['requires-python']}" in metadata
        assert [line[len("Requires-Dist: "):] for line in metadata if line.startswith("Requires-Dist: ")] == \
            project["dependencies"]
        assert entry_points == f"[console_scripts]\nmha = {project['scripts']['mha']}\n"

    def test_student_wheel_metadata(self, pyproject, course):
        """The otter export's student wheel: the same distribution, versioned +student, no console script."""
        project = pyproject["project"]
        name, data = wheel.build_student(course)
        assert name == f"mha_exercises-{project['version']}+student-py3-none-any.whl"
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = f"mha_exercises-{project['version']}+student.dist-info"
            metadata = archive.read(f"{info}/METADATA").decode().splitlines()
            assert f"{info}/entry_points.txt" not in archive.namelist()
        assert f"Name: {project['name']}" in metadata
        assert f"Version: {project['version']}+student" in metadata

    def test_student_bundle_pyproject(self, pyproject, course, tmp_path):
        """The student bundle's pyproject.toml: the same distribution (so pip replaces one install with
        the other), the version labelled +student, the same Python, dependencies and build requirement."""
        write_student(course, tmp_path / "student", [], None)
        student = parse_toml((tmp_path / "student" / "pyproject.toml").read_text())
        project = pyproject["project"]
        assert student["build-system"]["requires"] == pyproject["build-system"]["requires"]
        assert student["project"]["name"] == project["name"]
        assert student["project"]["version"] == f"{project['version']}+student"
        assert student["project"]["requires-python"] == project["requires-python"]
        assert student["project"]["dependencies"] == project["dependencies"]


def test_no_copy_of_a_fact_in_the_code(pyproject):
    """No module of the grader spells out the version or a dependency: they come from the metadata."""
    project = pyproject["project"]
    facts = [f'"{project["version"]}"', *project["dependencies"], project["description"]]
    copies = [(str(path.relative_to(ROOT)), fact) for path in sorted((ROOT / "grader").rglob("*.py"))
              for fact in facts if fact in path.read_text()]
    assert copies == []


def test_version_option():
    """`mha --version` names pyproject.toml's version."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.split()[-1] == parse_toml(
        (ROOT / "pyproject.toml").read_text())["project"]["version"]

