"""Submissions built from the model answers and the stubs, for the export tests."""
from __future__ import annotations

from pathlib import Path

from grader.exports.pysource import split_module

from .conftest import EXERCISES, SOLUTIONS

HALF_DONE = ("softmax", "attention_reading", "count_routing_distributions", "split_heads", "merge_heads")
HALF_ANSWERS = "distributions_one_head: 1\ntwo_relations: a\nattention_budget: 0.15\npruning: a\n"


def solution_functions() -> dict[str, str]:
    return split_module((SOLUTIONS / "attention.py").read_text()).functions


def half_done_source() -> str:
    """The model answers for HALF_DONE, the stubs for every other function."""
    solutions = split_module((SOLUTIONS / "attention.py").read_text())
    stubs = split_module((EXERCISES / "attention.py").read_text())
    functions = [solutions.functions[name] if name in HALF_DONE else source
                 for name, source in stubs.functions.items()]
    return solutions.imports + "\n\n\n" + "\n\n\n".join(functions) + "\n"


def write_half_done(folder: Path) -> Path:
    """attention.py (half the problems) and answers.yaml (some right, some wrong, some blank)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.yaml").write_text(HALF_ANSWERS)
    path = folder / "attention.py"
    path.write_text(half_done_source())
    return path
