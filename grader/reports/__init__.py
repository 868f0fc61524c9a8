"""Reporters: each turns a GradeResult into text or bytes and never runs anything.

`render(name, result)` picks the renderer; `FORMATS` lists the names the CLI accepts. Only the
chosen one is imported (JUnit's XML library alone costs a cold `mha grade` a few milliseconds).
"""
from __future__ import annotations

import importlib

from ..grading.results import GradeResult

MODULES = {"text": "text", "json": "json_report", "gradescope": "gradescope", "junit": "junit", "github": "github",
           "html": "html", "prairielearn": "prairielearn",
           "autolab": "autolab"}
FORMATS = tuple(MODULES)


def render(name: str, result: GradeResult) -> str:
    return importlib.import_module(f"{__name__}.{MODULES[name]}").render(result)
