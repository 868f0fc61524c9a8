"""What a graded function takes and returns: the types of a course's declarations.

A course declares each function it grades (a problem file's `function:` block, or the `FUNCTIONS`
mapping of its code module: grader/course/code.py reads both). The loader validates
problem files against the declaration, the runner uses it to order arguments, and the checks
use the return kind to pick a comparison.
"""
from __future__ import annotations

from enum import Enum

from ..records import record


class ParamKind(Enum):
    """How a parameter's YAML value is turned into a Python value."""

    ARRAY = "array"  # float64 ndarray
    MASK = "mask"    # bool ndarray, True = may attend
    INT = "int"
    BOOL = "bool"


class ReturnKind(Enum):
    """What a function returns, which picks the default comparison."""

    ARRAY = "array"            # one float array
    ARRAY_PAIR = "array_pair"  # (output, weights)
    INT = "int"
    SHAPES = "shapes"          # dict of shape tuples
    HEAD = "head"              # (W_Q, W_K) graded by the attention pattern they make
    HEAD_PAIR = "head_pair"    # (W_Q, W_K) of a two-head layer, graded by each head's pattern


@record
class Param:
    name: str
    kind: ParamKind
    default: object = None
    required: bool = True


@record
class FunctionSpec:
    name: str
    params: tuple[Param, ...]
    returns: ReturnKind
    signature: str
    outputs: tuple[str, ...] = ()  # names of the parts of a tuple result

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)
