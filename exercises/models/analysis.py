"""What the shipped models' heads do: attention maps, head scores and roles, ablations (numpy only).

Shape legend: N sequences, h heads, T positions; maps are (N, h, T, T), row i a query, column j a key.

A head's previous-token score is its mean weight on key i - 1, its first-token score its mean weight
on key 0, both over the evaluation sequences and the queries i = 2 .. T-1 (at i = 1 the two keys
are the same position, and query 0 can only read itself). A head whose score is at least
ROLE_THRESHOLD takes that role; the two scores of a head sum to at most 1, so it has at most one.
Ablating a head multiplies its reading by 0 before W_O; its delta is the evaluation loss with the
head removed minus the loss of the whole model.
"""
from __future__ import annotations

import numpy as np

from .model import Model, eval_tokens, evaluate, forward

__all__ = ["ROLE_THRESHOLD", "attention_maps", "head_scores", "head_roles", "ablate", "ablation_deltas",
           "permute_heads", "describe"]

ROLE_THRESHOLD = 0.5


def attention_maps(model: Model, tokens: np.ndarray | None = None) -> np.ndarray:
    """Every head's attention weights (N, h, T, T) on `tokens` (default: the evaluation sequences)."""
    tokens = eval_tokens(model.config) if tokens is None else np.asarray(tokens)
    return forward(model.params, tokens, model.config.n_heads)["A"]


def head_scores(maps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(previous-token score, first-token score) of each head, each (h,), from maps (N, h, T, T)."""
    T = maps.shape[-1]
    if T < 3:
        raise ValueError(f"head scores need at least 3 positions (got {T})")
    queries = np.arange(2, T)
    previous = maps[:, :, queries, queries - 1].mean(axis=(0, 2))   # (h,)
    first = maps[:, :, queries, 0].mean(axis=(0, 2))                # (h,)
    return previous, first


def head_roles(previous: np.ndarray, first: np.ndarray, threshold: float = ROLE_THRESHOLD) -> list[str]:
    """"previous", "first" or "other" for each head, from its two scores."""
    return ["previous" if p >= threshold else "first" if f >= threshold else "other"
            for p, f in zip(previous, first)]


def ablate(model: Model, head: int, tokens: np.ndarray | None = None) -> dict[str, float]:
    """Loss and accuracies of `model` with head `head` (0-based) removed."""
    h = model.config.n_heads
    if not 0 <= head < h:
        raise ValueError(f"head must be in 0..{h - 1} (got {head})")
    mask = np.ones(h)
    mask[head] = 0.0
    return evaluate(model.params, model.config, tokens, mask)


def ablation_deltas(model: Model, tokens: np.ndarray | None = None) -> np.ndarray:
    """(h,) loss change when each head alone is removed (positive: the model needed it)."""
    whole = evaluate(model.params, model.config, tokens)["loss"]
    return np.array([ablate(model, i, tokens)["loss"] - whole for i in range(model.config.n_heads)])


def permute_heads(model: Model, order) -> Model:
    """The same function with its heads renumbered: new head k is old head order[k]. W_Q, W_K and
    W_V columns and W_O rows move by whole heads; outputs are unchanged, maps are reordered."""
    h, d_k = model.config.n_heads, model.config.d_k
    order = [int(i) for i in order]
    if sorted(order) != list(range(h)):
        raise ValueError(f"order must be a permutation of 0..{h - 1} (got {order})")
    index = np.concatenate([np.arange(i * d_k, (i + 1) * d_k) for i in order])   # (d_model,)
    params = dict(model.params)
    for name in ("W_Q", "W_K", "W_V"):
        params[name] = model.params[name][:, index]
    params["W_O"] = model.params["W_O"][index, :]
    return Model(model.config, params, model.seed, model.name)


def describe(model: Model, family: str, final_train_loss: float) -> dict:
    """The index entry of a model: configuration, seed, evaluation results, head roles, ablations."""
    c = model.config
    previous, first = head_scores(attention_maps(model))
    deltas = ablation_deltas(model)
    result = evaluate(model.params, c)
    return {
        "name": model.name, "file": f"{model.name}.npz", "family": family, "seed": model.seed,
        "vocab": c.vocab, "seq_len": c.seq_len, "d_model": c.d_model, "n_heads": c.n_heads, "d_k": c.d_k,
        "parameters": c.parameter_count(),
        "final_train_loss": round(final_train_loss, 6),
        **{k: round(v, 6) for k, v in result.items()},
        "previous_score": [round(float(x), 4) for x in previous],
        "first_score": [round(float(x), 4) for x in first],
        "roles": head_roles(previous, first),
        "ablation_delta": [round(float(x), 4) for x in deltas],
    }
