"""Written answers for the instructor: each student's text beside each written item's rubric.

grade-all writes `written.html` (to read and grade) and `written.csv` (a points column to
fill in). A student's text is untrusted: it is HTML-escaped and shown as preformatted text, so
nothing in it is ever interpreted; in the CSV a cell that a spreadsheet would read as a formula
(starting with =, +, -, @ or a control character) is prefixed with an apostrophe.
"""
from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence

from ..classroom.analysis import StudentRow
from ..course.model import QuizItem

__all__ = ["FILES", "render_html", "render_csv"]

FILES = ("written.html", "written.csv")
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")

_STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:.6em;border-left:3px solid #3b6ea8}
.none{color:#777;font-style:italic}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em}"""


def _rubric_html(item: QuizItem) -> str:
    e = html.escape
    rows = "".join(f"<tr><td>{r.points:g}</td><td>{e(r.text)}</td></tr>" for r in item.rubric)
    return f"<table><tr><th>points</th><th>the answer...</th></tr>{rows}</table>"


def render_html(items: Sequence[QuizItem], students: Sequence[StudentRow]) -> str:
    """One page: per written item, its prompt and rubric, then every student's text (escaped)."""
    e = html.escape
    sections = []
    for item in items:
        answers = []
        for row in sorted(students, key=lambda r: r.student):
            text = row.written.get(item.id)
            body = f"<pre>{e(text)}</pre>" if text else '<p class="none">no answer</p>'
            answers.append(f"<h3><code>{e(row.student)}</code></h3>{body}")
        sections.append(f"<h2>{e(item.title)} (<code>{e(item.id)}</code>, {item.points:g} points, graded by hand)</h2>"
                        f"<pre>{e(item.prompt.strip())}</pre>{_rubric_html(item)}{''.join(answers)}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Written answers</title>
<style>{_STYLE}</style>
</head><body>
<h1>Written answers</h1>
<p>Recorded with each submission and never scored by the grader: give their points by hand, by the rubric.
The students' texts are shown exactly as written (escaped: nothing in them is interpreted).</p>
{''.join(sections)}
</body></html>
"""


def _cell(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA) else text


def render_csv(items: Sequence[QuizItem], students: Sequence[StudentRow],
               hand: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """student, item, answer, points (blank: the grader's to fill in), max_points; one row per student
    and item. `hand`: the hand scores already given (`--written-scores`), kept in the points column,
    so a written.csv read back and written again loses none of them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "item", "answer", "points", "max_points"])
    for row in sorted(students, key=lambda r: r.student):
        given = (hand or {}).get(row.student, {})
        for item in items:
            points = f"{given[item.id]:g}" if item.id in given else ""
            writer.writerow([_cell(row.student), item.id, _cell(row.written.get(item.id, "")), points,
                             f"{item.points:g}"])
    return buffer.getvalue()
