"""Reporters: each turns a GradeResult into text or bytes and never runs anything.

`FORMATS` is the one registry of report formats: `mha grade --format` and `mha check --format`
take their choices and help text from it. `render(name, result)` picks the renderer; only the
chosen one is imported (JUnit's XML library alone costs a cold `mha grade` a few milliseconds).
"""
from __future__ import annotations

import importlib

from ..grading.results import GradeResult
from ..records import record


@record
class Format:
    """A report format: its name on the command line, its reporter module and what it writes."""

    name: str
    module: str       # the reporter, a module of this package with `render(result)`
    help: str         # what `mha grade --format NAME` writes
    check: str = ""   # what `mha check --format NAME` prints; empty: `mha check` does not offer it


FORMATS = (
    Format("text", "text", "the text report",
           check="for a terminal (colour unless NO_COLOR; FORCE_COLOR for a pipe)"),
    Format("json", "json_report", "JSON"),
    Format("gradescope", "gradescope", "Gradescope results.json"),
    Format("junit", "junit", "JUnit XML"),
    Format("github", "github", "GitHub Classroom result JSON"),
    Format("html", "html", "an HTML page (the text report with pictures of the attention weights)",
           check="an HTML fragment with pictures of the attention weights (what a notebook's check cell shows)"),
    Format("prairielearn", "prairielearn", "PrairieLearn results.json"),
    Format("autolab", "autolab", "Autolab's feedback, then its scores line (one key per problem)"),
)
BY_NAME = {f.name: f for f in FORMATS}


def names(check: bool = False) -> list[str]:
    """The format names `mha grade` takes, or with `check` those `mha check` takes."""
    return [f.name for f in FORMATS if f.check or not check]


def help_text(check: bool = False) -> str:
    """--format's help, one clause per format, in the registry's order."""
    return "; ".join(f"{f.name}: {f.check if check else f.help}" for f in FORMATS if f.check or not check) + "."


def render(name: str, result: GradeResult) -> str:
    return importlib.import_module(f"{__name__}.{BY_NAME[name].module}").render(result)
