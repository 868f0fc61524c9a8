"""The course's own code, named by `code: course.py` in assignment.yaml: trusted, loaded by the
grader (never in a student's process, never in a student bundle).

It holds, by name:
- the reference of every graded function (reference.py), and what each takes and returns
  (`FUNCTIONS` below: the same fields as a problem file's `function:` block);
- the named mistakes: bugs, known-wrong implementations (mistakes.py, mistakes_flagship.py),
  named by a problem's `mistakes[].bug`, and detectors (detectors.py), named by `mistakes[].detector`;
- the quiz's answer functions (quiz_answers.py), named by `answer:` and `wrong[].value`.
"""
from __future__ import annotations

from .detectors import *  # noqa: F401,F403
from .mistakes import *  # noqa: F401,F403
from .mistakes_flagship import *  # noqa: F401,F403
from .model_problems import *  # noqa: F401,F403
from .quiz_answers import *  # noqa: F401,F403
from .reasoning import *  # noqa: F401,F403
from .reference import *  # noqa: F401,F403

# What each graded function takes and returns. `params` kinds: array (float64 ndarray), mask
# (bool ndarray, True = may attend), int, bool. `returns`: array, int, shapes (dict of shape
# tuples), head / head_pair (designed (W_Q, W_K), graded by the pattern they make) or a list of
# names for a tuple of arrays. Optional parameters take their default from the signature.
FUNCTIONS = {
    "softmax": {"signature": "softmax(scores) -> ndarray", "params": {"scores": "array"}, "returns": "array"},
    "attention_reading": {"signature": "attention_reading(weights, values) -> ndarray",
                          "params": {"weights": "array", "values": "array"}, "returns": "array"},
    "count_routing_distributions": {
        "signature": "count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, "
                     "num_layers=1, batch=1, causal=False, num_kv_heads=None) -> int",
        "params": {"num_heads": "int", "d_v": "int", "num_queries": "int", "num_keys": "int", "d_k": "int",
                   "num_layers": "int", "batch": "int", "causal": "bool", "num_kv_heads": "int"},
        "returns": "int"},
    "scaled_dot_product_attention": {
        "signature": "scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)",
        "params": {"Q": "array", "K": "array", "V": "array", "mask": "mask"}, "returns": ["output", "weights"]},
    "split_heads": {"signature": "split_heads(X, num_heads) -> ndarray",
                    "params": {"X": "array", "num_heads": "int"}, "returns": "array"},
    "merge_heads": {"signature": "merge_heads(H) -> ndarray", "params": {"H": "array"}, "returns": "array"},
    "multi_head_attention": {
        "signature": "multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None) -> (output, weights)",
        "params": {"X": "array", "W_Q": "array", "W_K": "array", "W_V": "array", "W_O": "array",
                   "num_heads": "int", "mask": "mask"},
        "returns": ["output", "weights"]},
    "predict_shapes": {
        "signature": "predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, "
                     "average_weights=True) -> dict",
        "params": {"seq_len": "int", "d_model": "int", "num_heads": "int", "src_len": "int", "batch": "int",
                   "d_v": "int", "average_weights": "bool"},
        "returns": "shapes"},
    "parameter_count": {"signature": "parameter_count(d_model, num_heads, bias=True) -> int",
                        "params": {"d_model": "int", "num_heads": "int", "bias": "bool"}, "returns": "int"},
    "previous_token_head": {"signature": "previous_token_head(seq_len) -> (W_Q, W_K)",
                            "params": {"seq_len": "int"}, "returns": "head"},
    "sink_head": {"signature": "sink_head(seq_len) -> (W_Q, W_K)", "params": {"seq_len": "int"}, "returns": "head"},
    "multi_head_reading": {
        "signature": "multi_head_reading(weights, values, W_O) -> (readings, concat, output)",
        "params": {"weights": "array", "values": "array", "W_O": "array"}, "returns": ["readings", "concat", "output"]},
    "head_contributions": {
        "signature": "head_contributions(weights, values, W_O) -> (contributions, ablated)",
        "params": {"weights": "array", "values": "array", "W_O": "array"}, "returns": ["contributions", "ablated"]},
    "two_head_layer": {"signature": "two_head_layer(seq_len) -> (W_Q, W_K)", "params": {"seq_len": "int"},
                       "returns": "head_pair"},
    "one_head_both_designs": {"signature": "one_head_both_designs(seq_len, scales) -> ndarray",
                              "params": {"seq_len": "int", "scales": "array"}, "returns": "array"},
    "padded_batch_attention": {
        "signature": "padded_batch_attention(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None) -> (output, weights)",
        "params": {"X": "array", "W_Q": "array", "W_K": "array", "W_V": "array", "W_O": "array",
                   "num_heads": "int", "key_mask": "mask"},
        "returns": ["output", "weights"]},
}

FUNCTIONS.update(MODEL_FUNCTIONS)  # run_model, head_scores, ablation_deltas (model_problems.py)
