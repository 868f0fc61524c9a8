"""Hand scores of the written items, read back for the gradebook (`mha grade-all --written-scores FILE`).

FILE is a CSV file whose header names the columns `student`, `item` and `score` (or `points`,
so the written.csv that grade-all writes, its points column filled in, can be read back as it
is); other columns are ignored. One row per student and written item; a blank score means not
graded yet. Every row is checked before anything is graded: a student with no submission, an
item that is not a written item of the course, a score that is not a number or lies outside 0
to the item's points, or a second score for the same student and item is an error naming the
file and line. A student name that written.csv guarded against spreadsheet formulas (a leading
apostrophe) is read without it.
"""
from __future__ import annotations

import csv
import io
import math
from collections.abc import Collection, Mapping
from pathlib import Path

from ..errors import ScoresError

__all__ = ["MAX_BYTES", "read_written_scores"]

MAX_BYTES = 16 * 1024 * 1024  # far more than a class's hand scores; a bigger file is a wrong file
_COLUMNS = ("student", "item")
_SCORE = ("score", "points")
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")  # what written.csv prefixes with an apostrophe


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()[:MAX_BYTES + 1]
    except OSError as exc:
        raise ScoresError([f"{path}: cannot be read ({exc.strerror or exc})"]) from None
    if len(data) > MAX_BYTES:
        raise ScoresError([f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; expected a CSV file of hand scores"])
    try:
        return data.decode("utf-8-sig")  # a spreadsheet may start the file with a byte order mark
    except UnicodeDecodeError as exc:
        raise ScoresError([f"{path}: not UTF-8 text (byte {exc.start}); save it as CSV in UTF-8"]) from None


def _student(cell: str) -> str:
    cell = cell.strip()
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_FORMULA) else cell


def _columns(path: Path, header: list[str]) -> tuple[int, int, int]:
    """The positions of the student, item and score columns in the header (line 1)."""
    names = [h.strip().lower() for h in header]
    score = next((names.index(s) for s in _SCORE if s in names), None)
    if score is None or any(c not in names for c in _COLUMNS):
        raise ScoresError([f"{path}:1: the header must name the columns student, item and score "
                           f"(got {', '.join(h.strip() for h in header) or 'an empty line'})"])
    return names.index("student"), names.index("item"), score


def read_written_scores(path: Path, students: Collection[str],
                        items: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """{student: {written item id: points}} from the CSV file `path`, every row checked.

    `students`: the students whose submissions are graded; `items`: each written item's points.
    Raises ScoresError with one `file:line: message` per bad row."""
    path = Path(path)
    if not items:
        raise ScoresError([f"{path}: the course has no written items, so there are no hand scores to add"])
    reader = csv.reader(io.StringIO(_text(path), newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise ScoresError([f"{path}:1: the file is empty; expected a header naming student, item and score"])
        where = _columns(path, header)
        scores: dict[str, dict[str, float]] = {}
        seen: dict[tuple[str, str], int] = {}
        errors: list[str] = []
        known = ", ".join(items)
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            cells = [row[i].strip() if i < len(row) else "" for i in where]
            student, item, score = _student(cells[0]), cells[1], cells[2]
            if student not in students:
                errors.append(f"{path}:{line}: unknown student {student!r} (no submission of theirs was graded)")
                continue
            if item not in items:
                errors.append(f"{path}:{line}: unknown written item {item!r} (the written items: {known})")
                continue
            if not score:
                continue  # not graded yet
            try:
                points = float(score)
            except ValueError:
                points = math.nan
            if not math.isfinite(points):
                errors.append(f"{path}:{line}: the score must be a number (got {score!r})")
            elif not 0 <= points <= items[item]:
                errors.append(f"{path}:{line}: score {score} for {item} is out of range (0 to {items[item]:g} points)")
            elif (student, item) in seen:
                errors.append(f"{path}:{line}: a second score for {student} and {item} "
                              f"(the first is on line {seen[student, item]})")
            else:
                seen[student, item] = line
                scores.setdefault(student, {})[item] = points
    except csv.Error as exc:
        raise ScoresError([f"{path}:{reader.line_num}: not a valid CSV line ({exc})"]) from None
    if errors:
        raise ScoresError(errors)
    return scores
