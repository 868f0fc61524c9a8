"""Frozen data types for an assignment: problems, their cases, comparisons and hints."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from .api import FunctionSpec


class Visibility(Enum):
    """Who sees a case's details: public cases show expected vs got, hidden ones never do."""

    PUBLIC = "public"
    HIDDEN = "hidden"


class CompareKind(Enum):
    """How a student's return value is compared with the expected one."""

    ALLCLOSE = "allclose"          # float arrays (or pairs of them) within rtol/atol
    EQUAL = "equal"                # integers, exactly
    SHAPES = "shapes"              # dict of shape tuples, exactly
    HEAD_PATTERN = "head_pattern"  # (W_Q, W_K) judged by the attention weights they produce


# Defaults chosen so a correct float32 implementation passes (float32 eps is 1.2e-7).
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6


@dataclass(frozen=True)
class Comparison:
    kind: CompareKind
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    pattern: str | None = None     # head_pattern: "previous" or "sink"
    min_weight: float = 0.9        # head_pattern: weight the target position must get


@dataclass(frozen=True)
class Case:
    name: str
    args: Mapping[str, Any]        # parameter name -> literal or generator spec (validated)
    visibility: Visibility
    weight: float = 1.0
    expect: Any = None
    has_expect: bool = False
    raises: str | None = None      # expected exception class name, e.g. "ValueError"
    line: int | None = None
    let: Mapping[str, Any] = field(default_factory=dict)  # integer variables for shapes
    seed: int | None = None

    @property
    def hidden(self) -> bool:
        return self.visibility is Visibility.HIDDEN


@dataclass(frozen=True)
class Mistake:
    """A named misconception: a known-wrong variant of the reference and what to tell the student."""

    id: str
    message: str
    variant: str                   # name of a function in grader.mistakes
    line: int | None = None


@dataclass(frozen=True)
class Problem:
    id: str
    title: str
    points: float
    function: FunctionSpec
    prompt: str
    compare: Comparison
    cases: tuple[Case, ...]
    hints: tuple[str, ...] = ()
    mistakes: tuple[Mistake, ...] = ()
    timeout: float | None = None   # seconds for all of this problem's cases
    path: Path | None = None

    def visible_cases(self, include_hidden: bool) -> tuple[Case, ...]:
        return self.cases if include_hidden else tuple(c for c in self.cases if not c.hidden)


@dataclass(frozen=True)
class Assignment:
    title: str
    root: Path
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def max_score(self) -> float:
        return float(sum(p.points for p in self.problems))

    def problem(self, problem_id: str) -> Problem | None:
        return next((p for p in self.problems if p.id == problem_id), None)
