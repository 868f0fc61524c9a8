"""The trained models a student studies: load one, with its heads in the student's own order.

The course ships small attention-only transformers as `.npz` files (numpy only, no pickle): one
layer, `X = E[tokens] + P`, `R = X + concat(heads) W_O`, `logits = R W_U`. At every position
i >= 1 the model names token[i-1] (logits[:, :V]) and token[0] (logits[:, V:]). This module is
part of the student bundle: it reads the files and nothing of the course's code.

    from grader.trained import load_model, evaluation_tokens
    model = load_model("d8_h4_s2", order=3142)    # heads renumbered: your head 1 is file head 3, ...
    tokens = evaluation_tokens()                  # (2048, 8) ints, the sequences every number uses
    X = model.E[tokens[0]] + model.P              # (T, d_model), one sequence
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .records import record

__all__ = ["Trained", "load_model", "evaluation_tokens", "head_order", "models_folder"]

WEIGHTS = ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U")
EVAL_SEED = 20_000   # the evaluation sequences: one draw shared by every model
EVAL_SIZE = 2048
VOCAB, SEQ_LEN = 8, 8


@record
class Trained:
    """One model's weights (float64) with its heads in the order asked for."""

    name: str
    num_heads: int
    E: np.ndarray     # (V, d_model) token embedding
    P: np.ndarray     # (T, d_model) learned positions
    W_Q: np.ndarray   # (d_model, d_model); head k (1-based) is columns (k-1)*d_k : k*d_k
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray   # (d_model, d_model); head k is rows (k-1)*d_k : k*d_k
    W_U: np.ndarray   # (d_model, 2V) readout: columns :V name token[i-1], V: name token[0]

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads


def models_folder() -> Path:
    """Where the .npz files are: ./models (a student bundle), else the course's models/ folder."""
    from .paths import packaged_course
    for folder in (Path.cwd() / "models", packaged_course() / "models"):
        if folder.is_dir():
            return folder
    raise FileNotFoundError("no models/ folder here (run from the folder of your assignment), "
                            "and none in the packaged course")


def head_order(order, num_heads: int) -> list[int]:
    """`order` as 1-based head numbers: None (as in the file), digits (3142) or a sequence.
    Your head k is the file's head order[k - 1]."""
    if order is None:
        return list(range(1, num_heads + 1))
    digits = [int(c) for c in str(order)] if isinstance(order, (int, str)) else [int(k) for k in order]
    if sorted(digits) != list(range(1, num_heads + 1)):
        raise ValueError(f"order must list the heads 1..{num_heads} once each (got {order!r})")
    return digits


def load_model(name: str, order=None, folder: Path | str | None = None) -> Trained:
    """The model `name` (e.g. "d8_h2_s1": d_model 8, 2 heads, training seed 1) with its heads
    renumbered by `order` (see head_order). The renumbering moves W_Q, W_K, W_V columns and W_O
    rows by whole heads: the model computes the same logits, its heads sit at other numbers."""
    path = Path(folder or models_folder()) / f"{name}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"no model {name!r} ({path} does not exist)")
    with np.load(path, allow_pickle=False) as data:
        weights = {w: np.asarray(data[w], dtype=np.float64) for w in WEIGHTS}
        num_heads = int(data["n_heads"])
    d_k = weights["W_Q"].shape[0] // num_heads
    index = np.concatenate([np.arange((k - 1) * d_k, k * d_k) for k in head_order(order, num_heads)])
    for w in ("W_Q", "W_K", "W_V"):
        weights[w] = weights[w][:, index]
    weights["W_O"] = weights["W_O"][index, :]
    return Trained(name=name, num_heads=num_heads, **weights)


def evaluation_tokens() -> np.ndarray:
    """(2048, 8) int tokens: the evaluation sequences every model's numbers are measured on."""
    return np.random.default_rng(EVAL_SEED).integers(0, VOCAB, size=(EVAL_SIZE, SEQ_LEN))
