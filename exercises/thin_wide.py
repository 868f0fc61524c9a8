"""Two problems on what a head's width buys: a head of width 1 (`thin_head`) and one wide head that
names two tokens with one pattern (`one_wide_head`). References, named mistakes and case inputs
(course code, trusted).

Shape legend
    T   positions (queries and keys of one sequence);  N sequences;  V vocabulary

`thin_head`: a head of width 1 scores query i against key j as q_i k_j, two scalars. For q_i > 0 the
largest score is at the largest key query i may see, for q_i < 0 at the smallest, and q_i = 0 gives
no preference: whatever its query, a query can prefer only one of two keys.

`one_wide_head`: the shipped single heads of width 16 (d16_h1_s*) split their weight about 0.50 /
0.48 between key i - 1 and key 0, and which of the two gets more depends on the tokens those keys
hold: the head ranks the tokens, and the key holding the higher-ranked one wins.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import reference as ref

__all__ = [
    "THIN_WIDE_FUNCTIONS",
    "thin_head", "thin_head_largest_abs", "thin_head_largest_only", "thin_head_mask_ignored",
    "thin_head_keys",
    "one_wide_head", "one_wide_head_top_weight", "one_wide_head_from_query_1",
    "one_wide_head_order_reversed", "one_head_input", "ranked_head_input",
]

# What each graded function takes and returns (the fields of a problem file's `function:` block);
# course.py adds them to the course's FUNCTIONS.
THIN_WIDE_FUNCTIONS = {
    "thin_head": {"signature": "thin_head(k, mask=None) -> (reach, previous)",
                  "params": {"k": "array", "mask": "mask"}, "returns": ["reach", "previous"]},
    "one_wide_head": {"signature": "one_wide_head(weights, tokens, vocab) -> (split, order)",
                      "params": {"weights": "array", "tokens": "array", "vocab": "int"},
                      "returns": ["split", "order"]},
}


# --- thin_head -----------------------------------------------------------------------------------

def _thin_inputs(k, mask):
    k = np.asarray(k, dtype=np.float64)
    if k.ndim != 1:
        raise ValueError(f"k must be a (T,) row of key values (got shape {k.shape})")
    T = k.shape[0]
    allowed = np.ones((T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if allowed.shape != (T, T):
        raise ValueError(f"mask must be ({T}, {T}) for {T} keys (got shape {allowed.shape})")
    return k, allowed


def _thin_answer(reach: np.ndarray):
    """(reach, previous): previous is 1 when every query i >= 1 can prefer key i - 1."""
    T = reach.shape[0]
    previous = all(reach[i, i - 1] == 1 for i in range(1, T))
    return reach, np.float64(previous)


def _reach(k, allowed, pick) -> np.ndarray:
    """(T, T) 0/1: reach[i, j] = 1 for each key j that `pick(values)` names among query i's keys."""
    T = k.shape[0]
    reach = np.zeros((T, T))
    for i in range(T):
        keys = np.flatnonzero(allowed[i])
        if keys.size == 0:
            continue
        for j in pick(k[keys]):
            reach[i, keys[j]] = 1.0
    return reach


def _strict_extremes(values: np.ndarray) -> list[int]:
    """The largest and the smallest value's index, each only when no other value ties with it."""
    found = []
    for best in (values.max(), values.min()):
        where = np.flatnonzero(values == best)
        if where.size == 1:
            found.append(int(where[0]))
    return found


def thin_head(k, mask=None):
    """k (T,): a width-1 head's key values; mask (T, T) bool, True = may attend (None: every key).
    Return (reach (T, T), previous ()): reach[i, j] = 1 when some query value q makes key j query
    i's strictly largest weight; previous = 1 when every query i >= 1 can so prefer key i - 1."""
    k, allowed = _thin_inputs(k, mask)
    # q > 0 ranks the keys as k does, q < 0 reverses the ranking, q = 0 ties them all.
    return _thin_answer(_reach(k, allowed, _strict_extremes))


def thin_head_largest_abs(k, mask=None):
    """Marks only the key of largest |k|, as if the sign of q did not matter."""
    k, allowed = _thin_inputs(k, mask)
    return _thin_answer(_reach(k, allowed, lambda v: [int(np.argmax(np.abs(v)))]))


def thin_head_largest_only(k, mask=None):
    """Marks only the largest key: forgets the queries with q < 0, which prefer the smallest."""
    k, allowed = _thin_inputs(k, mask)
    return _thin_answer(_reach(k, allowed, lambda v: [int(np.argmax(v))]))


def thin_head_mask_ignored(k, mask=None):
    """Takes the largest and smallest of every key, as if no key were hidden from the query."""
    k, _ = _thin_inputs(k, mask)
    if mask is None or np.all(mask):
        raise ValueError("without a mask this mistake is the right answer")
    return _thin_answer(_reach(k, np.ones((k.shape[0],) * 2, dtype=bool), _strict_extremes))


def thin_head_keys(s: int, head: int, first: int = 0) -> np.ndarray:
    """The keys (T,) of head `head` (1-based, width 1) of the model d8_h8_s{s} on evaluation sequence `first`."""
    from .model_problems import _evaluation_tokens, _student_model
    m = _student_model(f"d8_h8_s{s}", 12345678)
    if not 1 <= head <= m.num_heads:
        raise ValueError(f"head must be in 1..{m.num_heads} (got {head})")
    tokens = _evaluation_tokens()[first]                                    # (T,)
    X = m.E[tokens] + m.P[:tokens.shape[0]]                                 # (T, D)
    return X @ m.W_K[:, head - 1]                                           # (T,): d_k = 1


# --- one_wide_head -------------------------------------------------------------------------------

def _wide_inputs(weights, tokens, vocab):
    W = np.asarray(weights, dtype=np.float64)
    t = np.asarray(tokens, dtype=np.float64)
    if W.ndim != 3 or W.shape[1] != W.shape[2] or W.shape[-1] < 3:
        raise ValueError(f"weights must be (N, T, T) with T >= 3 (got shape {W.shape})")
    if t.shape != W.shape[:2] or np.any(t != np.round(t)) or np.any(t < 0) or np.any(t >= vocab):
        raise ValueError(f"tokens must be ({W.shape[0]}, {W.shape[1]}) whole numbers below vocab = {vocab}")
    return W, t.astype(int)


def _pairs(W, tokens, first_query=2):
    """Weight on key i - 1 and on key 0, and the tokens those keys hold, for queries first_query .. T-1."""
    q = np.arange(first_query, W.shape[-1])
    prev, first = W[:, q, q - 1], W[:, q, 0]                                # (N, T - first_query)
    t_prev = tokens[:, q - 1]
    t_first = np.broadcast_to(tokens[:, :1], t_prev.shape)
    return prev, first, t_prev, t_first


def _order(prev, first, t_prev, t_first, vocab) -> np.ndarray:
    """The tokens, from the one whose key wins most of the pair's weight to the one that wins least."""
    differ = t_prev != t_first
    margin = prev - first                                                   # what key i - 1 wins over key 0
    favour = np.zeros(vocab)
    for t in range(vocab):
        won = np.concatenate([margin[differ & (t_prev == t)], -margin[differ & (t_first == t)]])
        favour[t] = won.mean() if won.size else 0.0
    return np.argsort(-favour, kind="stable").astype(np.float64)


def one_wide_head(weights, tokens, vocab):
    """weights (N, T, T): one head's maps on N sequences; tokens (N, T); vocab V.
    Return (split (2,), order (V,)): the mean weight on key i - 1 and on key 0 over queries
    i = 2 .. T-1, and the tokens from the one the head favours most (its key wins the larger
    share of the two keys' weight) to the one it favours least."""
    W, t = _wide_inputs(weights, tokens, vocab)
    prev, first, t_prev, t_first = _pairs(W, t)
    split = np.array([prev.mean(), first.mean()])
    return split, _order(prev, first, t_prev, t_first, vocab)


def one_wide_head_top_weight(weights, tokens, vocab):
    """Counts a key's weight only when it is its row's top weight: reads the winner, not the split."""
    W, t = _wide_inputs(weights, tokens, vocab)
    prev, first, t_prev, t_first = _pairs(W, t)
    q = np.arange(2, W.shape[-1])
    top = W[:, q, :].max(axis=-1)                                           # (N, T - 2)
    split = np.array([np.where(prev == top, prev, 0.0).mean(), np.where(first == top, first, 0.0).mean()])
    return split, _order(prev, first, t_prev, t_first, vocab)


def one_wide_head_from_query_1(weights, tokens, vocab):
    """Averages from query 1, whose key i - 1 is key 0: its weight counts towards both."""
    W, t = _wide_inputs(weights, tokens, vocab)
    prev, first, t_prev, t_first = _pairs(W, t, first_query=1)
    return np.array([prev.mean(), first.mean()]), _order(prev, first, t_prev, t_first, vocab)


def one_wide_head_order_reversed(weights, tokens, vocab):
    """Lists the tokens from the least favoured to the most favoured."""
    split, order = one_wide_head(weights, tokens, vocab)
    return split, order[::-1].copy()


def one_head_input(model: str, s: int, part: str, head: int = 1, first: int = 0, count: int = 1) -> np.ndarray:
    """From the model `{model}_s{s}` on evaluation sequences first .. first + count - 1: `maps`
    (N, T, T) of head `head` (1-based, causal mask), or `tokens` (N, T) as floats."""
    from .model_problems import _evaluation_tokens, _student_model
    tokens = _evaluation_tokens()[first:first + count]                      # (N, T) ints
    if part == "tokens":
        return tokens.astype(np.float64)
    if part != "maps":
        raise ValueError(f"part must be maps or tokens (got {part!r})")
    heads = int(model.split("_h")[1])
    m = _student_model(f"{model}_s{s}", int("123456789"[:heads]))          # the file's own head order
    if not 1 <= head <= m.num_heads:
        raise ValueError(f"head must be in 1..{m.num_heads} (got {head})")
    return _every_head(model, s, first, count).copy()[:, head - 1]          # a new array each call


@functools.lru_cache(maxsize=32, typed=True)  # a class draws 4 seeds of one model, 2 ranges: under 1 MB
def _every_head(model: str, s: int, first: int, count: int) -> np.ndarray:
    """Every head's weights (N, h, T, T) of `{model}_s{s}` on those sequences, read-only: computed
    once per process, so a batch preparing every student's cases runs each model once."""
    from .model_problems import _evaluation_tokens, _student_model
    tokens = _evaluation_tokens()[first:first + count]                      # (N, T) ints
    heads = int(model.split("_h")[1])
    m = _student_model(f"{model}_s{s}", int("123456789"[:heads]))          # the file's own head order
    N, T = tokens.shape
    X = m.E[tokens] + m.P[None, :T]                                         # (N, T, D)
    d_k = X.shape[-1] // m.num_heads

    def split(W) -> np.ndarray:  # (N, T, D) @ (D, D) -> (N, h, T, d_k): ref.split_heads on every sequence
        return (X @ np.asarray(W, dtype=np.float64)).reshape(N, T, m.num_heads, d_k).transpose(0, 2, 1, 3)

    # ref.multi_head_attention's weights, every sequence at once (the values and W_O play no part in
    # them): the same arithmetic in the same order, so the same numbers, 25x sooner than one call each
    q, k = split(m.W_Q), split(m.W_K)
    scores = np.where(ref.causal_mask(T), q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k), -np.inf)
    maps = ref.softmax(scores)
    maps.flags.writeable = False
    return maps


def ranked_head_input(seed: int, part: str, count: int = 128, seq_len: int = 6, vocab: int = 5) -> np.ndarray:
    """A made-up head like the shipped wide ones: each query splits its weight between key i - 1 and
    key 0, and leans towards the key whose token ranks higher in a ranking drawn from `seed`.
    part: `maps` (count, seq_len, seq_len) or `tokens` (count, seq_len) as floats."""
    rng = np.random.default_rng([seed, 38])
    rank = rng.permutation(vocab).astype(np.float64)                       # rank[t]: how much the head likes t
    tokens = rng.integers(0, vocab, size=(count, seq_len))
    if part == "tokens":
        return tokens.astype(np.float64)
    if part != "maps":
        raise ValueError(f"part must be maps or tokens (got {part!r})")
    i = np.arange(seq_len)
    near = (i[None, :] == i[:, None] - 1) | (i[None, :] == 0)               # (T, T): key i - 1 and key 0
    # a slight lean towards key i - 1, so that two keys holding one token never tie exactly
    scores = 5.0 * near[None] + 0.05 * (i[None, :] == i[:, None] - 1)[None] + 0.4 * rank[tokens][:, None, :]
    scores = np.where(np.tril(np.ones((seq_len, seq_len), dtype=bool))[None], scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
