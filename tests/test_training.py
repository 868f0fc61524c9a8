"""`mha train` (grader/training.py): the course's trainer run on a student's seed, and the pool of runs
(exercises/models/pool.json) that the quiz's roles_emerge items are graded on."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from exercises import quiz_answers
from exercises.models import analysis, model, train
from grader import training
from grader.training import ROLE_SCORE, Setup, Snapshot, summary

from .conftest import EXERCISES

POOL = json.loads((EXERCISES / "models" / "pool.json").read_text())
RUNS = {run["seed"]: run for run in POOL["runs"]}
ROW = re.compile(r"^step +(\d+) +loss +\S+ +head 1: prev ([\d.]+) first ([\d.]+) +head 2: prev ([\d.]+) first ([\d.]+)$")


def recorded(run: dict) -> list[Snapshot]:
    """A pool run's snapshots, from the scores pool.json records."""
    return [Snapshot(step, float("nan"), tuple(p), tuple(f))
            for step, p, f in zip(run["steps"], run["previous"], run["first"])]


def printed(stdout: str) -> list[Snapshot]:
    """The snapshots `mha train` printed, as a student reads them (two decimals)."""
    rows = [ROW.match(line) for line in stdout.splitlines()]
    return [Snapshot(int(m[1]), float("nan"), (float(m[2]), float(m[4])), (float(m[3]), float(m[5])))
            for m in rows if m]


class TestTrainer:
    def test_the_students_trainer_is_the_courses(self):
        """grader.training.train (what `mha train` runs) gives the weights exercises/models/train.py
        gives for the same seed and schedule, bit for bit."""
        ours = training.train(5, Setup(steps=40)).params
        course, _ = train.train(model.Config(d_model=8, n_heads=2), 5, train.Schedule(steps=40))
        assert ours.keys() == course.keys()
        for name in ours:
            assert np.array_equal(ours[name], course[name]), name

    def test_scores_are_the_analysis_head_scores(self):
        """The scores it prints are analysis.head_scores of the model's maps on the probe sequences."""
        run = training.train(2, Setup(steps=30, every=10))
        tokens = training.probe_tokens()
        maps = model.forward(run.params, tokens, 2)["A"]
        previous, first = analysis.head_scores(maps)
        np.testing.assert_allclose(run.snapshots[-1].previous, previous, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.snapshots[-1].first, first, rtol=0, atol=1e-12)
        assert [s.step for s in run.snapshots] == [0, 10, 20, 30]

    def test_summary_reads_the_role_score(self):
        """A head takes a role at ROLE_SCORE or more; the step is the first snapshot that reaches it."""
        snaps = [Snapshot(0, 1.0, (0.2, 0.1), (0.3, 0.3)), Snapshot(100, 1.0, (0.89, 0.1), (0.3, 0.95)),
                 Snapshot(200, 1.0, (ROLE_SCORE, 0.0), (0.0, 0.99))]
        assert summary(snaps) == {"previous_step": 200, "previous_head": 1, "first_head": 2, "specialized": True}
        assert summary(snaps[:2]) == {"previous_step": None, "previous_head": 0, "first_head": 2, "specialized": False}


class TestPool:
    def test_the_quiz_draws_the_pool_seeds(self, course):
        """Both roles_emerge items draw the shared train_seed from exactly the pool's seeds."""
        for item in ("roles_emerge_step", "roles_emerge_heads"):
            spec = next(i for i in course.quiz.items if i.id == item).params["train_seed"]
            assert sorted(spec["choice"]) == POOL["seeds"] and spec["shared"] is True, item

    def test_every_answer_is_clear_of_the_boundaries(self):
        """No score an answer depends on sits within the margin (0.02) of the role score, in any pool run:
        rounding on another machine cannot move an answer. The recorded answers are what the scores say."""
        assert POOL["margin"] >= 0.02 and POOL["role_score"] == ROLE_SCORE
        for seed, run in RUNS.items():
            snaps = recorded(run)
            assert train.clear_of_boundaries(snaps, POOL["margin"]) is None, seed
            assert summary(snaps) == {k: run[k] for k in ("previous_step", "previous_head", "first_head",
                                                          "specialized")}, seed
            assert run["steps"] == list(range(0, POOL["setup"]["steps"] + 1, POOL["setup"]["every"])), seed

    def test_some_seeds_specialize_and_some_do_not(self):
        """The pool holds runs whose heads separate (both ways round) and runs whose heads do not, so an
        honest "not specialized" answer is right for some students."""
        endings = {quiz_answers.emerge_roles(seed) for seed in RUNS}
        assert {12, 21} <= endings and endings - {12, 21}
        assert 0 in {quiz_answers.emerge_step(seed) for seed in RUNS}
        assert sum(not run["specialized"] for run in RUNS.values()) >= 2

    def test_answer_functions_read_the_pool(self):
        """emerge_step and emerge_roles give the recorded numbers; a seed outside the pool is a clear error."""
        for seed, run in RUNS.items():
            assert quiz_answers.emerge_step(seed) == (run["previous_step"] or 0)
            assert quiz_answers.emerge_roles(seed) == 10 * run["previous_head"] + run["first_head"]
        with pytest.raises(ValueError, match="seed 9 is not in the pool"):
            quiz_answers.emerge_step(9)


    def test_the_pool_mode_writes_these_runs(self, tmp_path):
        """`train.py --pool` (write_pool) on the first two seeds writes the first two runs of pool.json."""
        log = tmp_path / "log.txt"
        with log.open("w") as handle:
            written = train.write_pool(tmp_path / "pool.json", size=2, log=handle)
        assert json.loads((tmp_path / "pool.json").read_text()) == written
        assert written["seeds"] == POOL["seeds"][:2] and written["setup"] == POOL["setup"]
        for got, expected in zip(written["runs"], POOL["runs"]):
            assert {k: v for k, v in got.items() if k not in ("previous", "first")} == \
                {k: v for k, v in expected.items() if k not in ("previous", "first")}
            np.testing.assert_allclose(got["previous"], expected["previous"], rtol=0, atol=2e-4)
            np.testing.assert_allclose(got["first"], expected["first"], rtol=0, atol=2e-4)
        assert log.read_text().splitlines()[0].startswith("seed   1  previous_step 100")


class TestAStudentsRun:
    @pytest.mark.parametrize("seed", [7, 14])
    def test_a_fresh_run_gives_the_pools_numbers(self, cli, seed):
        """`mha train SEED`, run as a student runs it, prints a table whose numbers (to the two decimals
        shown) are the pool's at every step, and from which the pool's answers follow."""
        result = cli("train", str(seed))
        assert result.exit_code == 0, result.output
        snaps = printed(result.stdout)
        run = RUNS[seed]
        assert [s.step for s in snaps] == run["steps"]
        for got, expected in zip(snaps, recorded(run)):
            np.testing.assert_allclose(got.previous, expected.previous, rtol=0, atol=0.0051)
            np.testing.assert_allclose(got.first, expected.first, rtol=0, atol=0.0051)
        assert summary(snaps) == summary(recorded(run))
        assert result.stdout.splitlines()[-1].startswith(f"seed {seed}: 2 heads of width 4, 1000 steps")

    def test_the_full_precision_scores_reproduce(self):
        """The same run in-process: every snapshot's scores equal the pool's to its 4 decimals."""
        run = training.train(3)
        for got, expected in zip(run.snapshots, recorded(RUNS[3])):
            np.testing.assert_allclose(got.previous, expected.previous, rtol=0, atol=6e-5)
            np.testing.assert_allclose(got.first, expected.first, rtol=0, atol=6e-5)


class TestCommand:
    @pytest.mark.parametrize("args, message", [
        (["train", "3", "--every", "150"], "must be a multiple of 100 (got 150)"),
        (["train", "--", "-3"], "-3 is not in the range x>=0"),
        (["train", "x"], "'x' is not a valid integer"),
    ])
    def test_bad_arguments_are_named(self, cli, args, message):
        """A bad seed or --every: exit 2 and a message naming it, never a traceback."""
        result = cli(*args)
        assert result.exit_code == 2 and message in result.output, result.output

    def test_the_module_command_names_a_bad_every(self, capsys):
        """`python -m grader.training 3 --every 150`: exit 2 and the rule, before any training."""
        with pytest.raises(SystemExit) as exit_info:
            training.main(["3", "--every", "150"])
        assert exit_info.value.code == 2
        assert "--every must be a multiple of 100 (got 150)" in capsys.readouterr().err
