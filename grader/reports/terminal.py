"""How text reports meet a terminal: colour, width, word wrapping and shaded weight grids.

`Style` is decided once, at the command line's boundary (`Style.detect`), and handed to the
renderer; the renderer never looks at the environment itself. Colour follows the NO_COLOR
convention (no-color.org: set and non-empty turns colour off) and FORCE_COLOR (set, non-empty
and not "0" turns it on for a pipe); otherwise a terminal gets colour and a file or a pipe
does not. Width is the terminal's (`shutil.get_terminal_size`, which honours COLUMNS), kept
between MIN_WIDTH and MAX_WIDTH so long lines stay readable.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from typing import TextIO

from ..grading.results import WeightGrid
from ..records import record

__all__ = ["Style", "wrap", "grid_lines", "near", "MIN_WIDTH", "MAX_WIDTH"]

MIN_WIDTH, MAX_WIDTH, DEFAULT_WIDTH = 40, 120, 100
_CODES = {"pass": "32", "fail": "31", "todo": "33", "bold": "1", "dim": "2", "mistake": "35", "code": "36",
          "differs": "31"}
SHADES, ASCII_SHADES = " ░▒▓█", " .:+#"  # weight 0 .. 1 in five steps
_SGR = re.compile(r"\033\[[0-9;]*m")


@record
class Style:
    """What the output can show: colour (ANSI SGR codes), its width, and Unicode shade blocks."""

    color: bool = False
    width: int = DEFAULT_WIDTH
    unicode: bool = True

    @classmethod
    def detect(cls, stream: TextIO, env: Mapping[str, str] | None = None) -> Style:
        env = os.environ if env is None else env
        try:
            terminal = stream.isatty()
        except (AttributeError, ValueError):
            terminal = False
        if env.get("NO_COLOR"):
            color = False
        elif env.get("FORCE_COLOR") not in (None, "", "0"):
            color = True
        else:
            color = terminal and env.get("TERM") != "dumb"
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if terminal or env.get("COLUMNS") \
            else DEFAULT_WIDTH
        try:
            SHADES.encode(getattr(stream, "encoding", None) or "ascii")
            unicode = True
        except (LookupError, UnicodeEncodeError):
            unicode = False
        return cls(color=color, width=max(MIN_WIDTH, min(MAX_WIDTH, width)), unicode=unicode)

    def paint(self, text: str, role: str) -> str:
        """`text` in the colour of `role` (pass, fail, todo, bold, dim, mistake, code), if colour is on."""
        if not self.color or not text:
            return text
        return f"\033[{_CODES[role]}m{text}\033[0m"


def wrap(text: str, width: int, indent: str = "", hanging: str | None = None) -> list[str]:
    """`text` wrapped on word boundaries (never inside a word, nor at a hyphen) to `width`
    columns, the first line after `indent`, the others after `hanging` (default: `indent`).
    Existing line breaks are kept; a word longer than the line stays whole on its own line."""
    hanging = indent if hanging is None else hanging
    out: list[str] = []
    for k, paragraph in enumerate(text.split("\n")):
        first = indent if k == 0 else hanging
        columns = max(width, len(first) + 20)
        if len(first) + len(paragraph) <= columns and paragraph.isprintable() and paragraph[-1:] not in ("", " "):
            out.append(first + paragraph)  # what textwrap gives a line that fits (its only spaces are ASCII ones)
            continue
        lines = textwrap.wrap(paragraph, width=columns, initial_indent=first,
                              subsequent_indent=hanging, break_long_words=False, break_on_hyphens=False)
        out.extend(lines or [first.rstrip()])
    return out


NOT_FINITE = {"nan": "??", "inf": "!!", "-inf": "--"}  # cells that are not numbers, marked whatever the shades


def _not_finite(w: float) -> str | None:
    return None if math.isfinite(w) else "nan" if math.isnan(w) else "inf" if w > 0 else "-inf"


def near(w: float, other: Sequence[Sequence[float]], i: int, j: int) -> bool:
    """Whether weight `w` is within 0.1 of `other`'s at (i, j); False where `other` has no such cell
    (grids of odd shapes are drawn all the same: a picture is never worth a lost result)."""
    return i < len(other) and j < len(other[i]) and abs(w - other[i][j]) <= 0.1


def _shade(w: float) -> int:
    """The shade (0 to 4) of a finite weight, any weight: 1e308 * 4 is inf, which round() refuses."""
    return 0 if w <= 0 else 4 if w >= 1 else round(w * 4)


def _cells(rows: Sequence[Sequence[float]], style: Style, other: Sequence[Sequence[float]] | None = None) -> list[str]:
    """One framed line per row, two characters per weight (?? for nan, !! for inf, -- for -inf); cells that
    differ from `other` by more than 0.1 are painted (colour only: without colour the shades tell it)."""
    shades = SHADES if style.unicode else ASCII_SHADES
    bar = "│" if style.unicode else "|"
    lines = []
    for i, row in enumerate(rows):
        cells = []
        for j, w in enumerate(row):
            odd = _not_finite(w)
            cell = NOT_FINITE[odd] if odd else shades[_shade(w)] * 2
            if other is not None and (odd or not near(w, other, i, j)):
                cell = style.paint(cell, "differs")
            cells.append(cell)
        lines.append(bar + "".join(cells) + bar)
    return lines


def grid_lines(grids: Sequence[WeightGrid], style: Style, indent: str) -> list[str]:
    """The student's weights beside the expected ones, head by head, as many pairs side by side
    as the width allows. Rows are queries, columns are keys; a darker cell is a larger weight."""
    if not grids:
        return []
    blocks = []
    for grid in grids:
        cols = len(grid.got[0]) if grid.got else 0
        side = 2 * cols + 2
        yours, expected = _cells(grid.got, style, grid.expected), _cells(grid.expected, style)
        title = f"{grid.label}: " if grid.label else ""
        head = [f"{title}yours".ljust(side) + "  " + "expected".ljust(side)]
        body = [y + " " * (side - 2 * cols - 2) + "  " + e for y, e in zip(yours, expected)]
        n, m = grid.shape
        cut = [f"(first {len(grid.got)} of {n} rows, {cols} of {m} columns)"] if (n, m) != (len(grid.got), cols) else []
        odd = [k for k in NOT_FINITE if any(_not_finite(w) == k for row in grid.got for w in row)]
        legend = ["(" + ", ".join(f"{NOT_FINITE[k]} = {k}" for k in odd) + ")"] if odd else []
        blocks.append((max(len(head[0]), 2 * side + 2), head + body + cut + legend))
    lines: list[str] = []
    room = style.width - len(indent)
    row: list[tuple[int, list[str]]] = []
    for block in blocks + [None]:
        if block is not None and (not row or sum(w + 4 for w, _ in row) + block[0] <= room):
            row.append(block)
            continue
        height = max(len(b) for _, b in row)
        for k in range(height):
            parts = [(b[k] if k < len(b) else "") for _, b in row]
            widths = [w for w, _ in row]
            line = "    ".join(p + " " * max(0, w - _visible(p)) for p, w in zip(parts, widths))
            lines.append((indent + line).rstrip())
        row = [block] if block is not None else []
    return lines


def _visible(text: str) -> int:
    """Columns `text` takes on screen (ANSI codes take none)."""
    return len(_SGR.sub("", text))
