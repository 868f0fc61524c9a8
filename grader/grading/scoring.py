"""Every scoring rule, the same for `mha grade` and every platform export.

- a problem (or an item graded by cases): its points times the weighted share of its cases
  earned, where a case earns 1 when it passes and else its partial credit (or 0); rounded to
  4 decimals. A submission's score is the sum over the problems and items it counts.

- multiple choice: all or nothing.
- multiple answers ("partial credit with penalty", as Canvas scores it): each true statement
  chosen earns 1/n of the points and each false one chosen takes 1/n away, where n is the
  number of true statements; the total never goes below 0. Moodle computes exactly this from
  per-choice fractions of +100/n and -100/n (clamped to 0..100%), and every 1/n for n <= 10
  is on Moodle's list of grades.
- numeric: right when the number lies in [answer - tolerance, answer + tolerance], the bounds
  rounded outward to 4 decimals (Canvas keeps 4 decimals of a numeric answer, so it can hold
  exactly this range; Moodle gets its midpoint and half-width). The effective tolerance is
  therefore never below 0.0001.

Plain functions of plain data: the student bundle's `mha check` uses them too.
"""
from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

__all__ = ["STEP", "MAX_CHOICES", "decimal", "numeric_range", "in_range", "choices_credit", "choice_fraction",
           "weighted_share", "points_earned"]

STEP = Decimal("0.0001")  # Canvas keeps 4 decimals of a numeric answer
MAX_CHOICES = 10          # Moodle's grade list holds 1/n for n up to 10


def decimal(x: float) -> Decimal:
    """A float as the decimal it was written as (repr: 0.1 stays 0.1)."""
    return Decimal(repr(float(x)))


def numeric_range(answer: float, tolerance: float) -> tuple[Decimal, Decimal]:
    """(low, high): the numbers accepted as `answer`, rounded outward to 4 decimals."""
    exact, width = decimal(answer), decimal(tolerance)
    with localcontext() as context:
        context.prec = 400  # room for any float with 4 decimals (1e308 has 309 digits)
        return ((exact - width).quantize(STEP, rounding=ROUND_FLOOR),
                (exact + width).quantize(STEP, rounding=ROUND_CEILING))


def in_range(got: float, answer: float, tolerance: float) -> bool:
    """Whether `got` is accepted as `answer` (exactly the range that the exports write)."""
    low, high = numeric_range(answer, tolerance)
    return low <= decimal(got) <= high


def choices_credit(chosen: Iterable[str], correct: Iterable[str]) -> Fraction:
    """The share of a multiple-answers item's points earned by the letters `chosen`."""
    chosen, correct = set(chosen), set(correct)
    right, wrong = len(chosen & correct), len(chosen - correct)
    return Fraction(max(0, right - wrong), len(correct)) if correct else Fraction(0)


def choice_fraction(correct: bool, n_correct: int) -> Fraction:
    """A choice's share of the points on platforms that add per-choice shares (Moodle, QTI)."""
    return Fraction(1 if correct else -1, n_correct)


def weighted_share(cases: Iterable[tuple[float, float]]) -> float:
    """The weighted share earned over (weight, earned) pairs; 0 when they weigh nothing."""
    pairs = list(cases)
    total = sum(w for w, _ in pairs)
    return sum(w * e for w, e in pairs) / total if total else 0.0


def points_earned(points: float, share: float) -> float:
    """A problem's score: its points times the share earned, to 4 decimals."""
    return round(points * share, 4)
