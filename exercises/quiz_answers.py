"""The quiz's answer functions: each takes some of an item's params as keyword arguments and
returns a number (quiz.yaml `answer:` and `wrong[].value` name them). Where the reference can
answer (it counts its own softmax rows, it reads values), it does."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from . import reference as ref

__all__ = ["one_head_distributions", "budget_left", "budget_referent", "budget_left_percent", "head_count",
           "head2_reading", "head1_reading", "head2_reversed_reading", "heads_averaged_reading",
           "unweighted_sum_reading", "practice_head2_reading", "practice_head1_reading",
           "practice_heads_averaged_reading", "practice_head2_reversed_reading", "practice_unweighted_reading",
           "concat_reading", "concat_interleaved", "emerge_step", "emerge_roles"]

WORKED_VALUES = np.array([[1, 0, 10, 0], [0, 1, 0, 20]], dtype=np.float64)  # (T=2, d_v=4): v1, v2
HEAD_WEIGHTS = (np.array([0.8, 0.2]), np.array([0.1, 0.9]))                  # head 1, head 2 over (v1, v2)


def _reading(weights: np.ndarray, coord: int) -> float:
    return float(ref.attention_reading(weights, WORKED_VALUES)[coord - 1])  # coord counts from 1


def one_head_distributions(W: int) -> int:
    """Softmax rows that one head of value width W forms for one query, as the reference counts them."""
    return ref.count_routing_distributions(1, W, 1)


def budget_left(p: int) -> float:
    """Most weight left for all other positions when one gets p percent: a softmax row sums to 1."""
    return (100 - p) / 100


def budget_referent(p: int) -> float:
    """The referent's own share (a known-wrong answer to the budget question)."""
    return p / 100


def budget_left_percent(p: int) -> float:
    """What is left, in percent instead of as a fraction (a known-wrong answer)."""
    return 100 - p


def head_count(d_model: int, d_head: int) -> int:
    """Heads in a layer of width d_model whose heads are d_head wide (d_k = d_model / h)."""
    if d_model % d_head:
        raise ValueError(f"d_model {d_model} is not a multiple of the head width {d_head}")
    return d_model // d_head


def head2_reading(coord: int) -> float:
    """Coordinate `coord` of head 2's reading of the worked example."""
    return _reading(HEAD_WEIGHTS[1], coord)


def head1_reading(coord: int) -> float:
    """The same coordinate of head 1's reading (a known-wrong answer: the other head's weights)."""
    return _reading(HEAD_WEIGHTS[0], coord)


def head2_reversed_reading(coord: int) -> float:
    """Head 2's weights applied to the values in the wrong order (a known-wrong answer)."""
    return _reading(HEAD_WEIGHTS[1][::-1], coord)


def heads_averaged_reading(coord: int) -> float:
    """The mean of both heads' readings (a known-wrong answer)."""
    return (head1_reading(coord) + head2_reading(coord)) / 2


def unweighted_sum_reading(coord: int) -> float:
    """v1 + v2 with the weights left out (a known-wrong answer)."""
    return _reading(np.ones(2), coord)


# --- the practice counterpart of two_head_reading: its own values, weights in tenths per student

PRACTICE_VALUES = np.array([[2, 0, 6], [0, 3, 12]], dtype=np.float64)  # (T=2, d_v=3): v1, v2


def _practice(first_tenths: float, coord: int) -> float:
    weights = np.array([first_tenths / 10, 1 - first_tenths / 10])
    return float(ref.attention_reading(weights, PRACTICE_VALUES)[coord - 1])  # coord counts from 1


def practice_head2_reading(b: int, coord: int) -> float:
    """Coordinate `coord` of head 2's reading, weights [b/10, 1 - b/10] over (v1, v2)."""
    return _practice(b, coord)


def practice_head1_reading(a: int, coord: int) -> float:
    """The same coordinate of head 1's reading (a known-wrong answer: the other head's weights)."""
    return _practice(a, coord)


def practice_heads_averaged_reading(a: int, b: int, coord: int) -> float:
    """The mean of both heads' readings (a known-wrong answer)."""
    return (_practice(a, coord) + _practice(b, coord)) / 2


def practice_head2_reversed_reading(b: int, coord: int) -> float:
    """Head 2's weights applied to (v2, v1) (a known-wrong answer)."""
    return _practice(10 - b, coord)


def practice_unweighted_reading(coord: int) -> float:
    """v1 + v2 with the weights left out (a known-wrong answer)."""
    return float(PRACTICE_VALUES.sum(axis=0)[coord - 1])


def concat_reading(w1: int, w2: int, coord: int) -> float:
    """Coordinate `coord` (from 1) of [z^(1), z^(2)]: the lesson's values, head 1 giving w1/10 to v1, head 2 w2/10."""
    tenths = w1 if coord <= WORKED_VALUES.shape[1] else w2  # joined head after head: head 1's d_v coordinates first
    return _reading(np.array([tenths / 10, 1 - tenths / 10]), (coord - 1) % WORKED_VALUES.shape[1] + 1)


def concat_interleaved(w1: int, w2: int, coord: int) -> float:
    """The two readings joined coordinate by coordinate, z^(1)_1, z^(2)_1, ... (a known-wrong answer)."""
    return concat_reading(w1, w2, (coord - 1) % 2 * WORKED_VALUES.shape[1] + (coord - 1) // 2 + 1)


# --- roles watched as they emerge: the course's runs of `mha train SEED`, read from pool.json ------

POOL = Path(__file__).resolve().parent / "models" / "pool.json"  # written by models/train.py --pool


@functools.cache
def _pool() -> dict[int, dict]:
    return {run["seed"]: run for run in json.loads(POOL.read_text(encoding="utf-8"))["runs"]}


def pool_run(train_seed: int) -> dict:
    """The course's record of `mha train {train_seed}`: what grader.training.summary found in it."""
    try:
        return _pool()[train_seed]
    except KeyError:
        raise ValueError(f"seed {train_seed} is not in the pool ({POOL.name} has {sorted(_pool())})") from None


def emerge_step(train_seed: int) -> int:
    """The first step shown at which a head's previous-token score reaches the role score; 0 when none does."""
    return pool_run(train_seed)["previous_step"] or 0


def emerge_roles(train_seed: int) -> int:
    """The run's ending as two digits: the previous-token head, then the first-token head, 0 for a role
    no head took (21: head 2 previous-token, head 1 first-token; 10: head 1 previous-token, no
    first-token head; 0: neither role taken)."""
    run = pool_run(train_seed)
    return 10 * run["previous_head"] + run["first_head"]
