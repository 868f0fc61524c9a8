"""The flagship problems (reading, counting, shapes) and the several-heads problems (multi_head_reading,
head_contributions, two_head_layer): the reference's facts, per-student numbers, diagnoses that
never coincide, and no answer shown before the student answers."""
from __future__ import annotations

import importlib.util
import itertools
import re
import subprocess
import sys

import numpy as np
import pytest

from grader.classroom.bundles import STUDENT_MODULES
from grader.course.render import render_prompt
from grader.grading import head_pattern as patterns
from grader.grading.checks import check
from grader.grading.diagnosis import wrong_answer
from grader.grading.grade import grade
from grader.grading.prepared import build_args, prepare

from .conftest import COURSE as ref
from .test_mistakes import FLAGSHIP_BUGS, buggy_submission

FLAGSHIPS = ("attention_reading", "multi_head_reading", "count_routing_distributions", "predict_shapes",
             "head_contributions", "two_head_layer")
SEEDS = (0, 1, 2, 3, 17, 12345)


def _parts(problem) -> tuple[str, ...]:
    return problem.function.outputs if problem.function.returns.value == "array_pair" else ()


class TestSeveralHeads:
    def test_contributions_add_up_to_the_output(self):
        """sum_i z_i W_O^(i) equals concat(z) W_O, and removing head i takes exactly its term away."""
        rng = np.random.default_rng(4)
        weights = rng.dirichlet(np.ones(5), size=(3, 4))            # (h, n, m)
        values, W_O = rng.standard_normal((3, 5, 2)), rng.standard_normal((6, 7))
        contributions, ablated = ref.head_contributions(weights, values, W_O)
        _, _, output = ref.multi_head_reading(weights, values, W_O)
        np.testing.assert_allclose(contributions.sum(axis=0), output, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ablated, output[None] - contributions, rtol=1e-12, atol=1e-12)

    def test_identical_maps_contribute_differently(self):
        """Two heads with the same weights but different values write different things."""
        rng = np.random.default_rng(5)
        row = rng.dirichlet(np.ones(4), size=3)
        contributions, _ = ref.head_contributions(np.stack([row, row]), rng.standard_normal((2, 4, 3)),
                                                  rng.standard_normal((6, 5)))
        assert np.abs(contributions[0] - contributions[1]).max() > 0.1

    def test_a_head_with_zero_values_can_be_removed_without_change(self):
        """W_V = 0: a zero contribution, and the output without the head is the full output."""
        rng = np.random.default_rng(6)
        values = rng.standard_normal((3, 4, 2))
        values[1] = 0.0
        contributions, ablated = ref.head_contributions(rng.dirichlet(np.ones(4), size=(3, 5)), values,
                                                        rng.standard_normal((6, 9)))
        assert np.all(contributions[1] == 0.0)
        np.testing.assert_allclose(ablated[1], contributions.sum(axis=0), rtol=1e-12, atol=1e-14)

    def test_multi_head_reading_is_each_heads_reading_joined(self):
        """Head i's reading is attention_reading with its own row; one query is row 0 of n queries."""
        rng = np.random.default_rng(7)
        weights, values = rng.dirichlet(np.ones(3), size=(2, 4)), rng.standard_normal((2, 3, 5))
        W_O = rng.standard_normal((10, 6))
        readings, concat, output = ref.multi_head_reading(weights, values, W_O)
        for i in range(2):
            np.testing.assert_allclose(readings[i], ref.attention_reading(weights[i], values[i]), rtol=1e-12)
        np.testing.assert_array_equal(concat[:, :5], readings[0])    # head 0's coordinates come first
        one = ref.multi_head_reading(weights[:, 0], values, W_O)
        for got, full in zip(one, (readings[:, 0], concat[0], output[0])):
            np.testing.assert_allclose(got, full, rtol=1e-12)

    @pytest.mark.parametrize("T", [2, 3, 6, 12, 32])
    def test_two_head_layer_makes_both_patterns(self, T):
        """The reference's two heads reach 0.9 on i - 1 and on 0; the layer run agrees with the per-head formula."""
        W_Q, W_K = ref.two_head_layer(T)
        weights = ref.layer_pattern_weights(T, W_Q, W_K, 2)
        rows = np.arange(1, T)
        assert (weights[0, rows, rows - 1] >= 0.9).all() and (weights[1, rows, 0] >= 0.9).all()
        np.testing.assert_allclose(patterns.pair_head_weights(T, W_Q, W_K), weights, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(patterns.direct_head_weights(T, W_Q[:, :T], W_K[:, :T]), weights[0], atol=1e-9)

    def test_one_head_with_both_designs_splits_its_budget(self):
        """Both designs added into one head: each row gives about half to i - 1 and half to 0, never 0.9."""
        T = 8
        (pq, pk), (sq, sk) = ref.previous_token_head(T), ref.sink_head(T)
        weights = ref.head_pattern_weights(T, pq + sq, pk + sk)
        rows = np.arange(2, T)
        assert (weights[rows, rows - 1] < 0.6).all() and (weights[rows, 0] < 0.6).all()
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0)

    @pytest.mark.parametrize("setup", [
        dict(num_heads=3, d_v=20, num_queries=5, num_keys=7),
        dict(num_heads=2, d_v=24, num_queries=6, causal=True),
        dict(num_heads=4, d_v=12, num_queries=3, d_k=25, num_layers=6, batch=4),
    ])
    def test_count_is_rows_of_layers_batch_heads_queries(self, setup):
        """The traced count is layers x batch x heads x queries; widths, keys and the mask change nothing."""
        expected = setup.get("num_layers", 1) * setup.get("batch", 1) * setup["num_heads"] * setup["num_queries"]
        assert ref.count_routing_distributions(**setup) == expected
        assert ref.count_routing_distributions(**{**setup, "d_v": 2 * setup["d_v"], "num_keys": 11,
                                                  "d_k": 9, "causal": not setup.get("causal", False)}) == expected


# torch's nn.MultiheadAttention on the inputs saved in the folder argv[1]; run in its own process, so the
# test process never loads torch (a large parent inflates the peak memory its later children report)
TORCH_SCRIPT = """
import sys, numpy as np, torch
folder = sys.argv[1]
x_q, x_kv, wq, wk, wv, wo = (np.load(f"{folder}/{name}.npy") for name in ("x_q", "x_kv", "wq", "wk", "wv", "wo"))
d_model, h = wq.shape[0], int(sys.argv[2])
mha = torch.nn.MultiheadAttention(d_model, h, bias=False, batch_first=True, dtype=torch.float64)
with torch.no_grad():
    mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([wq.T, wk.T, wv.T])))
    mha.out_proj.weight.copy_(torch.from_numpy(wo.T))
    q, kv = torch.from_numpy(x_q), torch.from_numpy(x_kv)
    out, averaged = mha(q, kv, kv)
    _, per_head = mha(q, kv, kv, average_attn_weights=False)
for name, value in (("out", out), ("averaged", averaged), ("per_head", per_head)):
    np.save(f"{folder}/torch_{name}.npy", value.numpy())
"""


class TestTorchLayouts:
    def test_attention_layer_agrees_with_torch_when_installed(self, tmp_path):
        """nn.MultiheadAttention (batch first, cross-attention) returns the same output and both weight layouts."""
        if importlib.util.find_spec("torch") is None:
            pytest.skip("torch is not installed")
        rng = np.random.default_rng(8)
        N, L, S, d_model, h = 2, 3, 5, 8, 2
        inputs = {"x_q": rng.standard_normal((N, L, d_model)), "x_kv": rng.standard_normal((N, S, d_model)),
                  **{name: rng.standard_normal((d_model, d_model)) for name in ("wq", "wk", "wv", "wo")}}
        for name, value in inputs.items():
            np.save(tmp_path / f"{name}.npy", value)
        subprocess.run([sys.executable, "-c", TORCH_SCRIPT, str(tmp_path), str(h)], check=True, timeout=120)
        out, averaged, per_head = (np.load(tmp_path / f"torch_{name}.npy") for name in ("out", "averaged", "per_head"))
        args = [inputs[name] for name in ("x_q", "x_kv", "wq", "wk", "wv", "wo")]
        ours, ours_avg = ref.attention_layer(*args, h)
        _, ours_per_head = ref.attention_layer(*args, h, average_weights=False)
        np.testing.assert_allclose(out, ours, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(averaged, ours_avg, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(per_head, ours_per_head, rtol=1e-10, atol=1e-12)
        assert ref.predict_shapes(L, d_model, h, S, N)["returned_weights"] == averaged.shape
        assert ref.predict_shapes(L, d_model, h, S, N, average_weights=False)["returned_weights"] == per_head.shape


class TestDiagnoses:
    @pytest.mark.parametrize("problem_id", FLAGSHIPS)
    def test_named_mistakes_are_told_apart(self, course, problem_id):
        """On every case and several students' numbers, two mistakes that give the same wrong answer
        on a case are told apart on another (one is wrong where the other is right, or they give
        different wrong answers), and none gives the right one on all cases."""
        problem = course.problem(problem_id)
        bugs = [m for m in problem.mistakes if not m.detector]
        differs = {m.id: False for m in bugs}
        coincide, apart = set(), set()
        for seed, case in itertools.product(SEEDS, problem.cases):
            if case.raises:
                continue
            prepared = prepare(problem, case, seed)
            answers = {}  # mistake id -> its wrong answer, or None where it is right
            for mistake in bugs:
                try:
                    answer = wrong_answer(mistake, prepared.args, problem.code)
                except Exception:  # does not apply to these inputs
                    continue
                wrong = not check(problem.compare, answer, prepared.expected, _parts(problem)).passed
                answers[mistake.id] = answer if wrong else None
                differs[mistake.id] |= wrong
            for (one, a), (other, b) in itertools.combinations(answers.items(), 2):
                if a is None and b is None:
                    continue
                same = a is not None and b is not None and check(problem.compare, a, b, _parts(problem)).passed
                (coincide if same else apart).add((one, other))
        assert coincide - apart == set(), f"{problem_id}: never told apart: {sorted(coincide - apart)}"
        assert all(differs.values()), f"never differs from the right answer: {differs}"

    @pytest.mark.parametrize("bug", FLAGSHIP_BUGS, ids=lambda bug: bug.mistake)
    def test_a_bug_is_told_its_own_mistake_only(self, course, write_submission, bug):
        """A flagship bug is never told another mistake of its problem on any case."""
        result = grade(course, write_submission(buggy_submission(bug)), problem_ids=[bug.problem]).problems[0]
        assert {case.mistake for case in result.cases if case.mistake} == {bug.mistake}


def _sizes(problem_id: str, args: tuple) -> dict[str, float]:
    """The sizes a diagnosis could confuse in one case: n queries, m keys, d_k, d_v, sqrt(d_k)."""
    if problem_id == "attention_reading":
        weights, values = args
        return {"n": weights.shape[0] if weights.ndim == 2 else 1, "m": values.shape[0], "d_v": values.shape[1]}
    if problem_id in ("multi_head_reading", "head_contributions"):
        weights, values, W_O = args
        n = weights.shape[1] if weights.ndim == 3 else 1
        return {"n": n, "m": values.shape[1], "d_v": values.shape[2], "d_model": W_O.shape[1]}
    if problem_id == "count_routing_distributions":
        h, d_v, n, m, d_k, *_ = args + (None,) * (8 - len(args))
        sizes = {"n": n, "m": m, "d_v": d_v, "d_k": d_k}
        return {k: v for k, v in {**sizes, "sqrt(d_k)": d_k ** 0.5 if d_k else None}.items() if v is not None}
    seq_len, d_model, h, src_len, batch, d_v, *_ = args + (None,) * (7 - len(args))
    d_k = d_model // h
    return {"n": seq_len, "m": src_len, "d_k": d_k, "d_v": d_v, "sqrt(d_k)": d_k ** 0.5}


class TestCaseSizes:
    @pytest.mark.parametrize("problem_id", ["attention_reading", "multi_head_reading", "head_contributions",
                                            "count_routing_distributions", "predict_shapes"])
    @pytest.mark.parametrize("seed", SEEDS)
    def test_public_sizes_are_pairwise_distinct(self, course, problem_id, seed):
        """In every public case, n, m, d_k, d_v and sqrt(d_k) differ, so no two diagnoses can coincide
        (predict_shapes' self-attention baseline, where m = n and d_v = d_k by definition, is the exception)."""
        problem = course.problem(problem_id)
        for case in problem.cases:
            if case.hidden or case.raises or case.name == "self-attention, two heads":
                continue
            sizes = _sizes(problem_id, build_args(problem, case, seed))
            named = {k: v for k, v in sizes.items() if v is not None}
            for (a, x), (b, y) in itertools.combinations(named.items(), 2):
                assert x != y, f"{problem_id}/{case.name} (seed {seed}): {a} = {b} = {x}"


class TestNothingAnsweredAhead:
    @pytest.mark.parametrize("problem_id", FLAGSHIPS)
    def test_public_cases_differ_between_students(self, course, problem_id):
        """Each flagship problem has a public case whose inputs are drawn per student."""
        problem = course.problem(problem_id)

        def inputs(seed):
            return [repr(build_args(problem, case, seed)) for case in problem.cases if not case.hidden]
        assert inputs(0) != inputs(987654321)

    @pytest.mark.parametrize("seed", SEEDS)
    def test_count_prompt_does_not_state_a_public_answer(self, course, seed):
        """The counting prompt, with the student's numbers, never states the count of the student's own
        model (the first public case), nor any count as a number of distributions."""
        problem = course.problem("count_routing_distributions")
        prompt = render_prompt(problem, seed)
        first = next(case for case in problem.cases if not case.hidden)
        assert not re.search(rf"\b{prepare(problem, first, seed).expected}\b", prompt)
        for case in problem.cases:
            count = prepare(problem, case, seed).expected
            assert not re.search(rf"\b{count} (separately normalized )?distributions?\b", prompt)

    def test_no_prompt_or_public_case_gives_the_hidden_two_head_reading(self, course):
        """[0.1, 0.9, 1, 18] (the hidden item's answer) is in no prompt and no public case's inputs."""
        for problem in course.problems:
            assert not re.search(r"\b1, 18\]|0\.1, 0\.9\]", render_prompt(problem, 0)), problem.id
            for case in problem.cases:
                assert "0.1, 0.9" not in prepare(problem, case).inputs

    def test_a_wrong_shape_is_reported_without_the_right_one(self, course, write_submission):
        """A public predict_shapes failure shows what the student got, never the expected shape."""
        bug = next(b for b in FLAGSHIP_BUGS if b.mistake == "shapes-head-output-full-width")
        problem = course.problem("predict_shapes")
        result = grade(course, write_submission(buggy_submission(bug)), problem_ids=["predict_shapes"]).problems[0]
        failed = [c for c in result.cases if not c.hidden and c.detail]
        assert failed
        for case_result in failed:
            case = next(c for c in problem.cases if c.name == case_result.name)
            expected = prepare(problem, case).expected["head_output"]
            assert "head_output: got" in case_result.detail and str(expected) not in case_result.detail

    def test_the_student_bundle_leaves_out_the_flagship_mistakes(self):
        """The bugs hold near-solutions: they are course code, which the student bundle never
        ships (neither the packaged course nor the module that loads a course's code)."""
        assert "course/code.py" not in STUDENT_MODULES
        assert not any(name.startswith("_course") for name in STUDENT_MODULES)
