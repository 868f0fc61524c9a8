"""Checking the fields of a YAML mapping, with each error collected at its line.

Shared by the problem loader (`loader`) and the quiz loader (`quiz`): both report every problem
of a file at once, as `path:line: what is wrong (got X)`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError, SpecErrors
from . import generators as gen
from .yamlio import line_of, load_yaml

__all__ = ["Errors", "got", "load_mapping", "number_field", "text_field", "type_name", "unknown_keys"]


class Errors:
    """Collects SpecErrors for one file."""

    def __init__(self, path: Path):
        self.path = path
        self.items: list[SpecError] = []

    def at(self, line: int | None, message: str) -> None:
        self.items.append(SpecError(str(self.path), line, message))


def type_name(value: Any) -> str:
    for kind, name in ((bool, "a boolean"), (int, "an int"), (float, "a number"), (str, "text"),
                       (list, "a list"), (dict, "a mapping"), (type(None), "nothing")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def load_mapping(path: Path, what: str) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping; any problem is raised as SpecErrors."""
    try:
        node = load_yaml(path)
    except SpecError as exc:
        raise SpecErrors([exc]) from None
    if not isinstance(node, dict):
        raise SpecErrors([SpecError(str(path), line_of(node, default=1), f"{what} must be a mapping (got {type_name(node)})")])
    return node


def got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def unknown_keys(node: Mapping[str, Any], allowed: set[str] | frozenset[str], where: str, errors: Errors,
                 aliases: frozenset[str] = frozenset()) -> None:
    """An error for each key of `node` that is neither allowed nor an accepted older name (`aliases`,
    not listed in the message)."""
    for key in node:
        if key not in allowed and key not in aliases:
            errors.at(line_of(node, key), f"unknown key {key!r} in {where} "
                      f"(allowed: {', '.join(sorted(allowed))})")


def number_field(node: Mapping[str, Any], key: str, errors: Errors, *, positive: bool = False,
            minimum: float | None = None, maximum: float | None = None) -> float | None:
    value = node[key]
    if not gen.is_number(value) or not math.isfinite(value):
        errors.at(line_of(node, key), f"{key!r} must be a number (got {got(value)})")
        return None
    if positive and value <= 0:
        errors.at(line_of(node, key), f"{key!r} must be greater than 0 (got {got(value)})")
        return None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        errors.at(line_of(node, key), f"{key!r} must be between {minimum:g} and {maximum:g} (got {got(value)})")
        return None
    return float(value)


def text_field(node: Mapping[str, Any], key: str, errors: Errors) -> str | None:
    value = node[key]
    if not isinstance(value, str) or not value.strip():
        errors.at(line_of(node, key), f"{key!r} must be non-empty text (got {got(value)})")
        return None
    return value
