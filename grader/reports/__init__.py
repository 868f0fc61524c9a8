"""Reporters: each turns a GradeResult into text or bytes and never runs anything.

`render(name, result)` picks the renderer; `FORMATS` lists the names the CLI accepts.
"""
from __future__ import annotations

from typing import Callable

from ..results import GradeResult
from . import github, gradescope, json_report, junit, text

RENDERERS: dict[str, Callable[[GradeResult], str]] = {
    "text": text.render,
    "json": json_report.render,
    "gradescope": gradescope.render,
    "junit": junit.render,
    "github": github.render,
}
FORMATS = tuple(RENDERERS)


def render(name: str, result: GradeResult) -> str:
    return RENDERERS[name](result)
