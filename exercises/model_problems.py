"""The trained-model problems: references, named mistakes and quiz answers (course code, trusted).

Shape legend
    N   sequences;  h heads;  T positions (queries and keys);  d_k per-head width
    D   d_model = h * d_k;  V vocabulary (the readout W_U has 2V columns: token[i-1], then token[0])

Problems: `run_model` (the whole model on one sequence, through the student's own
`multi_head_attention`), `head_scores` (previous-token and first-token score of every head, from
its maps) and `ablation_deltas` (the loss change when each head's reading is zeroed before W_O).
The quiz items ask for numbers of the student's own model (models/, loaded with grader.trained.load_model with
the student's head order); their answer functions read the models' index (index.json, written
by models/train.py and checked against the files by tests/test_models.py) and renumber the heads,
so grading runs no model.
"""
from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import numpy as np

from . import reference as ref

__all__ = [
    "run_model", "run_model_without_mask", "run_model_without_positions", "run_model_without_residual",
    "head_scores", "ablation_deltas",
    "scores_from_query_1", "scores_self_not_previous", "scores_swapped",
    "ablation_losses_not_change", "ablation_output_columns", "ablation_rescaled_heads",
    "ablation_previous_only",
    "your_previous_head", "your_previous_head_from_zero", "your_head_delta", "your_other_head_delta",
    "your_head_delta_queries_zeroed", "wide_vs_narrow_accuracy", "wide_vs_narrow_first_only",
    "removable_heads", "needed_heads", "HEAD_ORDERS_4", "HEAD_ORDERS_2", "QUERIES_ZEROED_DELTA",
    "queries_zeroed_delta", "MODEL_FUNCTIONS", "trained_input", "fewest_heads_both", "fewest_heads_width",
    "most_heads_count", "SWEEP_HEADS",
]

MODELS = Path(__file__).resolve().parent / "models"
REMOVABLE_NATS = 0.1  # a head whose removal alone costs less than this is "removable"
# A student's head order, as the digits load_model takes: your head k is the file's head digit k.
HEAD_ORDERS_4 = tuple(int("".join(map(str, p))) for p in itertools.permutations((1, 2, 3, 4)))
HEAD_ORDERS_2 = (12, 21)


# What each graded function takes and returns (the fields of a problem file's `function:` block);
# course.py adds them to the course's FUNCTIONS.
MODEL_FUNCTIONS = {
    "run_model": {
        "signature": "run_model(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads) -> (weights, logits)",
        "params": {"tokens": "array", "E": "array", "P": "array", "W_Q": "array", "W_K": "array", "W_V": "array",
                   "W_O": "array", "W_U": "array", "num_heads": "int"},
        "returns": ["weights", "logits"]},
    "head_scores": {"signature": "head_scores(weights) -> (previous, first)", "params": {"weights": "array"},
                    "returns": ["previous", "first"]},
    "ablation_deltas": {
        "signature": "ablation_deltas(X, readings, W_O, W_U, tokens) -> ndarray",
        "params": {"X": "array", "readings": "array", "W_O": "array", "W_U": "array", "tokens": "array"},
        "returns": "array"},
}


# --- a student's own model, as case inputs ------------------------------------------------------

TRAINED_PARTS = ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U", "sequence", "tokens", "X", "maps", "readings")


@functools.lru_cache(maxsize=128)  # every (model, order) a class can draw: 4 x 2 + 4 x 24
def _student_model(name: str, order: int):
    """A model with its heads in a student's order, loaded once per process (its arrays read-only)."""
    from grader.trained import load_model
    m = load_model(name, order=order, folder=MODELS)
    for w in ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U"):
        getattr(m, w).flags.writeable = False
    return m


@functools.lru_cache(maxsize=1)
def _evaluation_tokens() -> np.ndarray:
    from grader.trained import evaluation_tokens
    tokens = evaluation_tokens()
    tokens.flags.writeable = False
    return tokens


def trained_input(model: str, s: int, o: int, part: str, first: int = 0, count: int = 1) -> np.ndarray:
    """One input of a problem's case, taken from the student's own model `{model}_s{s}` with its heads in
    the order `o` (the digits load_model takes), so that two students find their heads at other numbers.

    part: a weight (E, P, W_Q, W_K, W_V, W_O, W_U), or what the model does on the evaluation sequences
    first .. first + count - 1: `sequence` (T,) the tokens of sequence `first`; `tokens` (N, T);
    `X` (N, T, D) the layer's input; `maps` (N, h, T, T) every head's weights (causal mask);
    `readings` (N, h, T, d_k) every head's reading z^(k). Tokens are floats, as the problems pass them.

    A new array each call, computed once per process for each set of arguments: a class's students
    share 4 models and their head orders, so a batch preparing every student's cases runs each
    model once, not once per student."""
    if part not in TRAINED_PARTS:
        raise ValueError(f"part must be one of {', '.join(TRAINED_PARTS)} (got {part!r})")
    return _trained_input(model, s, o, part, first, count).copy()


@functools.lru_cache(maxsize=1024, typed=True)  # at most 4 x 2 + 4 x 24 (model, order) pairs, a few parts each: about 1.3 MB
def _trained_input(model: str, s: int, o: int, part: str, first: int, count: int) -> np.ndarray:
    """trained_input's array, read-only (each caller gets a copy)."""
    found = _trained_part(model, s, o, part, first, count)
    found.flags.writeable = False
    return found


def _trained_part(model: str, s: int, o: int, part: str, first: int, count: int) -> np.ndarray:
    m = _student_model(f"{model}_s{s}", o)
    if part in ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U"):
        return getattr(m, part).copy()
    tokens = _evaluation_tokens()[first:first + count]                      # (N, T) ints
    if part == "sequence":
        return tokens[0].astype(np.float64)
    if part == "tokens":
        return tokens.astype(np.float64)
    X = m.E[tokens] + m.P[None, :tokens.shape[1]]                          # (N, T, D)
    if part == "X":
        return X
    T = tokens.shape[1]
    mask = np.tril(np.ones((T, T), dtype=bool))
    maps = np.stack([ref.multi_head_attention(x, m.W_Q, m.W_K, m.W_V, m.W_O, m.num_heads, mask)[1] for x in X])
    if part == "maps":
        return maps                                                         # (N, h, T, T)
    values = np.stack([ref.split_heads(x @ m.W_V, m.num_heads) for x in X])  # (N, h, T, d_k)
    return maps @ values


# --- run_model -----------------------------------------------------------------------------------

def _run(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads, *, causal=True, positions=True, residual=True):
    t = np.asarray(tokens)
    if t.ndim != 1 or np.any(t != np.round(t)) or np.any(t < 0) or np.any(t >= np.shape(E)[0]):
        raise ValueError(f"tokens must be a (T,) row of whole numbers below V = {np.shape(E)[0]}")
    t = t.astype(np.int64)
    T = len(t)
    X = np.asarray(E, dtype=np.float64)[t] + (np.asarray(P, dtype=np.float64)[:T] if positions else 0.0)  # (T, D)
    mask = np.tril(np.ones((T, T), dtype=bool)) if causal else None     # query i reads keys j <= i
    out, weights = ref.multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask)   # (T, D), (h, T, T)
    R = X + out if residual else out
    return weights, R @ np.asarray(W_U, dtype=np.float64)                # (h, T, T), (T, 2V)


def run_model(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """tokens (T,), E (V, D), P (T_max, D), W_Q..W_O (D, D), W_U (D, 2V). Returns (weights (h, T, T),
    logits (T, 2V)): X = E[tokens] + P, R = X + multi_head_attention(X, ..., causal mask), R W_U."""
    return _run(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads)


def run_model_without_mask(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """Lets every query read every key, later positions included."""
    return _run(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads, causal=False)


def run_model_without_positions(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """Feeds the token embeddings alone, without the position embedding P."""
    return _run(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads, positions=False)


def run_model_without_residual(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """Reads out the attention layer's output alone, without adding its input X back."""
    return _run(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads, residual=False)


# --- head_scores -------------------------------------------------------------------------------

def _maps(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 3:
        raise ValueError(f"weights must be (N, h, T, T) with T >= 3 (got shape {w.shape})")
    return w


def head_scores(weights):
    """weights (N, h, T, T): every head's map on N sequences. Returns (previous, first), each (h,):
    the mean weight on key i - 1 and on key 0 over the sequences and the queries i = 2 .. T-1
    (query 1's previous key is key 0, and query 0 can only read itself)."""
    w = _maps(weights)
    i = np.arange(2, w.shape[-1])                         # the queries that can tell the keys apart
    previous = w[:, :, i, i - 1].mean(axis=(0, 2))        # (h,)
    first = w[:, :, i, 0].mean(axis=(0, 2))               # (h,)
    return previous, first


def scores_from_query_1(weights):
    """Averages over queries 1 .. T-1: query 1's previous key is key 0, so both scores count it."""
    w = _maps(weights)
    i = np.arange(1, w.shape[-1])
    return w[:, :, i, i - 1].mean(axis=(0, 2)), w[:, :, i, 0].mean(axis=(0, 2))


def scores_self_not_previous(weights):
    """Scores the weight on key i (the query's own position) as the previous-token score."""
    w = _maps(weights)
    i = np.arange(2, w.shape[-1])
    return w[:, :, i, i].mean(axis=(0, 2)), w[:, :, i, 0].mean(axis=(0, 2))


def scores_swapped(weights):
    """Returns the two scores in the wrong order: (first, previous)."""
    previous, first = head_scores(weights)
    return first, previous


# --- ablation_deltas ---------------------------------------------------------------------------

def _ablation_inputs(X, readings, W_O, W_U, tokens):
    X, z = np.asarray(X, dtype=np.float64), np.asarray(readings, dtype=np.float64)
    W_O, W_U = np.asarray(W_O, dtype=np.float64), np.asarray(W_U, dtype=np.float64)
    tokens = np.asarray(tokens)
    if X.ndim != 3 or z.ndim != 4 or z.shape[0] != X.shape[0] or z.shape[2] != X.shape[1]:
        raise ValueError(f"X must be (N, T, D) and readings (N, h, T, d_k) (got {X.shape} and {z.shape})")
    if tokens.shape != X.shape[:2] or np.any(tokens != np.round(tokens)) or W_U.shape[1] % 2:
        raise ValueError("tokens must be (N, T) whole numbers and W_U must have 2V columns")
    return X, z, W_O, W_U, tokens.astype(np.int64)


def _loss(logits: np.ndarray, tokens: np.ndarray, parts: tuple[int, ...] = (0, 1)) -> float:
    """Mean over sequences and positions 1 .. T-1 of the cross-entropies of the asked readouts:
    part 0 (logits[..., :V]) names token[i-1], part 1 (logits[..., V:]) names token[0]."""
    N, T, two_v = logits.shape
    V = two_v // 2
    targets = {0: tokens[:, :-1], 1: np.repeat(tokens[:, :1], T - 1, axis=1)}   # (N, T-1) each
    total = 0.0
    for part in parts:
        z = logits[:, 1:, part * V:(part + 1) * V]                                # (N, T-1, V)
        z = z - z.max(axis=-1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        total += -np.take_along_axis(log_p, targets[part][..., None], axis=-1).mean()
    return float(total)


def _logits(X, z, W_O, W_U, scale) -> np.ndarray:
    N, h, T, d_k = z.shape
    concat = (z * np.asarray(scale, dtype=np.float64)[None, :, None, None]).transpose(0, 2, 1, 3)
    return (X + concat.reshape(N, T, h * d_k) @ W_O) @ W_U      # (N, T, 2V)


def _losses(X, z, W_O, W_U, tokens, parts=(0, 1), kept: float = 1.0):
    h = z.shape[1]
    whole = _loss(_logits(X, z, W_O, W_U, np.ones(h)), tokens, parts)
    removed = []
    for k in range(h):
        scale = np.full(h, kept)
        scale[k] = 0.0
        removed.append(_loss(_logits(X, z, W_O, W_U, scale), tokens, parts))
    return whole, np.array(removed)


def ablation_deltas(X, readings, W_O, W_U, tokens):
    """X (N, T, D) the layer's input (E[tokens] + P), readings (N, h, T, d_k) every head's reading
    z^(k), W_O (D, D), W_U (D, 2V), tokens (N, T). Returns (h,): the loss with head k's reading
    zeroed before W_O minus the loss of the whole model (R = X + concat W_O, logits = R W_U)."""
    whole, removed = _losses(*_ablation_inputs(X, readings, W_O, W_U, tokens))
    return removed - whole


def ablation_losses_not_change(X, readings, W_O, W_U, tokens):
    """Returns the loss with each head removed, not its change from the whole model's loss."""
    return _losses(*_ablation_inputs(X, readings, W_O, W_U, tokens))[1]


def ablation_output_columns(X, readings, W_O, W_U, tokens):
    """Zeroes head k's block of columns of concat W_O (as if each head wrote its own slice)."""
    X, z, W_O, W_U, tokens = _ablation_inputs(X, readings, W_O, W_U, tokens)
    N, h, T, d_k = z.shape
    if W_O.shape[1] != h * d_k:
        raise ValueError("the output has no block of columns per head")
    whole = _loss(_logits(X, z, W_O, W_U, np.ones(h)), tokens)
    deltas = []
    for k in range(h):
        cut = W_O.copy()
        cut[:, k * d_k:(k + 1) * d_k] = 0.0
        deltas.append(_loss(_logits(X, z, cut, W_U, np.ones(h)), tokens) - whole)
    return np.array(deltas)


def ablation_rescaled_heads(X, readings, W_O, W_U, tokens):
    """Scales the remaining heads up by h / (h - 1) after removing one."""
    X, z, W_O, W_U, tokens = _ablation_inputs(X, readings, W_O, W_U, tokens)
    h = z.shape[1]
    if h < 2:
        raise ValueError("indistinguishable with one head")
    whole, removed = _losses(X, z, W_O, W_U, tokens, kept=h / (h - 1))
    return removed - whole


def ablation_previous_only(X, readings, W_O, W_U, tokens):
    """Measures only the previous-token readout's loss (logits[..., :V]), not the sum of both."""
    whole, removed = _losses(*_ablation_inputs(X, readings, W_O, W_U, tokens), parts=(0,))
    return removed - whole


# --- quiz answers: numbers of the student's own model ---------------------------------------------

@functools.cache
def _index() -> dict:
    data = json.loads((MODELS / "index.json").read_text(encoding="utf-8"))
    return {m["name"]: m for m in data["models"]}


def _file_head(order: int, k: int) -> int:
    """The file's 0-based head that is the student's head k (1-based) under `order` (digits)."""
    return int(str(order)[k - 1]) - 1


def _student_head(order: int, file_head: int) -> int:
    """The student's 1-based number of the file's 0-based head `file_head`."""
    return str(order).index(str(file_head + 1)) + 1


def your_previous_head(s4: int, o4: int) -> int:
    """Which of your heads of d8_h4_s{s4} (order o4) has the highest previous-token score."""
    return _student_head(o4, int(np.argmax(_index()[f"d8_h4_s{s4}"]["previous_score"])))


def your_previous_head_from_zero(s4: int, o4: int) -> int:
    """The same head numbered from 0 (a known-wrong answer)."""
    return your_previous_head(s4, o4) - 1


def your_head_delta(s2: int, o2: int, k: int) -> float:
    """Loss change (nats) when your head k of d8_h2_s{s2} (order o2) is removed."""
    return float(_index()[f"d8_h2_s{s2}"]["ablation_delta"][_file_head(o2, k)])


def your_other_head_delta(s2: int, o2: int, k: int) -> float:
    """The other head's loss change (a known-wrong answer: the heads renumbered wrongly)."""
    return your_head_delta(s2, o2, 3 - k)


# Loss change (nats, evaluation sequences) of d8_h2_s{s} when the file's head h (0-based) has its
# W_Q columns zeroed instead of its reading: the head then reads every earlier position equally.
# A table, so that grading computes no forward pass; tests/test_model_problems.py recomputes it.
QUERIES_ZEROED_DELTA = {(0, 0): 12.3122, (0, 1): 5.9666, (1, 0): 4.7996, (1, 1): 3.2521,
                        (2, 0): 7.6818, (2, 1): 6.3015, (3, 0): 8.4242, (3, 1): 28.2964}


def queries_zeroed_delta(s: int, file_head: int) -> float:
    """Recompute one entry of QUERIES_ZEROED_DELTA from the model file (for the tests)."""
    from .models.model import evaluate, load
    model = load(MODELS / f"d8_h2_s{s}.npz")
    params = dict(model.params)
    d_k = model.config.d_k
    params["W_Q"] = params["W_Q"].copy()
    params["W_Q"][:, file_head * d_k:(file_head + 1) * d_k] = 0.0
    return evaluate(params, model.config)["loss"] - evaluate(model.params, model.config)["loss"]


def your_head_delta_queries_zeroed(s2: int, o2: int, k: int) -> float:
    """The loss change when head k's queries are zeroed instead (a known-wrong answer: the head then
    reads every earlier position equally, it is not removed)."""
    return QUERIES_ZEROED_DELTA[(s2, _file_head(o2, k))]


def wide_vs_narrow_accuracy(s2: int) -> float:
    """Accuracy (both tokens right) of d8_h2_s{s2} minus that of d8_h1_s{s2}."""
    return round(_index()[f"d8_h2_s{s2}"]["accuracy"] - _index()[f"d8_h1_s{s2}"]["accuracy"], 6)


def wide_vs_narrow_first_only(s2: int) -> float:
    """The same difference on the first token alone (a known-wrong answer)."""
    return round(_index()[f"d8_h2_s{s2}"]["first_accuracy"] - _index()[f"d8_h1_s{s2}"]["first_accuracy"], 6)


def removable_heads(s: int) -> int:
    """How many heads of d8_h8_s{s} each cost less than REMOVABLE_NATS when removed alone."""
    return int(sum(d < REMOVABLE_NATS for d in _index()[f"d8_h8_s{s}"]["ablation_delta"]))


def needed_heads(s: int) -> int:
    """The heads that are not removable (a known-wrong answer: the complement counted)."""
    return 8 - removable_heads(s)


SWEEP_HEADS = {8: (1, 2, 4, 8), 16: (1, 2)}  # the head counts trained at each d_model: d{D}_h{h}_s{s}
BOTH_RIGHT = 0.99  # "names both tokens": accuracy at or above this; the shipped runs are below 0.8 or above 0.993


def fewest_heads_both(D: int, s2: int) -> int:
    """The fewest heads h whose model d{D}_h{h}_s{s2} names both tokens right at BOTH_RIGHT of the positions."""
    return next(h for h in SWEEP_HEADS[D] if _index()[f"d{D}_h{h}_s{s2}"]["accuracy"] >= BOTH_RIGHT)


def fewest_heads_width(D: int, s2: int) -> int:
    """The head width d_k of that model (a known-wrong answer: the width for the count)."""
    return D // fewest_heads_both(D, s2)


def most_heads_count(D: int) -> int:
    """The most heads trained at d_model = D (a known-wrong answer: "more heads are always better")."""
    return SWEEP_HEADS[D][-1]
