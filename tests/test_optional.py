"""assignment.yaml's `optional:`: problems and quiz items a course keeps, validates and switches
off; an instructor switches one on by moving its id (docs/authoring.md, "The core and the optional
problems")."""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pytest
import yaml
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.loader import load_course, read_course
from grader.course.manifest import course_files
from grader.errors import ExitCode

from .conftest import EXERCISES, SOLUTIONS

OFF_PROBLEM, OFF_ITEM = "parameter_count", "head_count"
ON_PROBLEM = "count_routing_distributions"   # graded by default


def mha(course, *args, cwd=None):
    return CliRunner().invoke(main, ["--course", str(course), *args], catch_exceptions=False)


def with_optional_section(folder, text):
    """The default course copied to `folder`, its assignment.yaml given `text` after the problems
    (and `problems` without the ids `text` switches off)."""
    shutil.copytree(EXERCISES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "assignment.yaml"
    source, _, packaged = path.read_text().partition("\noptional:")   # the packaged course's own section, left out
    for problem_id in (yaml.safe_load("optional:" + packaged)["optional"].get("problems") or ()):  # with its problems
        (folder / "problems" / f"{problem_id}.yaml").unlink()
    source = source.rstrip("\n") + "\n"
    source = source.replace(f"  - {OFF_PROBLEM}\n", "")
    path.write_text(source + text)
    return folder


@pytest.fixture(scope="module")
def course_with_optional(tmp_path_factory):
    return with_optional_section(tmp_path_factory.mktemp("optional") / "course",
                                 f"optional:\n  problems: [{OFF_PROBLEM}]\n  quiz: [{OFF_ITEM}]\n")


def test_switched_off_problems_and_items_are_kept_out_of_the_score(course_with_optional):
    packaged = load_course(EXERCISES)  # the copy: every quiz item on, the packaged optional problems gone
    everything = replace(packaged, quiz=packaged.quiz.with_optional())
    course = load_course(course_with_optional)
    off_points = everything.problem(OFF_PROBLEM).points + everything.quiz.item(OFF_ITEM).points
    assert course.problem(OFF_PROBLEM) is None and [p.id for p in course.optional] == [OFF_PROBLEM]
    assert course.quiz.item(OFF_ITEM) is None and [i.id for i in course.quiz.optional] == [OFF_ITEM]
    assert course.max_score == everything.max_score - off_points
    switched_on = course.with_optional()
    assert sorted(p.id for p in switched_on.problems) == sorted(p.id for p in everything.problems)
    assert [i.id for i in switched_on.quiz.items] == [i.id for i in everything.quiz.items]  # the file's order
    assert switched_on.max_score == everything.max_score


def test_list_shows_the_core_with_points_and_names_the_optional_ones(course_with_optional):
    result = mha(course_with_optional, "list")
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert not any(re.match(rf"\s+{OFF_PROBLEM}\s", row) for row in rows)
    assert not any(re.match(rf"\s+{OFF_ITEM}\s", row) for row in rows)
    assert any(re.match(r"\s+softmax\s+\d+ pts", row) for row in rows)
    tail = " ".join(rows[rows.index(next(r for r in rows if r.startswith("optional"))):])
    assert f"{OFF_PROBLEM}, {OFF_ITEM}" in tail
    total = load_course(course_with_optional).max_score
    assert f"total {total:g} points" in result.stdout


def test_the_model_answers_get_every_point_of_the_core_and_nothing_optional_is_graded(course_with_optional,
                                                                                      tmp_path):
    out = tmp_path / "report.json"
    result = mha(course_with_optional, "grade", str(SOLUTIONS), "--format", "json", "--output", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["score"] == report["max_score"] == load_course(course_with_optional).max_score
    graded = {entry["id"] for entry in report["problems"]}  # problems and quiz items
    assert "softmax" in graded and OFF_PROBLEM not in graded and OFF_ITEM not in graded
    assert not any(OFF_ITEM in message for message in report["messages"])  # its answer: ignored, not an error


def test_optional_files_ship_with_the_course(course_with_optional):
    """A release or an export copies an optional problem's file, so an instructor can switch it on there."""
    assert f"problems/{OFF_PROBLEM}.yaml" in {p.as_posix() for p in course_files(load_course(course_with_optional))}


def test_every_mistake_in_optional_is_reported_in_one_run_with_its_line(tmp_path):
    folder = with_optional_section(tmp_path / "course", (
        "optional:\n"
        f"  problems: [{OFF_PROBLEM}, {ON_PROBLEM}, no_such_problem, {OFF_PROBLEM}]\n"
        "  quiz: [no_such_item]\n"))
    (folder / "problems" / f"{OFF_PROBLEM}.yaml").write_text(
        (folder / "problems" / f"{OFF_PROBLEM}.yaml").read_text().replace("\ntitle:", "\ntitel:", 1))
    course, errors = read_course(folder)
    said = [(e.path.split("/")[-1], e.line, e.message) for e in errors]
    lines = (folder / "assignment.yaml").read_text().splitlines()
    problems_line = next(n for n, line in enumerate(lines, 1) if line.startswith("  problems: ["))
    assert ("assignment.yaml", problems_line, f"problem '{ON_PROBLEM}' is listed under 'problems' and under 'optional' "
            f"(line {lines.index(f'  - {ON_PROBLEM}') + 1}): keep one") in said
    assert ("assignment.yaml", problems_line,
            "optional problem 'no_such_problem' has no file problems/no_such_problem.yaml") in said
    assert any(m.startswith(f"duplicate id '{OFF_PROBLEM}' in 'optional.problems'") for _, _, m in said)
    assert ("assignment.yaml", problems_line + 1, "optional quiz item 'no_such_item' is not in quiz.yaml") in said
    assert any(f == f"{OFF_PROBLEM}.yaml" and "titel" in m for f, _, m in said)  # an optional file is validated
    result = mha(folder, "validate")
    assert result.exit_code == ExitCode.INVALID_SPEC
    for message in ("listed under 'problems' and under 'optional'", "no_such_problem", "no_such_item", "titel"):
        assert message in result.output


@pytest.mark.parametrize("text, message", [
    ("optional: [a, b]\n", "'optional' must be a mapping with 'problems' and/or 'quiz' (got ['a', 'b'])"),
    ("optional:\n  problem: [a]\n", "'problem'"),
    ("optional:\n  quiz: 3\n", "'optional.quiz' must be a list of ids (got"),
])
def test_a_malformed_optional_section_is_a_specific_error(tmp_path, text, message):
    folder = with_optional_section(tmp_path / "course", text)
    (folder / "problems" / f"{OFF_PROBLEM}.yaml").unlink()
    result = mha(folder, "validate")
    assert result.exit_code == ExitCode.INVALID_SPEC
    assert message in result.output and "Traceback" not in result.output


def test_a_problem_file_in_neither_list_names_both(tmp_path):
    folder = with_optional_section(tmp_path / "course", "")
    result = mha(folder, "validate")
    assert result.exit_code == ExitCode.INVALID_SPEC
    assert (f"problems/{OFF_PROBLEM}.yaml is not listed under 'problems' or 'optional' (add it or move it out)"
            in result.output)
