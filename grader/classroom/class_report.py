"""The class report: item analysis tables (JSON, CSV), two SVG plots (`plots`) and one HTML page
that holds them all."""
from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from ..grading.results import Status
from ..paths import write_atomically
from . import plots as svg_plots
from .analysis import SMALL_CLASS, Analysis, ItemStats, StudentRow, flag


def _csv(rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _distribution(item: ItemStats) -> str:
    return " ".join(f"{points:g}:{n}" for points, n in item.distribution)


def write(analysis: Analysis, titles: Mapping[str, str], out: Path, students: Sequence[StudentRow] = (),
          messages: Mapping[tuple[str, str], str] | None = None) -> list[Path]:
    """Write item_analysis.json/.csv, misconceptions.csv, plots/*.svg and report.html into `out`.
    `students`: every student's row, for the report's per-student section; `messages`: what
    each named mistake tells a student."""
    out, messages = Path(out), messages or {}
    files = {
        "item_analysis.json": json.dumps(asdict(analysis), indent=2) + "\n",
        "item_analysis.csv": _csv([["item", "title", "max_score", "mean_fraction", "discrimination",
                                    "item_rest_correlation", "full_marks", "zero", "distribution", "flag"]]
                                  + [[i.id, titles.get(i.id, ""), f"{i.max_score:g}", f"{i.mean:.3f}",
                                      _fmt(i.discrimination), _fmt(i.item_rest), i.full_marks, i.zero,
                                      _distribution(i), flag(i, analysis.students)] for i in analysis.items]),
        "misconceptions.csv": _csv([["item", "mistake", "students", "message"]]
                                   + [[*m, messages.get((m[0], m[1]), "")] for m in analysis.mistakes]),
    }
    for name, text in files.items():
        write_atomically(out / name, text)
    plots = svg_plots.draw(analysis, out / "plots")
    write_atomically(out / "report.html", render_html(analysis, titles, plots, students, messages))
    return [out / name for name in files] + plots + [out / "report.html"]


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;margin:1em 0;width:100%}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;white-space:nowrap}tr.flag td{background:#fff6dc}
.note{background:#fff6dc;border-left:4px solid #e0a800;padding:.5em 1em}.bad{color:#a61b1b;font-weight:600;white-space:nowrap}
svg{max-width:100%;height:auto;margin:1em 0}.plots{display:flex;flex-wrap:wrap;gap:1em}.plots svg{max-width:calc(50% - 1em)}
td.d{white-space:nowrap}"""


def _status_counts(students: Sequence[StudentRow]) -> str:
    counts: dict[str, int] = {}
    for row in students:
        counts[row.status] = counts.get(row.status, 0) + 1
    order = [s.value for s in Status]  # graded, syntax error, import failure, timeout, empty, error
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items(),
                                                             key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))


def _student_rows(students: Sequence[StudentRow], max_total: float, items: Sequence[str]) -> str:
    e = html.escape
    rows = []
    for row in sorted(students, key=lambda r: r.student):
        total = sum(row.scores.get(i, 0.0) for i in items)
        status = e(row.status) if row.status == "graded" else f'<span class="bad">{e(row.status)}</span>'
        short = [i for i in items if row.scores.get(i, 0.0) < 1e-9]
        mistakes = "; ".join(f"{e(item)}: {', '.join(e(m) for m in ids)}" for item, ids in row.mistakes.items())
        shown = "" if row.status in ("error", "grader-error") else f"{total:.4g}"
        percent = "" if row.status in ("error", "grader-error") or not max_total else f"{100 * total / max_total:.0f}%"
        rows.append(f"<tr><td><code>{e(row.student)}</code></td><td>{status}</td><td class=n>{shown}</td>"
                    f"<td class=n>{percent}</td><td>{len(short)}</td><td>{mistakes}</td></tr>")
    return "".join(rows)


def render_html(analysis: Analysis, titles: Mapping[str, str], plots: list[Path],
                students: Sequence[StudentRow] = (), messages: Mapping[tuple[str, str], str] | None = None) -> str:
    """One self-contained page: summary (with a caveat for a small class), the plots inline (SVG),
    the item table (flagging items everybody or nobody got), the misconceptions with their
    messages, and one row per student with their status."""
    e, messages = html.escape, messages or {}
    rows = "".join(
        f"<tr{' class=flag' if flag(i, analysis.students) else ''}><td><code>{e(i.id)}</code></td>"
        f"<td>{e(titles.get(i.id, ''))}</td><td class=n>{i.max_score:g}</td>"
        f"<td class=n>{i.mean:.0%}</td><td class=n>{_fmt(i.discrimination)}</td><td class=n>{_fmt(i.item_rest)}</td>"
        f"<td class=n>{i.full_marks}</td><td class=n>{i.zero}</td><td class=d>{e(_distribution(i))}</td>"
        f"<td>{e(flag(i, analysis.students))}</td></tr>" for i in analysis.items)
    mistakes = "".join(f"<tr><td><code>{e(item)}</code></td><td><code>{e(m)}</code></td><td class=n>{n}</td>"
                       f"<td>{e(messages.get((item, m), ''))}</td></tr>"
                       for item, m, n in analysis.mistakes) or "<tr><td colspan=4>none</td></tr>"
    images = "".join(p.read_text(encoding="utf-8") for p in plots)
    caveat = "" if analysis.students >= SMALL_CLASS else (
        f'<p class="note">Only {analysis.students} students were analysed. With fewer than about {SMALL_CLASS}, the '
        "upper and lower 27% groups hold a handful of students each, so discrimination and item-rest values swing "
        "with a single student (a value of 1.000 may only mean the same few students topped every item): read them "
        "as rough hints, not as evidence about an item.</p>")
    flagged = sum(bool(flag(i, analysis.students)) for i in analysis.items)
    flag_note = f" {flagged} item(s) are flagged (shaded): everybody got full marks or nobody scored, so they " \
                "separate no one." if flagged else ""
    everyone = f"{len(students)} students: {e(_status_counts(students))}. " if students else ""
    people = (f"<h2>Students</h2><p>A status other than <em>graded</em> means the code could not run as "
              "submitted (a syntax error, an import that failed or ran out of time, nothing submitted), or the "
              "grader failed (<em>error</em>: left out of the analysis; run again to retry).</p>"
              "<table><tr><th>student</th><th>status</th><th>total</th><th>percent</th><th>items at zero</th>"
              f"<th>named mistakes</th></tr>{_student_rows(students, analysis.max_total, [i.id for i in analysis.items])}"
              "</table>") if students else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Item analysis</title>
<style>{_STYLE}</style>
</head><body>
<h1>Item analysis</h1>
<p>{everyone}{analysis.students} analysed; mean total {analysis.mean_total:.2f} of {analysis.max_total:g}.
Discrimination is the mean score of the top 27% minus that of the bottom 27% (by total); item-rest is the
correlation of an item with the total of the other items. Low or negative values flag items to review.{flag_note}</p>
{caveat}
<div class="plots">{images}</div>
<h2>Items</h2>
<table><tr><th>item</th><th>title</th><th>points</th><th>mean</th><th>discrimination</th><th>item-rest r</th>
<th>full marks</th><th>zero</th><th>distribution (points: students)</th><th>flag</th></tr>{rows}</table>
<h2>Named misconceptions</h2>
<table><tr><th>item</th><th>mistake</th><th>students</th><th>what the student is told</th></tr>{mistakes}</table>
{people}
</body></html>
"""
