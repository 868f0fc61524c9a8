"""The package's own machine-readable report: every problem and case, hidden details omitted.

A written item is graded by hand, so it has no score here: `"status": "pending"` and
`"score": null` (never 0, which a script summing the report would take for a grade), and the
top-level `pending_points` says how many points are still to be given by hand, outside
`score` and `max_score`."""
from __future__ import annotations

import json

from ..grading.results import GradeResult


def as_dict(result: GradeResult) -> dict:
    return {
        "title": result.title,
        "submission": result.submission,
        "score": result.score,
        "max_score": result.max_score,
        "status": result.status.value,
        "pending_points": result.pending_points,
        "messages": list(result.messages),
        "problems": [
            {
                "id": p.id, "title": p.title, "score": p.score, "max_score": p.max_score,
                "passed": p.passed, "message": p.message, "mistakes": list(p.mistakes),
                "cases": [
                    {"name": c.name, "visibility": "hidden" if c.hidden else "public", "weight": c.weight,
                     "status": c.status.value, "summary": c.summary, "detail": c.detail,
                     "inputs": c.inputs, "mistake": c.mistake}
                    for c in p.cases
                ],
                **({"manual": True, "status": "pending", "score": None, "passed": None, "written": p.written}
                   if p.pending else {}),
            }
            for p in result.problems
        ],
    }


def render(result: GradeResult) -> str:
    return json.dumps(as_dict(result), indent=2, sort_keys=False) + "\n"
