"""Known-wrong variants of the reference: each one is a misconception a student may hold.

A problem file names a variant under `mistakes:`; when a case fails, the grader runs the
variants on the same inputs and, if one matches the student's answer, names the mistake.
Each variant has the signature of the function it imitates.
"""
from __future__ import annotations

from typing import Callable

VARIANTS: dict[str, Callable] = {}


def variant(fn: Callable) -> Callable:
    """Register a wrong variant under its function name."""
    VARIANTS[fn.__name__] = fn
    return fn


def has_variant(name: object) -> bool:
    return isinstance(name, str) and name in VARIANTS
