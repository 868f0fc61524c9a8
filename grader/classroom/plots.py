"""The class report's two plots, written as SVG text: the total scores' histogram and the named
mistakes' counts.

They are a few rectangles and labels, so they are drawn here, with nothing to import and nothing
to install: a few milliseconds where a plotting library took about a second of CPU at every
grade-all. The same analysis gives the same bytes, so a class graded in slices and merged has
the same plots as one run. report.html holds them inline, so a bar's tooltip names its range
and its count.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from ..paths import write_atomically
from .analysis import Analysis

__all__ = ["PLOTS", "PALETTE", "histogram", "misconceptions", "draw", "ticks"]

PLOTS = ("score_histogram.svg", "misconceptions.svg")
RETIRED = ("score_histogram.png", "misconceptions.png")  # what earlier versions drew, removed from plots/
BAR = "#3b6ea8"
LABEL = 64  # characters of a mistake's label shown beside its bar (a longer one is cut, its tooltip whole)
# one colour per problem in the mistakes' plot, in the order the problems first appear (tab10's)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def _num(x: float) -> str:
    """A coordinate, to a tenth of a pixel, with no trailing zeros (the same analysis, the same bytes)."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _text(value: object) -> str:
    """Text for SVG: escaped, and without the control characters XML does not allow."""
    text = "".join(c for c in str(value) if c >= " " or c in "\t\n")
    return html.escape(text.encode("utf-8", "replace").decode("utf-8"), quote=True)


def _students(n: int) -> str:
    return f"{n} student" if n == 1 else f"{n} students"


def ticks(top: float, integer: bool = False, count: int = 5) -> list[float]:
    """Round values from 0 to at least `top`, about `count` steps apart (1, 2, 2.5 or 5 times a
    power of ten; whole numbers only when `integer`)."""
    top = max(float(top), 1.0 if integer else 1e-9)
    raw = top / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    steps = math.ceil(top / step - 1e-9)
    return [round(k * step, 10) for k in range(steps + 1)]


def _svg(width: float, height: float, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_num(width)} {_num(height)}" '
            f'width="{_num(width)}" height="{_num(height)}" role="img">'
            f"<title>{_text(title)}</title>"
            '<rect width="100%" height="100%" fill="#fff"/>'
            '<g font-family="system-ui, sans-serif" font-size="12" fill="#222">'  # what every text inherits
            f'<text x="{_num(width / 2)}" y="24" text-anchor="middle" font-size="14">{_text(title)}</text>'
            + "".join(body) + "</g></svg>\n")


def histogram(analysis: Analysis) -> str:
    """The students' total scores in 5 to 20 bins of equal width from 0 to the maximum total."""
    width, height, left, right, top, bottom = 700.0, 360.0, 56.0, 20.0, 44.0, 52.0
    high = analysis.max_total or 1.0
    bins = min(20, max(5, analysis.students // 2)) if analysis.students else 5
    counts, edges = np.histogram(np.asarray(analysis.totals, dtype=float), bins=bins, range=(0.0, high))
    y_ticks = ticks(int(counts.max()) if len(counts) else 1, integer=True)
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_at(value: float) -> float:
        return left + plot_w * value / high

    def y_at(value: float) -> float:
        return top + plot_h * (1 - value / y_ticks[-1])

    body = []
    for y in y_ticks:
        body.append(f'<line x1="{_num(left)}" x2="{_num(left + plot_w)}" y1="{_num(y_at(y))}" y2="{_num(y_at(y))}" '
                    f'stroke="#e4e4e4"/>'
                    f'<text x="{_num(left - 6)}" y="{_num(y_at(y) + 4)}" text-anchor="end">{y:g}</text>')
    for k, n in enumerate(counts.tolist()):
        if n:
            lo, hi = float(edges[k]), float(edges[k + 1])
            body.append(f'<rect x="{_num(x_at(lo))}" y="{_num(y_at(n))}" width="{_num(x_at(hi) - x_at(lo))}" '
                        f'height="{_num(y_at(0) - y_at(n))}" fill="{BAR}" stroke="#fff">'
                        f"<title>{_text(f'{lo:.3g} to {hi:.3g} points: {_students(n)}')}</title>"
                        "</rect>")
    for x in (t for t in ticks(high) if t <= high * (1 + 1e-9)):
        body.append(f'<line x1="{_num(x_at(x))}" x2="{_num(x_at(x))}" y1="{_num(y_at(0))}" y2="{_num(y_at(0) + 5)}" '
                    f'stroke="#222"/>'
                    f'<text x="{_num(x_at(x))}" y="{_num(y_at(0) + 18)}" text-anchor="middle">{x:g}</text>')
    body.append(f'<line x1="{_num(left)}" x2="{_num(left + plot_w)}" y1="{_num(y_at(0))}" y2="{_num(y_at(0))}" '
                f'stroke="#222"/>'
                f'<text x="{_num(left + plot_w / 2)}" y="{_num(height - 12)}" text-anchor="middle">'
                f"{_text(f'total score (of {analysis.max_total:g})')}</text>"
                f'<text transform="translate(16 {_num(top + plot_h / 2)}) rotate(-90)" text-anchor="middle">'
                "students</text>")
    return _svg(width, height, f"Score distribution ({_students(analysis.students)}, mean {analysis.mean_total:.1f})",
                body)


def misconceptions(analysis: Analysis) -> str:
    """One bar per named mistake, in the analysis's order (by problem, the most frequent first),
    coloured by its problem, with its count at its end."""
    title = "Named misconceptions, by problem"
    if not analysis.mistakes:
        return _svg(700.0, 160.0, title, ['<text x="350" y="90" text-anchor="middle">no named mistakes</text>'])
    labels = [f"{item}: {mistake}" for item, mistake, _ in analysis.mistakes]
    problems = list(dict.fromkeys(item for item, _, _ in analysis.mistakes))
    row, bar, top, bottom, right = 26.0, 18.0, 44.0, 48.0, 40.0
    shown = [label if len(label) <= LABEL else label[:LABEL - 1] + "\u2026" for label in labels]  # the tooltip has it all
    left = max(7.0 * max(map(len, shown)) + 16, 80.0)  # about 7 pixels a character at 12 px
    plot_w = 360.0
    width, height = left + plot_w + right, top + row * len(labels) + bottom
    x_ticks = ticks(max(n for _, _, n in analysis.mistakes), integer=True)

    def x_at(value: float) -> float:
        return left + plot_w * value / x_ticks[-1]

    body = []
    base = top + row * len(labels)
    for x in x_ticks:
        body.append(f'<line x1="{_num(x_at(x))}" x2="{_num(x_at(x))}" y1="{_num(top)}" y2="{_num(base + 5)}" '
                    f'stroke="#e4e4e4"/>'
                    f'<text x="{_num(x_at(x))}" y="{_num(base + 18)}" text-anchor="middle">{x:g}</text>')
    for k, ((item, _, n), label, short) in enumerate(zip(analysis.mistakes, labels, shown)):
        y = top + row * k + (row - bar) / 2
        colour = PALETTE[problems.index(item) % len(PALETTE)]
        body.append(f'<text x="{_num(left - 8)}" y="{_num(y + bar / 2 + 4)}" text-anchor="end">{_text(short)}</text>'
                    f'<rect x="{_num(left)}" y="{_num(y)}" width="{_num(x_at(n) - left)}" height="{_num(bar)}" '
                    f'fill="{colour}"><title>{_text(f"{label}: {_students(n)}")}</title></rect>'
                    f'<text x="{_num(x_at(n) + 4)}" y="{_num(y + bar / 2 + 4)}">{n}</text>')
    body.append(f'<line x1="{_num(left)}" x2="{_num(left)}" y1="{_num(top)}" y2="{_num(base)}" stroke="#222"/>'
                f'<text x="{_num(left + plot_w / 2)}" y="{_num(height - 10)}" text-anchor="middle">'
                "students who made the mistake</text>")
    return _svg(width, height, title, body)


def draw(analysis: Analysis, out: Path) -> list[Path]:
    """Write both plots into `out` (the files written, in PLOTS' order); an earlier version's PNG
    plots there are removed, so the folder holds what report.html shows."""
    out.mkdir(parents=True, exist_ok=True)
    for name in RETIRED:
        (out / name).unlink(missing_ok=True)
    written = []
    for name, text in zip(PLOTS, (histogram(analysis), misconceptions(analysis))):
        write_atomically(out / name, text)
        written.append(out / name)
    return written
