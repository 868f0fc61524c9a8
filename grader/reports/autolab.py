"""Autolab: the feedback a student reads, then the scores line Tango takes as the result.

Autolab's Tango shows a job's output as feedback and reads its last line as the result:
`{"scores": {"<problem>": <points>, ...}}`, one key per problem of the assessment. Here each
coding problem is a key and the auto-graded quiz items are one key, `quiz`; written items are
graded by hand in Autolab and never appear in the line. The text above it is the text report,
in which hidden cases are counted, never shown.
"""
from __future__ import annotations

import json

from ..grading.results import GradeResult
from .text import render as text_report

__all__ = ["QUIZ", "render", "scores"]

QUIZ = "quiz"  # the key of the auto-graded quiz items, together


def scores(result: GradeResult) -> dict[str, float]:
    """Points per Autolab problem: each coding problem by id, then the quiz's auto-graded items as one."""
    found = {p.id: p.score for p in result.problems if p.counted and not p.quiz}
    quiz = [p for p in result.problems if p.counted and p.quiz and not p.manual]
    if quiz:
        found[QUIZ] = round(sum(p.score for p in quiz), 4)
    return found


def render(result: GradeResult) -> str:
    return text_report(result).rstrip("\n") + "\n" + json.dumps({"scores": scores(result)}) + "\n"
