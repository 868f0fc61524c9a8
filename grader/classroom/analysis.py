"""Item analysis of a graded class: per-problem difficulty and discrimination, misconception counts.

Pure functions over plain rows (one per student), so the batch can stream results to disk and
analyse them afterwards without keeping every GradeResult in memory.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import field

from ..records import record

UPPER_LOWER = 0.27  # Kelley's 27% groups for the upper-lower discrimination index
SMALL_CLASS = 30    # below this many students, discrimination and item-rest figures are rough


@record
class StudentRow:
    """One student's graded outcome, as the item analysis needs it."""

    student: str
    scores: Mapping[str, float]            # item id -> points earned
    mistakes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # item id -> mistake ids
    status: str = "graded"                 # graded | syntax error | import failure | timeout | empty | error | grader-error
    written: Mapping[str, str] = field(default_factory=dict)  # written item id -> the student's text
    note: str = ""                          # status error or grader-error: how the grader failed


@record
class ItemStats:
    id: str
    max_score: float
    mean: float                 # mean fraction of the points, 0..1
    distribution: tuple[tuple[float, int], ...]  # (points, how many students), ascending
    discrimination: float | None  # upper 27% mean fraction minus lower 27% mean fraction
    item_rest: float | None       # correlation of the item with the total of the other items
    full_marks: int
    zero: int


@record
class Analysis:
    students: int
    max_total: float
    mean_total: float
    totals: tuple[float, ...]
    items: tuple[ItemStats, ...]
    mistakes: tuple[tuple[str, str, int], ...]   # (item id, mistake id, students who made it)


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(sxx * syy)


def analyse(rows: Sequence[StudentRow], max_scores: Mapping[str, float]) -> Analysis:
    """Statistics over `rows`, for the items in `max_scores` (in that order)."""
    items = list(max_scores)
    totals = [round(sum(r.scores.get(i, 0.0) for i in items), 4) for r in rows]
    order = sorted(range(len(rows)), key=lambda k: (totals[k], rows[k].student))
    group = max(1, round(UPPER_LOWER * len(rows))) if len(rows) >= 2 else 0
    lower, upper = order[:group], order[len(order) - group:]
    stats = []
    for item in items:
        top = max_scores[item] or 1.0
        fractions = [r.scores.get(item, 0.0) / top for r in rows]
        counts = Counter(round(r.scores.get(item, 0.0), 4) for r in rows)
        discrimination = (sum(fractions[k] for k in upper) / group - sum(fractions[k] for k in lower) / group) \
            if group else None
        rest = [t - r.scores.get(item, 0.0) for t, r in zip(totals, rows)]
        stats.append(ItemStats(
            id=item, max_score=max_scores[item], mean=round(sum(fractions) / len(rows), 4) if rows else 0.0,
            distribution=tuple(sorted(counts.items())),
            discrimination=None if discrimination is None else round(discrimination, 4),
            item_rest=None if (c := _pearson(fractions, rest)) is None else round(c, 4),
            full_marks=sum(f >= 1.0 - 1e-9 for f in fractions), zero=sum(f <= 1e-9 for f in fractions)))
    made = Counter((item, mistake) for r in rows for item, ids in r.mistakes.items() for mistake in set(ids))
    position = {item: k for k, item in enumerate(items)}
    mistakes = tuple(sorted(((i, m, n) for (i, m), n in made.items()),
                            key=lambda t: (position.get(t[0], len(items)), -t[2], t[1])))
    return Analysis(students=len(rows), max_total=sum(max_scores.values()),
                    mean_total=round(sum(totals) / len(rows), 4) if rows else 0.0, totals=tuple(totals),
                    items=tuple(stats), mistakes=mistakes)


def flag(item: ItemStats, students: int) -> str:
    """A note on an item that tells nothing about who learned what: everybody or nobody got it."""
    if not students:
        return ""
    if item.full_marks == students:
        return "everybody full marks"
    if item.zero == students:
        return "nobody scored"
    return ""


def mistake_messages(course) -> dict[tuple[str, str], str]:
    """(item id, mistake id) -> the message a student is told, for every named mistake of the
    assignment: each problem's `mistakes`, each quiz choice's and known-wrong value's feedback."""
    messages: dict[tuple[str, str], str] = {}
    for problem in course.problems:
        for mistake in problem.mistakes:
            messages[(problem.id, mistake.id)] = mistake.message
    for item in course.quiz.items if course.quiz else ():
        for source in (*item.choices, *item.wrong):
            if source.mistake:
                messages.setdefault((item.id, source.mistake), source.feedback)
    return messages
