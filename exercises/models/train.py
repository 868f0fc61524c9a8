"""Train the shipped models with numpy alone: fresh random sequences each step, hand-written Adam.

Everything a run draws comes from its seed (weights from one stream, training sequences from
another), so `python -m exercises.models.train` rewrites the same files on any machine, up to
floating-point rounding in matrix products. The evaluation sequences are the same for every model.

    python -m exercises.models.train              # every model, into this folder (about 50 s of one core)
    python -m exercises.models.train --only d16   # the models whose name starts with "d16"
    python -m exercises.models.train --out DIR    # elsewhere; an index.json already there is merged
    python -m exercises.models.train --pool       # pool.json: the students' runs (`mha train SEED`), about 1 min

The pool: the runs students watch with `mha train SEED` (grader/training.py, the same arithmetic as
`train` below, so the same seed gives the same weights) are computed here once, for the seeds
the quiz draws from, and recorded in pool.json, which the quiz's answer functions read: grading
never trains. A seed enters the pool only when its numbers are clear (`clear_of_boundaries`):
no score a quiz answer depends on lies within POOL_MARGIN of the role score, so rounding on
another machine cannot move an answer.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader.training import PROBE_SIZE, ROLE_SCORE, SETUP, summary, train as student_train

from .analysis import describe
from .model import EVAL_SEED, EVAL_SIZE, TASK, Config, Model, init_params, load, loss_and_grads, sample, save

__all__ = ["Run", "RUNS", "Schedule", "SCHEDULE", "train", "main", "POOL_SIZE", "POOL_MARGIN", "clear_of_boundaries",
           "pool_entry", "write_pool"]

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


POOL_SIZE = 16       # seeds in the pool: the first this many from 1 on whose numbers are clear
POOL_MARGIN = 0.02   # no score an answer depends on within this of the role score (0.9)


def clear_of_boundaries(snapshots, margin: float = POOL_MARGIN) -> str | None:
    """Why a run's answers could move under rounding (None when they cannot): the highest
    previous-token score of any snapshot (which decides the step it first reaches the role score),
    or any head's final score of either kind, within `margin` of the role score."""
    for s in snapshots:
        if abs(max(s.previous) - ROLE_SCORE) < margin:
            return f"at step {s.step} the highest previous-token score is {max(s.previous):.4f}"
    end = snapshots[-1]
    for kind, scores in (("previous-token", end.previous), ("first-token", end.first)):
        for k, score in enumerate(scores):
            if abs(score - ROLE_SCORE) < margin:
                return f"at the end head {k + 1}'s {kind} score is {score:.4f}"
    return None


def pool_entry(seed: int, snapshots) -> dict:
    """One seed of pool.json: what the quiz asks (grader.training.summary) and every snapshot's scores."""
    return {"seed": seed, **summary(snapshots),
            "steps": [s.step for s in snapshots],
            "previous": [[round(x, 4) for x in s.previous] for s in snapshots],
            "first": [[round(x, 4) for x in s.first] for s in snapshots]}


def write_pool(path: Path, size: int = POOL_SIZE, log=sys.stderr) -> dict:
    """Train seeds 1, 2, ... with the students' setup until `size` of them are clear; write pool.json."""
    runs: list[dict] = []
    skipped: list[dict] = []
    seed = 0
    while len(runs) < size:
        seed += 1
        run = student_train(seed)
        why = clear_of_boundaries(run.snapshots)
        if why:
            skipped.append({"seed": seed, "why": why})
            print(f"seed {seed:3d}  left out: {why}", file=log)
            continue
        runs.append(pool_entry(seed, run.snapshots))
        e = runs[-1]
        print(f"seed {seed:3d}  previous_step {e['previous_step']}  previous_head {e['previous_head']}  "
              f"first_head {e['first_head']}  specialized {e['specialized']}", file=log)
    pool = {"setup": SETUP.__dict__, "role_score": ROLE_SCORE, "margin": POOL_MARGIN, "probe_size": PROBE_SIZE,
            "description": "the runs of `mha train SEED` (grader/training.py) for the seeds the quiz draws from",
            "seeds": [r["seed"] for r in runs], "runs": runs, "left_out": skipped}
    path.write_text(json.dumps(pool, indent=1) + "\n", encoding="utf-8")
    return pool


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train the shipped attention-only models (numpy only).")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the .npz files and index.json")
    parser.add_argument("--only", default="", help="train only the runs whose name starts with this")
    parser.add_argument("--pool", action="store_true",
                        help="write pool.json (the students' `mha train` runs the quiz asks about) instead")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.pool:
        write_pool(args.out / "pool.json")
        return 0
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
