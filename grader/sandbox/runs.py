"""What one run of student code came to: a case's status, value or error, and a failed import."""
from __future__ import annotations

from enum import Enum
from typing import Any

from ..records import record
from .student_text import StudentText

__all__ = ["CaseRun", "LoadFailure", "RunStatus", "StudentError"]


class RunStatus(Enum):
    RETURNED = "returned"
    RAISED = "raised"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    NO_FUNCTION = "no_function"
    LOAD_FAILED = "load_failed"
    BAD_RESULT = "bad_result"


@record
class StudentError:
    """An exception student code raised, as the student process described it (student_text)."""

    type: StudentText
    bases: tuple[StudentText, ...]  # the exception class and its bases, by name
    message: StudentText
    where: StudentText | None = None


@record
class CaseRun:
    """What happened when the student's function ran on one case."""

    status: RunStatus
    value: Any = None
    error: StudentError | None = None
    detail: str = ""
    seconds: float = 0.0


@record
class LoadFailure:
    kind: StudentText
    message: StudentText
    line: int | None = None
    column: int | None = None  # syntax errors: 1-based offset in the line
