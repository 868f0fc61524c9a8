"""Watch roles emerge: train a small attention-only model from a seed, printing its head scores as it goes.

The course trains its models (exercises/models/train.py) with the arithmetic below: numpy only,
float64, every draw from the seed (weights from one stream, training sequences from another), so
the same seed gives the same run on any machine up to floating-point rounding. This module is
part of the student bundle: a student runs it from their own folder (`mha train SEED`, or
`python -m grader.training SEED`) in a few seconds, and the course's numbers for a pool of seeds
(exercises/models/pool.json, written by `train.py --pool`) come from the same `train` and `summary`.

Shape legend: N sequences, T positions, V vocabulary, D d_model, h heads, d_k = D // h.
The model is the one grader.trained loads: X = E[tokens] + P, R = X + concat(heads) W_O,
logits = R W_U with 2V columns (token[i-1], then token[0]). A head's previous-token score is its
mean weight on key i - 1, its first-token score its mean weight on key 0, over queries i = 2..T-1
of the probe sequences (the first PROBE_SIZE evaluation sequences of grader.trained).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .records import record

__all__ = ["Setup", "SETUP", "Snapshot", "Run", "ROLE_SCORE", "PROBE_SIZE", "init_params", "forward",
           "loss_and_grads", "head_scores", "probe_tokens", "train", "summary", "format_snapshot", "report",
           "run_and_print", "main"]

WEIGHTS = ("E", "P", "W_Q", "W_K", "W_V", "W_O", "W_U")
ROLE_SCORE = 0.9    # a head whose score reaches this has taken the role (previous-token or first-token)
PROBE_SIZE = 256    # the evaluation sequences the scores are measured on while training


@record
class Setup:
    """A run's model and schedule: minibatch Adam, the learning rate decayed linearly to lr * final,
    head scores measured every `every` steps."""

    vocab: int = 8
    seq_len: int = 8
    d_model: int = 8
    n_heads: int = 2
    steps: int = 1000
    batch: int = 64
    lr: float = 0.01
    final: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    every: int = 100

    def shapes(self) -> dict[str, tuple[int, int]]:
        D = self.d_model
        return {"E": (self.vocab, D), "P": (self.seq_len, D), "W_Q": (D, D), "W_K": (D, D),
                "W_V": (D, D), "W_O": (D, D), "W_U": (D, 2 * self.vocab)}


SETUP = Setup()   # the students' runs: two heads of width 4, 1000 steps, scores every 100


@record
class Snapshot:
    """The head scores at one step (after that many updates; step 0 is the initial weights)."""

    step: int
    loss: float                 # mean training loss of the steps since the last snapshot (nan at step 0)
    previous: tuple[float, ...]  # per head, 1-based head k at index k - 1
    first: tuple[float, ...]


@dataclass
class Run:
    seed: int
    setup: Setup
    params: dict[str, np.ndarray]
    snapshots: list[Snapshot] = field(default_factory=list)


def init_params(setup: Setup, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Gaussian weights, each scaled by 1/sqrt(its input width); embeddings of unit scale."""
    params = {}
    for name, shape in setup.shapes().items():
        std = 1.0 if name in ("E", "P") else 1.0 / np.sqrt(shape[0])
        params[name] = rng.standard_normal(shape) * std
    return params


def _split(x: np.ndarray, h: int) -> np.ndarray:
    N, T, D = x.shape
    return x.reshape(N, T, h, D // h).transpose(0, 2, 1, 3)  # (N, h, T, d_k)


def _merge(x: np.ndarray) -> np.ndarray:
    N, h, T, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(N, T, h * d)  # (N, T, D)


def forward(params: dict[str, np.ndarray], tokens: np.ndarray, n_heads: int) -> dict[str, np.ndarray]:
    """The model on (N, T) int tokens: every intermediate the gradients need, the logits (N, T, 2V)
    and the attention weights A (N, h, T, T) among them."""
    T = tokens.shape[1]
    X = params["E"][tokens] + params["P"][:T]                  # (N, T, D)
    Q = _split(X @ params["W_Q"], n_heads)                     # (N, h, T, d_k)
    K = _split(X @ params["W_K"], n_heads)
    Vh = _split(X @ params["W_V"], n_heads)
    scale = 1.0 / np.sqrt(Q.shape[-1])
    causal = np.tril(np.ones((T, T), dtype=bool))
    S = np.where(causal, Q @ K.transpose(0, 1, 3, 2) * scale, -np.inf)  # (N, h, T, T)
    S = S - S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=-1, keepdims=True)
    H = A @ Vh                                                 # (N, h, T, d_k)
    Z = _merge(H)                                              # (N, T, D)
    R = X + Z @ params["W_O"]
    logits = R @ params["W_U"]                                 # (N, T, 2V)
    return {"X": X, "Q": Q, "K": K, "V": Vh, "A": A, "H": H, "Z": Z, "R": R, "logits": logits,
            "scale": np.float64(scale)}


def _targets(tokens: np.ndarray) -> np.ndarray:
    y = np.full(tokens.shape + (2,), -1, dtype=np.int64)      # (N, T, 2): token[i-1], token[0]; -1 at i = 0
    y[:, 1:, 0] = tokens[:, :-1]
    y[:, 1:, 1] = tokens[:, :1]
    return y


def _cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    N, T, two_v = logits.shape
    parts = logits.reshape(N, T, 2, two_v // 2)
    keep = y >= 0
    safe = np.where(keep, y, 0)[..., None]
    shifted = parts - parts.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    count = keep[..., 0].sum()
    loss = -(np.take_along_axis(log_p, safe, axis=-1)[..., 0] * keep).sum() / count
    grad = np.exp(log_p)
    np.put_along_axis(grad, safe, np.take_along_axis(grad, safe, axis=-1) - 1.0, axis=-1)
    grad *= keep[..., None] / count
    return float(loss), grad.reshape(N, T, two_v)


def loss_and_grads(params: dict[str, np.ndarray], tokens: np.ndarray, n_heads: int
                   ) -> tuple[float, dict[str, np.ndarray]]:
    """Cross-entropy on `tokens` (both readouts, positions 1..T-1) and its gradient by every weight."""
    f = forward(params, tokens, n_heads)
    loss, dlogits = _cross_entropy(f["logits"], _targets(tokens))
    N, T, D = f["X"].shape

    def rows(a: np.ndarray) -> np.ndarray:
        return a.reshape(N * T, a.shape[-1])

    g = {"W_U": rows(f["R"]).T @ rows(dlogits)}
    dR = dlogits @ params["W_U"].T
    g["W_O"] = rows(f["Z"]).T @ rows(dR)
    dH = _split(dR @ params["W_O"].T, n_heads)
    A = f["A"]
    dA = dH @ f["V"].transpose(0, 1, 3, 2)
    dV = A.transpose(0, 1, 3, 2) @ dH
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True)) * f["scale"]
    dQ = dS @ f["K"]
    dK = dS.transpose(0, 1, 3, 2) @ f["Q"]
    dX = dR.copy()
    for name, d in (("W_Q", dQ), ("W_K", dK), ("W_V", dV)):
        d = _merge(d)
        g[name] = rows(f["X"]).T @ rows(d)
        dX += d @ params[name].T
    g["P"] = np.zeros_like(params["P"])
    g["P"][:T] = dX.sum(axis=0)
    g["E"] = np.zeros_like(params["E"])
    np.add.at(g["E"], tokens.reshape(-1), dX.reshape(-1, D))
    return loss, g


def head_scores(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(previous-token score, first-token score) of each head, each (h,), from weights A (N, h, T, T)."""
    queries = np.arange(2, A.shape[-1])
    return A[:, :, queries, queries - 1].mean(axis=(0, 2)), A[:, :, queries, 0].mean(axis=(0, 2))


def probe_tokens() -> np.ndarray:
    """(PROBE_SIZE, 8) ints: the first evaluation sequences of grader.trained, where scores are measured."""
    from .trained import evaluation_tokens
    return evaluation_tokens()[:PROBE_SIZE]


def _snapshot(params: dict[str, np.ndarray], setup: Setup, probe: np.ndarray, step: int, loss: float) -> Snapshot:
    previous, first = head_scores(forward(params, probe, setup.n_heads)["A"])
    return Snapshot(step, loss, tuple(float(x) for x in previous), tuple(float(x) for x in first))


def train(seed: int, setup: Setup = SETUP, progress: Callable[[Snapshot], None] | None = None,
          probe: np.ndarray | None = None) -> Run:
    """Train from `seed` (weights from np.random.default_rng([seed, 0]), sequences from [seed, 1]);
    every `setup.every` steps (and at step 0) take a Snapshot of the head scores and pass it to `progress`."""
    if setup.d_model % setup.n_heads:
        raise ValueError(f"d_model must be a multiple of n_heads (got {setup.d_model}, {setup.n_heads})")
    probe = probe_tokens() if probe is None else probe
    params = init_params(setup, np.random.default_rng([seed, 0]))
    data = np.random.default_rng([seed, 1])
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    run = Run(seed, setup, params)
    losses: list[float] = []

    def take(step: int) -> None:
        run.snapshots.append(_snapshot(params, setup, probe, step, float(np.mean(losses)) if losses else float("nan")))
        losses.clear()
        if progress is not None:
            progress(run.snapshots[-1])

    take(0)
    for step in range(1, setup.steps + 1):
        tokens = data.integers(0, setup.vocab, size=(setup.batch, setup.seq_len))
        loss, grads = loss_and_grads(params, tokens, setup.n_heads)
        losses.append(loss)
        lr = setup.lr * (1 - (1 - setup.final) * (step - 1) / max(setup.steps - 1, 1))
        for k in params:
            m[k] = setup.beta1 * m[k] + (1 - setup.beta1) * grads[k]
            v[k] = setup.beta2 * v[k] + (1 - setup.beta2) * grads[k] ** 2
            m_hat = m[k] / (1 - setup.beta1 ** step)
            v_hat = v[k] / (1 - setup.beta2 ** step)
            params[k] = params[k] - lr * m_hat / (np.sqrt(v_hat) + setup.eps)
        if step % setup.every == 0 or step == setup.steps:
            take(step)
    return run


def _head_with(scores: tuple[float, ...]) -> int:
    """The 1-based head whose score reaches ROLE_SCORE, or 0 when none does."""
    return next((k + 1 for k, s in enumerate(scores) if s >= ROLE_SCORE), 0)


def summary(snapshots: list[Snapshot]) -> dict:
    """What a run shows, from its snapshots:
    previous_step: the first snapshot step at which some head's previous-token score reaches
        ROLE_SCORE (0.9), or None when none ever does;
    previous_head / first_head: at the end, the head (1-based) whose previous-token / first-token
        score reaches ROLE_SCORE, or 0 when no head does;
    specialized: at the end one head is previous-token and another first-token."""
    crossed = [s.step for s in snapshots if max(s.previous) >= ROLE_SCORE]
    end = snapshots[-1]
    previous_head = _head_with(end.previous)
    first_head = _head_with(end.first)
    return {"previous_step": crossed[0] if crossed else None, "previous_head": previous_head,
            "first_head": first_head,
            "specialized": bool(previous_head and first_head and previous_head != first_head)}


def format_snapshot(s: Snapshot) -> str:
    """One line of progress: step, training loss, each head's two scores."""
    heads = "  ".join(f"head {k + 1}: prev {p:.2f} first {f:.2f}" for k, (p, f) in enumerate(zip(s.previous, s.first)))
    loss = "   -  " if np.isnan(s.loss) else f"{s.loss:6.3f}"
    return f"step {s.step:5d}  loss {loss}  {heads}"


def report(run: Run) -> str:
    """The line printed after a run: what was measured and where (the table above is the result;
    which head took which role, and when, is for the student to read off it)."""
    end = run.snapshots[-1]
    return (f"seed {run.seed}: {run.setup.n_heads} heads of width {run.setup.d_model // run.setup.n_heads}, "
            f"{end.step} steps, final training loss {end.loss:.3f}; scores on the first {PROBE_SIZE} "
            "evaluation sequences, queries 2 to 7")


def run_and_print(seed: int, every: int = SETUP.every, out=None) -> Run:
    """Train from `seed` with the students' setup, printing the scores every `every` steps (a multiple
    of SETUP.every), then the summary."""
    out = out or sys.stdout
    if every < SETUP.every or every % SETUP.every:
        raise ValueError(f"--every must be a multiple of {SETUP.every} (got {every})")

    def show(s: Snapshot) -> None:
        if s.step % every == 0 or s.step == SETUP.steps:
            print(format_snapshot(s), file=out, flush=True)

    print(f"prev, first: each head's previous-token and first-token score; loss: the mean training loss "
          f"of the {SETUP.every} steps before", file=out, flush=True)
    run = train(seed, SETUP, show)
    print(report(run), file=out, flush=True)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.training",
                                     description="Train the course's two-head model from SEED (numpy only), "
                                                 "printing each head's previous-token and first-token scores.")
    parser.add_argument("seed", type=int, help="the training seed your quiz item names")
    parser.add_argument("--every", type=int, default=SETUP.every, help="print scores every this many steps")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"the seed must be 0 or more (got {args.seed})")
    try:
        run_and_print(args.seed, args.every)
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
