"""Reporters: each turns a GradeResult into text or bytes and never runs anything.

`render(name, result)` picks the renderer; `FORMATS` lists the names the CLI accepts.
"""
from __future__ import annotations

from typing import Callable

from ..results import GradeResult
from . import gradescope, json_report, text

RENDERERS: dict[str, Callable[[GradeResult], str]] = {
    "text": text.render,
    "json": json_report.render,
    "gradescope": gradescope.render,
}
FORMATS = tuple(RENDERERS)


def render(name: str, result: GradeResult) -> str:
    return RENDERERS[name](result)
