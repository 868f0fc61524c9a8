"""A one-layer attention-only transformer in float64 numpy: forward pass, hand-written gradients, files.

Shape legend
    N        sequences in a batch
    T        positions per sequence (seq_len)
    V        vocabulary; the model's 2V logits are two V-way predictions (previous token, first token)
    D        model width (d_model);  h heads;  d_k = D // h (per-head query/key/value width)

The layer is the one the exercises' `multi_head_attention(X, W_Q, W_K, W_V, W_O, h, mask)` computes:
head i reads columns i*d_k:(i+1)*d_k of X W_Q, X W_K, X W_V, and rows i*d_k:(i+1)*d_k of W_O
take its reading back to width D. The whole model is

    X = E[tokens] + P                      token embedding plus learned positional embedding
    R = X + concat_i(softmax(Q_i K_i^T / sqrt(d_k) + causal) V_i) W_O
    logits = R W_U                         (..., 2V): columns :V name token[i-1], V: name token[0]

No biases, no layer norm, no MLP: what the model computes, its heads have to route.
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TASK", "FORMAT", "WEIGHTS", "EVAL_SEED", "EVAL_SIZE", "Config", "Model", "targets", "forward",
           "cross_entropy", "loss_and_grads", "sample", "eval_tokens", "evaluate", "init_params", "save", "load",
           "read_index"]

TASK = "previous_and_first"  # at position i >= 1 the model names two tokens: token[i-1] and token[0]
FORMAT = 1                   # layout of the .npz files; a reader refuses any other
WEIGHTS = ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U")
EVAL_SEED = 20_000   # the evaluation sequences: one draw shared by every model
EVAL_SIZE = 2048


@dataclass(frozen=True)
class Config:
    """What a model is: its task sizes, its width and head count."""

    vocab: int = 8
    seq_len: int = 8
    d_model: int = 8
    n_heads: int = 1

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads (got d_model={self.d_model}, "
                             f"n_heads={self.n_heads})")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    @property
    def outputs(self) -> int:
        return 2 * self.vocab

    def shapes(self) -> dict[str, tuple[int, int]]:
        D = self.d_model
        return {"E": (self.vocab, D), "P": (self.seq_len, D), "W_Q": (D, D), "W_K": (D, D),
                "W_V": (D, D), "W_O": (D, D), "W_U": (D, self.outputs)}

    def parameter_count(self) -> int:
        return sum(a * b for a, b in self.shapes().values())


@dataclass(frozen=True)
class Model:
    """A trained model: its configuration, its weights (float64) and what it was trained from."""

    config: Config
    params: dict[str, np.ndarray]
    seed: int
    name: str = ""


def targets(tokens: np.ndarray) -> np.ndarray:
    """(N, T) tokens -> (N, T, 2): at position i >= 1, (token[i-1], token[0]); -1 at i = 0."""
    tokens = np.asarray(tokens)
    y = np.full(tokens.shape + (2,), -1, dtype=np.int64)
    y[:, 1:, 0] = tokens[:, :-1]
    y[:, 1:, 1] = tokens[:, :1]
    return y


def _causal(T: int) -> np.ndarray:
    return np.tril(np.ones((T, T), dtype=bool))  # (T, T), True where query i may read key j <= i


def _split(x: np.ndarray, h: int) -> np.ndarray:
    N, T, D = x.shape
    return x.reshape(N, T, h, D // h).transpose(0, 2, 1, 3)  # (N, h, T, d_k)


def _merge(x: np.ndarray) -> np.ndarray:
    N, h, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(N, T, h * d)  # (N, T, D)


def forward(params: dict[str, np.ndarray], tokens: np.ndarray, n_heads: int,
            head_mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Run the model on (N, T) int tokens. `head_mask` (h,) scales each head's reading before W_O
    (0 removes a head). Returns every intermediate the gradients need: logits (N, T, C) and the
    attention weights (N, h, T, T) among them."""
    tokens = np.asarray(tokens)
    T = tokens.shape[1]
    X = params["E"][tokens] + params["P"][:T]                  # (N, T, D)
    Q = _split(X @ params["W_Q"], n_heads)                     # (N, h, T, d_k)
    K = _split(X @ params["W_K"], n_heads)                     # (N, h, T, d_k)
    Vh = _split(X @ params["W_V"], n_heads)                    # (N, h, T, d_k)
    scale = 1.0 / np.sqrt(Q.shape[-1])
    S = np.where(_causal(T), Q @ K.transpose(0, 1, 3, 2) * scale, -np.inf)  # (N, h, T, T)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=-1, keepdims=True)                         # one distribution per query per head
    H = A @ Vh                                                 # (N, h, T, d_k)
    if head_mask is not None:
        H = H * np.asarray(head_mask, dtype=np.float64)[None, :, None, None]
    Z = _merge(H)                                              # (N, T, D)
    R = X + Z @ params["W_O"]                                  # residual
    logits = R @ params["W_U"]                                 # (N, T, C)
    return {"X": X, "Q": Q, "K": K, "V": Vh, "A": A, "H": H, "Z": Z, "R": R, "logits": logits,
            "scale": np.float64(scale)}


def cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Loss and its gradient by the logits (N, T, 2V): at every position with targets y (N, T, 2)
    >= 0, the sum of the two V-way softmax cross-entropies, averaged over those positions."""
    N, T, two_v = logits.shape
    parts = logits.reshape(N, T, 2, two_v // 2)         # (N, T, 2, V): one softmax per part
    keep = y >= 0                                       # (N, T, 2)
    safe = np.where(keep, y, 0)[..., None]              # (N, T, 2, 1), any class where nothing is asked
    shifted = parts - parts.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    count = keep[..., 0].sum()                          # positions asked
    loss = -(np.take_along_axis(log_p, safe, axis=-1)[..., 0] * keep).sum() / count
    grad = np.exp(log_p)                                # softmax - one_hot(y), over the kept positions
    np.put_along_axis(grad, safe, np.take_along_axis(grad, safe, axis=-1) - 1.0, axis=-1)
    grad *= keep[..., None] / count
    return float(loss), grad.reshape(N, T, two_v)


def loss_and_grads(params: dict[str, np.ndarray], tokens: np.ndarray, n_heads: int
                   ) -> tuple[float, dict[str, np.ndarray]]:
    """Cross-entropy of the model on `tokens` and its gradient by every weight, by the chain rule."""
    tokens = np.asarray(tokens)
    f = forward(params, tokens, n_heads)
    loss, dlogits = cross_entropy(f["logits"], targets(tokens))             # (N, T, 2V)
    N, T, D = f["X"].shape
    def rows(a: np.ndarray) -> np.ndarray:
        return a.reshape(N * T, a.shape[-1])                                # (N*T, width)

    g = {"W_U": rows(f["R"]).T @ rows(dlogits)}
    dR = dlogits @ params["W_U"].T                                          # (N, T, D)
    g["W_O"] = rows(f["Z"]).T @ rows(dR)
    dH = _split(dR @ params["W_O"].T, n_heads)                              # (N, h, T, d_k)
    A = f["A"]
    dA = dH @ f["V"].transpose(0, 1, 3, 2)                                  # (N, h, T, T)
    dV = A.transpose(0, 1, 3, 2) @ dH                                       # (N, h, T, d_k)
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True)) * f["scale"]      # masked entries: A = 0
    dQ = dS @ f["K"]                                                        # (N, h, T, d_k)
    dK = dS.transpose(0, 1, 3, 2) @ f["Q"]                                  # (N, h, T, d_k)
    dX = dR.copy()                                                          # the residual path
    for name, d in (("W_Q", dQ), ("W_K", dK), ("W_V", dV)):
        d = _merge(d)                                                       # (N, T, D)
        g[name] = rows(f["X"]).T @ rows(d)
        dX += d @ params[name].T
    g["P"] = np.zeros_like(params["P"])
    g["P"][:T] = dX.sum(axis=0)
    g["E"] = np.zeros_like(params["E"])
    np.add.at(g["E"], tokens.reshape(-1), dX.reshape(-1, D))
    return loss, g


def sample(rng: np.random.Generator, n: int, config: Config) -> np.ndarray:
    """(n, T) tokens drawn uniformly from the vocabulary."""
    return rng.integers(0, config.vocab, size=(n, config.seq_len))


def eval_tokens(config: Config) -> np.ndarray:
    """The evaluation sequences every model of this task size is measured on."""
    return sample(np.random.default_rng(EVAL_SEED), EVAL_SIZE, config)


def evaluate(params: dict[str, np.ndarray], config: Config, tokens: np.ndarray | None = None,
             head_mask: np.ndarray | None = None) -> dict[str, float]:
    """Loss and accuracy on the evaluation sequences (positions 1..T-1, `head_mask` as in `forward`):
    accuracy counts a position right when both its tokens are named right; previous_accuracy and
    first_accuracy count each half."""
    tokens = eval_tokens(config) if tokens is None else tokens
    logits = forward(params, tokens, config.n_heads, head_mask)["logits"]
    y = targets(tokens)[:, 1:]                                          # (N, T-1, 2)
    loss, _ = cross_entropy(logits[:, 1:], y)
    N, T1, _ = y.shape
    right = logits[:, 1:].reshape(N, T1, 2, config.vocab).argmax(axis=-1) == y   # (N, T-1, 2)
    return {"loss": loss,
            "accuracy": float(right.all(axis=-1).mean()),
            "previous_accuracy": float(right[..., 0].mean()),
            "first_accuracy": float(right[..., 1].mean())}


def init_params(config: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Gaussian weights, each scaled by 1/sqrt(its input width); embeddings of unit scale."""
    params = {}
    for name, shape in config.shapes().items():
        std = 1.0 if name in ("E", "P") else 1.0 / np.sqrt(shape[0])
        params[name] = rng.standard_normal(shape) * std
    return params


def save(path: Path, model: Model, dtype=np.float32) -> None:
    """One .npz: the weights (as `dtype`) and the configuration as plain integers and strings,
    so np.load(path, allow_pickle=False) reads it."""
    c = model.config
    arrays = {name: model.params[name].astype(dtype) for name in WEIGHTS}
    meta = {"format": np.int64(FORMAT), "task": np.str_(TASK), "name": np.str_(model.name),
            "vocab": np.int64(c.vocab), "seq_len": np.int64(c.seq_len), "d_model": np.int64(c.d_model),
            "n_heads": np.int64(c.n_heads), "seed": np.int64(model.seed)}
    # np.savez stamps each member with the current time; fixed stamps make a retrain byte-identical
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for key, value in {**arrays, **meta}.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue())


def load(path: Path | str) -> Model:
    """The model in a .npz written by `save` (weights as float64); no pickle is ever read."""
    with np.load(path, allow_pickle=False) as data:
        fmt = int(data["format"]) if "format" in data.files else None
        task = str(data["task"]) if "task" in data.files else None
        if fmt != FORMAT or task != TASK:
            raise ValueError(f"{path}: not a model file of format {FORMAT} for task {TASK!r} "
                             f"(got format {fmt}, task {task!r})")
        missing = [k for k in (*WEIGHTS, "vocab", "seq_len", "d_model", "n_heads", "seed", "name")
                   if k not in data.files]
        if missing:
            raise ValueError(f"{path}: missing {', '.join(missing)}")
        config = Config(int(data["vocab"]), int(data["seq_len"]), int(data["d_model"]), int(data["n_heads"]))
        params = {name: np.asarray(data[name], dtype=np.float64) for name in WEIGHTS}
        for name, shape in config.shapes().items():
            if params[name].shape != shape:
                raise ValueError(f"{path}: {name} has shape {params[name].shape}, expected {shape}")
        return Model(config, params, int(data["seed"]), str(data["name"]))


def read_index(folder: Path | str) -> dict:
    """The index of the models in `folder` (index.json): per model its file, configuration,
    seed, final loss and accuracy, and the roles the analysis found for its heads."""
    return json.loads((Path(folder) / "index.json").read_text(encoding="utf-8"))
