"""docs/pedagogy.md: its tables of problems and quiz items agree with the packaged course, every
row names an idea of the lesson, and transcription is at most 20% of the core's problem points."""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from grader.course.loader import load_course

from .conftest import EXERCISES, ROOT

PAGE = ROOT / "docs" / "pedagogy.md"
MAX_TRANSCRIPTION = 0.20


@dataclass(frozen=True)
class Row:
    """One row of a table: the id, its points, core or optional, the ideas, and (problems) the
    points that are transcription."""

    id: str
    points: float
    status: str
    ideas: tuple[str, ...]
    transcription: float = 0.0


def _table(heading: str) -> list[list[str]]:
    """The cells of the first table under `## heading`, header and rule left out."""
    section = PAGE.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def _rows(heading: str) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for cells in _table(heading):
        ideas = tuple(i.strip() for i in cells[3].split(","))
        transcription = float(cells[4]) if len(cells) > 4 else 0.0
        assert cells[0] not in rows, f"{heading}: {cells[0]} listed twice"
        rows[cells[0]] = Row(cells[0], float(cells[1]), cells[2], ideas, transcription)
    return rows


@pytest.fixture(scope="module")
def default_course():
    return load_course(EXERCISES)


def test_every_problem_is_listed_with_its_points_and_status(default_course):
    """Each problem of the course, core or optional, has one row with its points and status, and no row is extra."""
    rows = _rows("Problems")
    expected = {p.id: (p.points, "core") for p in default_course.problems}
    expected.update({p.id: (p.points, "optional") for p in default_course.optional})
    assert {r.id: (r.points, r.status) for r in rows.values()} == expected


def test_every_quiz_item_is_listed_with_its_points_and_status(default_course):
    """Each quiz item, asked or optional, has one row with its points and status, and no row is extra."""
    quiz = default_course.quiz
    expected = {i.id: (i.points, "core") for i in quiz.items}
    expected.update({i.id: (i.points, "optional") for i in quiz.optional})
    assert {r.id: (r.points, r.status) for r in _rows("Quiz items").values()} == expected


def test_every_row_names_ideas_the_page_defines():
    """The ideas column holds only ids of the lesson's ideas listed at the top of the page."""
    defined = {cells[0] for cells in _table("The ideas of the lesson")}
    assert defined and all(re.fullmatch(r"I\d+", idea) for idea in defined)
    for heading in ("Problems", "Quiz items"):
        for row in _rows(heading).values():
            assert row.ideas and set(row.ideas) <= defined, (heading, row.id, row.ideas)


def test_transcription_is_at_most_a_fifth_of_the_core(default_course):
    """Over the core problems, transcription points are at most 20% of the points, and the share the page states is right."""
    rows = _rows("Problems")
    assert all(0 <= r.transcription <= r.points for r in rows.values())
    core = [rows[p.id] for p in default_course.problems]
    copied, total = sum(r.transcription for r in core), sum(r.points for r in core)
    assert copied / total <= MAX_TRANSCRIPTION, f"transcription {copied} of {total} core points"
    stated = re.search(r"Transcription in the core: (\d+) of (\d+) problem points, ([\d.]+)%", PAGE.read_text())
    assert stated is not None
    assert (float(stated[1]), float(stated[2])) == (copied, total)
    assert float(stated[3]) == pytest.approx(100 * copied / total, abs=0.05)


def test_the_guides_link_the_page():
    """README and the authoring guide point to this page."""
    for guide in ("README.md", "docs/authoring.md"):
        assert "pedagogy.md" in (ROOT / guide).read_text(), guide


def test_every_problem_core_or_optional_keeps_the_contract(course):
    """With the optional problems switched on, every problem file is graded: the model answers get
    every point and the stubs none (tests/test_mistakes.py catches each named mistake on the same course)."""
    from grader.grading.grade import grade

    from .conftest import SOLUTIONS
    files = {p.stem for p in (EXERCISES / "problems").glob("*.yaml")}
    solved = [p for p in grade(course, SOLUTIONS / "attention.py").problems if p.id in files]
    assert {p.id for p in solved} == files
    assert [p.id for p in solved if p.score != p.max_score] == []
    stubs = [p for p in grade(course, EXERCISES / "attention.py").problems if p.id in files]
    assert len(stubs) == len(files) and [p.id for p in stubs if p.score != 0] == []
