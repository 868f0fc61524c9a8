"""The student's report as HTML: the text report, with the attention weights drawn as pictures.

`fragment(result)` is what a notebook's check cell displays (`mha check --format html`);
`render(result)` is a whole page (`mha grade --format html`). A picture is an inline SVG
grid, one square per weight (rows = queries, columns = keys, darker = more weight), the
student's beside the expected one: no plotting library, nothing fetched. Like the text
report, only failing public cases carry weights.
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence

from ..grading.results import GradeResult, WeightGrid
from .terminal import Style, near
from .text import render as render_text

__all__ = ["render", "fragment", "svg_grid"]

CELL = 16  # pixels per weight


def _matrix(rows: Sequence[Sequence[float]], x0: int, y0: int, other: Sequence[Sequence[float]] | None) -> str:
    parts = []
    for i, row in enumerate(rows):
        for j, w in enumerate(row):
            if math.isfinite(w):
                level = max(0.0, min(1.0, w))
                fill = f"rgb({round(255 - 200 * level)},{round(255 - 160 * level)},{round(255 - 90 * level)})"
            else:  # nan or inf: marked, never shaded as if it were a weight
                fill = "#f4c430"
            differs = other is not None and (not math.isfinite(w) or not near(w, other, i, j))
            stroke = ' stroke="#c0392b" stroke-width="2"' if differs else ' stroke="#ccc" stroke-width="1"'
            parts.append(f'<rect x="{x0 + j * CELL}" y="{y0 + i * CELL}" width="{CELL}" height="{CELL}" '
                         f'fill="{fill}"{stroke}><title>query {i}, key {j}: {w:.3f}</title></rect>')
    return "".join(parts)


def svg_grid(grid: WeightGrid) -> str:
    """One SVG: the student's weights (left; a red frame where they differ by more than 0.1) and
    the expected ones (right)."""
    n, m = len(grid.got), len(grid.got[0]) if grid.got else 0
    side, gap, top = m * CELL, 24, 18
    width, height = 2 * side + gap, n * CELL + top + 2
    label = f"{html.escape(grid.label)}: " if grid.label else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 2}" height="{height}" '
            f'viewBox="-1 0 {width + 2} {height}" role="img" aria-label="{label}your weights and the expected ones">'
            f'<text x="0" y="12" font-size="11" font-family="sans-serif">{label}yours</text>'
            f'<text x="{side + gap}" y="12" font-size="11" font-family="sans-serif">expected</text>'
            + _matrix(grid.got, 0, top, grid.expected) + _matrix(grid.expected, side + gap, top, None) + "</svg>")


class _Figures:
    """Collects the grids the text renderer meets, leaving a marker line where each one goes."""

    def __init__(self) -> None:
        self.found: list[Sequence[WeightGrid]] = []

    def __call__(self, grids: Sequence[WeightGrid], style: Style, indent: str) -> list[str]:
        self.found.append(grids)
        return [f"\0figure {len(self.found) - 1}\0"]


def fragment(result: GradeResult) -> str:
    """The report as an HTML fragment: preformatted text, and the weight pictures in place."""
    figures = _Figures()
    text = render_text(result, Style(color=False, width=100), figure=figures)
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            out.append('<pre style="margin:0;white-space:pre-wrap">' + html.escape("\n".join(block)) + "</pre>")
            block.clear()

    for line in text.rstrip("\n").split("\n"):
        if line.startswith("\0figure "):
            flush()
            grids = figures.found[int(line.strip("\0").split()[1])]
            out.append('<div style="display:flex;flex-wrap:wrap;gap:16px;margin:4px 0 8px 56px">'
                       + "".join(svg_grid(g) for g in grids) + "</div>")
        else:
            block.append(line)
    flush()
    return '<div class="mha-report" style="font-family:monospace">\n' + "\n".join(out) + "\n</div>\n"


def render(result: GradeResult) -> str:
    """A whole page holding `fragment(result)`."""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(result.title)}</title>'
            f"</head><body>\n{fragment(result)}</body></html>\n")
