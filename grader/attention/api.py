"""The student API: every function a submission may implement, with its parameters.

This table is the single source of truth for argument order, which parameters are arrays,
and what a function returns. The loader validates problem files against it, the runner
uses it to order arguments, and the checks use the return kind to pick a comparison.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind
    default: object = None
    required: bool = True


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    params: tuple[Param, ...]
    returns: ReturnKind
    signature: str
    outputs: tuple[str, ...] = ()  # names of the parts of a tuple result

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def _opt(name: str, kind: ParamKind, default: object) -> Param:
    return Param(name, kind, default=default, required=False)


A, M, I, B = ParamKind.ARRAY, ParamKind.MASK, ParamKind.INT, ParamKind.BOOL

FUNCTIONS: dict[str, FunctionSpec] = {f.name: f for f in (
    FunctionSpec("softmax", (Param("scores", A),), ReturnKind.ARRAY,
                 "softmax(scores) -> ndarray"),
    FunctionSpec("attention_reading", (Param("weights", A), Param("values", A)), ReturnKind.ARRAY,
                 "attention_reading(weights, values) -> ndarray"),
    FunctionSpec("count_routing_distributions",
                 (Param("num_heads", I), Param("d_v", I), _opt("num_queries", I, 1), _opt("num_keys", I, None),
                  _opt("d_k", I, None), _opt("num_layers", I, 1), _opt("batch", I, 1), _opt("causal", B, False)),
                 ReturnKind.INT,
                 "count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, "
                 "num_layers=1, batch=1, causal=False) -> int"),
    FunctionSpec("scaled_dot_product_attention",
                 (Param("Q", A), Param("K", A), Param("V", A), _opt("mask", M, None)),
                 ReturnKind.ARRAY_PAIR,
                 "scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)",
                 outputs=("output", "weights")),
    FunctionSpec("split_heads", (Param("X", A), Param("num_heads", I)), ReturnKind.ARRAY,
                 "split_heads(X, num_heads) -> ndarray"),
    FunctionSpec("merge_heads", (Param("H", A),), ReturnKind.ARRAY,
                 "merge_heads(H) -> ndarray"),
    FunctionSpec("multi_head_attention",
                 (Param("X", A), Param("W_Q", A), Param("W_K", A), Param("W_V", A), Param("W_O", A),
                  Param("num_heads", I), _opt("mask", M, None)),
                 ReturnKind.ARRAY_PAIR,
                 "multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None) -> (output, weights)",
                 outputs=("output", "weights")),
    FunctionSpec("predict_shapes",
                 (Param("seq_len", I), Param("d_model", I), Param("num_heads", I), _opt("src_len", I, None),
                  _opt("batch", I, None), _opt("d_v", I, None), _opt("average_weights", B, True)),
                 ReturnKind.SHAPES,
                 "predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, "
                 "average_weights=True) -> dict"),
    FunctionSpec("parameter_count", (Param("d_model", I), Param("num_heads", I), _opt("bias", B, True)),
                 ReturnKind.INT, "parameter_count(d_model, num_heads, bias=True) -> int"),
    FunctionSpec("previous_token_head", (Param("seq_len", I),), ReturnKind.HEAD,
                 "previous_token_head(seq_len) -> (W_Q, W_K)", outputs=("W_Q", "W_K")),
    FunctionSpec("sink_head", (Param("seq_len", I),), ReturnKind.HEAD,
                 "sink_head(seq_len) -> (W_Q, W_K)", outputs=("W_Q", "W_K")),
    # --- several heads in one layer
    FunctionSpec("multi_head_reading", (Param("weights", A), Param("values", A), Param("W_O", A)),
                 ReturnKind.ARRAY_PAIR, "multi_head_reading(weights, values, W_O) -> (readings, concat, output)",
                 outputs=("readings", "concat", "output")),
    FunctionSpec("head_contributions", (Param("weights", A), Param("values", A), Param("W_O", A)),
                 ReturnKind.ARRAY_PAIR, "head_contributions(weights, values, W_O) -> (contributions, ablated)",
                 outputs=("contributions", "ablated")),
    FunctionSpec("two_head_layer", (Param("seq_len", I),), ReturnKind.HEAD_PAIR,
                 "two_head_layer(seq_len) -> (W_Q, W_K)", outputs=("W_Q", "W_K")),
)}

SHAPE_KEYS = ("q_head", "k_head", "v_head", "scores", "weights", "head_output", "concat", "output",
              "returned_weights")
