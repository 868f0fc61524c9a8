"""Results of grading: plain frozen data that reporters read. Scoring lives here, once."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": " "}


def one_line(text: str) -> str:
    """Student text (an exception's message...) on one line, inert: line breaks and every other
    control character (a terminal's escape sequences) as visible escapes, so it cannot start a
    line of its own in a report (a fake "Score: 142/142" or "PASS" line) nor drive a terminal."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group()) or (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                                            else f"\\u{ord(m.group()):04x}"), text)


class CaseStatus(Enum):
    PASSED = "passed"
    FAILED = "failed"              # returned a wrong answer
    ERROR = "error"                # raised an exception or returned something unreadable
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    NOT_IMPLEMENTED = "not implemented"
    NOT_ANSWERED = "not answered"  # a quiz item left blank


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome. For hidden cases `detail` and `inputs` are always empty."""

    name: str
    hidden: bool
    weight: float
    status: CaseStatus
    summary: str = ""          # the kind of failure, safe for hidden cases
    detail: str = ""           # expected vs got (public cases only)
    inputs: str = ""           # short input summary (public cases only)
    mistake: str | None = None  # id of the named misconception the answer matches
    mistake_message: str = ""

    @property
    def passed(self) -> bool:
        return self.status is CaseStatus.PASSED


@dataclass(frozen=True)
class ProblemResult:
    id: str
    title: str
    max_score: float
    cases: tuple[CaseResult, ...]
    hints: tuple[str, ...] = ()
    message: str = ""          # problem-level note (not implemented, import failed...)
    stdout: str = ""

    @property
    def fraction(self) -> float:
        total = sum(c.weight for c in self.cases)
        return sum(c.weight for c in self.cases if c.passed) / total if total else 0.0

    @property
    def score(self) -> float:
        return round(self.max_score * self.fraction, 4)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)

    @property
    def mistakes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.mistake for c in self.cases if c.mistake))


@dataclass(frozen=True)
class GradeResult:
    title: str
    submission: str
    problems: tuple[ProblemResult, ...]
    execution_time: float = 0.0
    messages: tuple[str, ...] = field(default_factory=tuple)
    include_hidden: bool = True

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.problems), 4)

    @property
    def max_score(self) -> float:
        return round(sum(p.max_score for p in self.problems), 4)

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0
