"""Train the shipped models with numpy alone: fresh random sequences each step, hand-written Adam.

Everything a run draws comes from its seed (weights from one stream, training sequences from
another), so `python -m exercises.models.train` rewrites the same files on any machine, up to
floating-point rounding in matrix products. The evaluation sequences are the same for every model.

    python -m exercises.models.train              # every model, into this folder (about 50 s of one core)
    python -m exercises.models.train --only d16   # the models whose name starts with "d16"
    python -m exercises.models.train --out DIR    # elsewhere; an index.json already there is merged
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .analysis import describe
from .model import EVAL_SEED, EVAL_SIZE, TASK, Config, Model, init_params, load, loss_and_grads, sample, save

__all__ = ["Run", "RUNS", "Schedule", "SCHEDULE", "train", "main"]

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Schedule:
    """How long and how fast: minibatch Adam with the learning rate decayed linearly to lr * final."""

    steps: int = 1000
    batch: int = 64
    lr: float = 0.01
    final: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


SCHEDULE = Schedule()


@dataclass(frozen=True)
class Run:
    """One model to train: a family name (what it is compared with), its configuration, its seed."""

    family: str
    config: Config
    seed: int

    @property
    def name(self) -> str:
        c = self.config
        return f"d{c.d_model}_h{c.n_heads}_s{self.seed}"


SEEDS = (0, 1, 2, 3)
# "sweep": 1, 2, 4 and 8 heads at d_model = 8 (d_k = 8, 4, 2, 1); its h = 1 and h = 2 models are one
# head of width 8 against two heads of width 4 with the same number of weights.
# "wide": the same comparison at twice the width, one head of width 16 against two of width 8.
RUNS = tuple(
    [Run("sweep", Config(d_model=8, n_heads=h), s) for h in (1, 2, 4, 8) for s in SEEDS]
    + [Run("wide", Config(d_model=16, n_heads=h), s) for h in (1, 2) for s in SEEDS])


def train(config: Config, seed: int, schedule: Schedule = SCHEDULE) -> tuple[dict[str, np.ndarray], list[float]]:
    """Train from `seed`: the weights (float64) and the training loss of every step."""
    params = init_params(config, np.random.default_rng([seed, 0]))
    data = np.random.default_rng([seed, 1])
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    losses = []
    for step in range(1, schedule.steps + 1):
        loss, grads = loss_and_grads(params, sample(data, schedule.batch, config), config.n_heads)
        losses.append(loss)
        lr = schedule.lr * (1 - (1 - schedule.final) * (step - 1) / max(schedule.steps - 1, 1))
        for k in params:
            m[k] = schedule.beta1 * m[k] + (1 - schedule.beta1) * grads[k]
            v[k] = schedule.beta2 * v[k] + (1 - schedule.beta2) * grads[k] ** 2
            m_hat = m[k] / (1 - schedule.beta1 ** step)
            v_hat = v[k] / (1 - schedule.beta2 ** step)
            params[k] = params[k] - lr * m_hat / (np.sqrt(v_hat) + schedule.eps)
    return params, losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train the shipped attention-only models (numpy only).")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the .npz files and index.json")
    parser.add_argument("--only", default="", help="train only the runs whose name starts with this")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    entries = {e["name"]: e for e in index.get("models", [])}
    for run in RUNS:
        if not run.name.startswith(args.only):
            continue
        params, losses = train(run.config, run.seed)
        path = args.out / f"{run.name}.npz"
        save(path, Model(run.config, params, run.seed, run.name))
        # the index describes the model as shipped (weights rounded to float32), read back from its file
        entries[run.name] = describe(load(path), run.family, final_train_loss=float(np.mean(losses[-50:])))
        e = entries[run.name]
        print(f"{run.name:22s} loss {e['loss']:.4f}  accuracy {e['accuracy']:.3f}  "
              f"roles {e['roles']}", file=sys.stderr)
    index = {"task": TASK,
             "description": "at each position i >= 1 the model names token[i-1] (logits :V) and "
                            "token[0] (logits V:); tokens uniform over the vocabulary",
             "eval_seed": EVAL_SEED, "eval_size": EVAL_SIZE,
             "schedule": SCHEDULE.__dict__,
             "models": [entries[r.name] for r in RUNS if r.name in entries]}
    index_path.write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
