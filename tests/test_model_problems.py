"""The trained-model problems and quiz items: references checked against the models' own analysis,
cases that are the shipped models, the student's loader, per-student numbers that a student can
compute as the prompts say, and the model files in the student bundle."""
from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from exercises.models import analysis, model as M  # the models' own code: an independent implementation
from grader.cli.commands import main
from grader.course.generators import draw_params
from grader.course.quiz import draw
from grader.course.seeds import student_seed
from grader.grading.answers import grade_quiz
from grader.grading.prepared import prepare
from grader.trained import evaluation_tokens, head_order, load_model

from .conftest import COURSE, EXERCISES, SOLUTIONS

MODELS = EXERCISES / "models"

SEQUENCES = 256  # evaluation sequences for the cross-checks: enough to differ from any mistake, quick


def _solutions():
    spec = importlib.util.spec_from_file_location("pedmodels_solutions", SOLUTIONS / "attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTION = _solutions()


def _student_maps(trained, tokens: np.ndarray) -> np.ndarray:
    """(N, h, T, T): the model solution's run_model on each sequence, stacked (as the quiz says)."""
    weights = [trained.W_Q, trained.W_K, trained.W_V, trained.W_O, trained.W_U]
    return np.stack([SOLUTION.run_model(t.astype(float), trained.E, trained.P, *weights, trained.num_heads)[0]
                     for t in tokens])


def _student_ablation_inputs(trained, tokens: np.ndarray):
    """X (N, T, D) and every head's reading (N, h, T, d_k), computed as the quiz item says: head k's
    reading is weights[k - 1] @ split_heads(X @ W_V, h)[k - 1]."""
    X = trained.E[tokens] + trained.P
    maps = _student_maps(trained, tokens)                                            # (N, h, T, T)
    values = np.stack([SOLUTION.split_heads(x @ trained.W_V, trained.num_heads) for x in X])   # (N, h, T, d_k)
    return X, maps @ values


class TestReferences:
    @pytest.mark.parametrize("name", ["d8_h1_s0", "d8_h2_s3", "d8_h4_s2", "d8_h8_s0", "d16_h2_s1"])
    def test_head_scores_agrees_with_the_models_analysis(self, name):
        """The reference's scores equal the models' analysis.head_scores on the same maps."""
        model = M.load(MODELS / f"{name}.npz")
        maps = analysis.attention_maps(model, M.eval_tokens(model.config)[:SEQUENCES])
        for got, expected in zip(COURSE.head_scores(maps), analysis.head_scores(maps)):
            np.testing.assert_allclose(got, expected, rtol=1e-12)

    @pytest.mark.parametrize("name", ["d8_h2_s0", "d8_h4_s1", "d16_h2_s2"])
    def test_ablation_deltas_agrees_with_the_models_analysis(self, name):
        """Zeroing readings before W_O gives the deltas of analysis.ablation_deltas (head_mask = 0)."""
        model = M.load(MODELS / f"{name}.npz")
        tokens = M.eval_tokens(model.config)[:SEQUENCES]
        f = M.forward(model.params, tokens, model.config.n_heads)
        got = COURSE.ablation_deltas(f["X"], f["H"], model.params["W_O"], model.params["W_U"], tokens.astype(float))
        np.testing.assert_allclose(got, analysis.ablation_deltas(model, tokens), rtol=1e-9, atol=1e-12)

    def test_the_index_deltas_are_the_full_evaluation_set(self):
        """The quiz's numbers come from index.json: the reference on all 2048 sequences agrees."""
        model = M.load(MODELS / "d8_h2_s1.npz")
        tokens = M.eval_tokens(model.config)
        f = M.forward(model.params, tokens, 2)
        got = COURSE.ablation_deltas(f["X"], f["H"], model.params["W_O"], model.params["W_U"], tokens)
        index = {m["name"]: m for m in M.read_index(MODELS)["models"]}
        np.testing.assert_allclose(got, index["d8_h2_s1"]["ablation_delta"], atol=1e-4)

    def test_bad_shapes_are_named(self):
        """A map that is not (N, h, T, T) is refused with its shape."""
        with pytest.raises(ValueError, match=r"\(N, h, T, T\) with T >= 3 \(got shape \(2, 3, 3\)\)"):
            COURSE.head_scores(np.ones((2, 3, 3)))


class TestRunModel:
    @pytest.mark.parametrize("name", ["d8_h2_s1", "d8_h8_s3", "d16_h1_s0"])
    def test_run_model_is_the_models_forward_pass(self, name):
        """The reference, through the course's multi_head_attention, gives the models' own maps and logits."""
        m = M.load(MODELS / f"{name}.npz")
        tokens = M.eval_tokens(m.config)[:4]
        f = M.forward(m.params, tokens, m.config.n_heads)
        for n, row in enumerate(tokens):
            weights, logits = COURSE.run_model(row.astype(float), *(m.params[w] for w in M.WEIGHTS), m.config.n_heads)
            np.testing.assert_allclose(weights, f["A"][n], atol=1e-12)
            np.testing.assert_allclose(logits, f["logits"][n], rtol=1e-10, atol=1e-10)

    def test_tokens_outside_the_vocabulary_are_refused(self):
        m = M.load(MODELS / "d8_h2_s1.npz")
        with pytest.raises(ValueError, match=r"whole numbers below V = 8"):
            COURSE.run_model(np.array([0.0, 8.0]), *(m.params[w] for w in M.WEIGHTS), 2)


def _student_case(course, problem_id: str, case_name: str, seed: int):
    """The case's inputs and key for one student's seed, and the student's model as drawn for them."""
    problem = next(p for p in course.problems if p.id == problem_id)
    case = next(c for c in problem.cases if c.name == case_name)
    params = draw_params(problem.params, problem.id, seed)
    return prepare(problem, case, seed), params


def _permuted(model, order: int) -> dict:
    """The model file's weights with its heads in the student's order, moved here by hand (not by
    load_model): W_Q, W_K, W_V columns and W_O rows, one head's block at a time."""
    h, d_k = model.config.n_heads, model.config.d_model // model.config.n_heads
    index = np.concatenate([np.arange((int(c) - 1) * d_k, int(c) * d_k) for c in str(order)])
    weights = dict(model.params)
    for w in ("W_Q", "W_K", "W_V"):
        weights[w] = weights[w][:, index]
    weights["W_O"] = weights["W_O"][index, :]
    assert sorted(str(order)) == [str(k) for k in range(1, h + 1)]
    return weights


# (problem, case name, which of the student's models: the two-head one (s2, o2) or the four-head one)
MODEL_CASES = [
    ("run_model", "your model (two heads), evaluation sequence 1", "2", [0]),
    ("run_model", "your model (four heads), evaluation sequence 2", "4", [1]),
    ("head_scores", "your model (two heads), evaluation sequences 1 and 2", "2", [0, 1]),
    ("head_scores", "your model (four heads), evaluation sequences 3 to 6", "4", [2, 3, 4, 5]),
    ("ablation_deltas", "your model (two heads), evaluation sequences 1 to 4", "2", [0, 1, 2, 3]),
    ("ablation_deltas", "your model (four heads), evaluation sequences 5 to 8", "4", [4, 5, 6, 7]),
]


class TestCasesAreTheStudentsModels:
    @pytest.mark.parametrize("problem_id, case_name, heads, sequences", MODEL_CASES)
    @pytest.mark.parametrize("seed", [0, 5, 123456])
    def test_inputs_are_the_students_model_on_those_sequences(self, course, problem_id, case_name, heads,
                                                               sequences, seed):
        """Each trained-model case is the student's own model (their seed and head order), recomputed
        with the models' own code and the heads moved by hand."""
        prepared, params = _student_case(course, problem_id, case_name, seed)
        m = M.load(MODELS / f"d8_h{heads}_s{params['s' + heads]}.npz")
        weights = _permuted(m, params["o" + heads])
        tokens = M.eval_tokens(m.config)[sequences]
        f = M.forward(weights, tokens, m.config.n_heads)
        args = dict(zip((p.name for p in next(p for p in course.problems if p.id == problem_id).function.params),
                        prepared.args))
        if problem_id == "run_model":
            np.testing.assert_array_equal(args["tokens"], tokens[0])
            assert args["num_heads"] == m.config.n_heads
            for key in M.WEIGHTS:
                np.testing.assert_allclose(args[key], weights[key], atol=1e-12, err_msg=key)
            np.testing.assert_allclose(prepared.expected[0], f["A"][0], atol=1e-10)
        elif problem_id == "head_scores":
            np.testing.assert_allclose(args["weights"], f["A"], atol=1e-10)
        else:
            expected = {"X": f["X"], "readings": f["H"], "W_O": weights["W_O"], "W_U": weights["W_U"], "tokens": tokens}
            for key, value in expected.items():
                np.testing.assert_allclose(args[key], value, atol=1e-10, err_msg=key)

    def test_two_students_find_their_heads_at_other_numbers(self, course):
        """Ada's and Bob's previous-token heads (by the key of head_scores' public case) sit at other
        numbers, or in other models, and every key differs between them."""
        seeds = student_seed(SECRET, ADA), student_seed(SECRET, BOB)
        for problem_id, case_name, _, _ in MODEL_CASES:
            ada, bob = (_student_case(course, problem_id, case_name, seed)[0] for seed in seeds)
            keys = [np.concatenate([np.ravel(x) for x in (p.expected if isinstance(p.expected, tuple)
                                                          else (p.expected,))]) for p in (ada, bob)]
            assert keys[0].shape != keys[1].shape or not np.allclose(keys[0], keys[1]), (problem_id, case_name)
        previous = set()
        for seed in range(40):
            prepared, _ = _student_case(course, "head_scores", MODEL_CASES[2][1], seed)
            previous.add(int(np.argmax(prepared.expected[0])) + 1)
        assert previous == {1, 2}   # across a class, the previous-token head is head 1 for some, head 2 for others

    def test_the_students_model_is_the_same_in_every_problem_and_quiz_item(self, course):
        """s2, o2, s4, o4 are shared: a student's two-head and four-head models are the same in
        run_model, head_scores, ablation_deltas and the quiz items that name them."""
        for seed in (0, 1, 99, student_seed(SECRET, ADA)):
            drawn = [draw_params(p.params, p.id, seed) for p in course.problems
                     if p.id in ("run_model", "head_scores", "ablation_deltas")]
            drawn += [draw(_quiz(course, i), seed).params
                      for i in ("your_previous_head", "your_head_ablation", "wide_vs_narrow", "head_count_sweep")]
            for name in ("s2", "o2", "s4", "o4"):
                assert len({d[name] for d in drawn if name in d}) == 1, (seed, name, drawn)


class TestLoader:
    def test_weights_are_the_files(self):
        """Without an order the loader gives the file's weights, as float64."""
        trained, model = load_model("d8_h4_s1"), M.load(MODELS / "d8_h4_s1.npz")
        assert trained.num_heads == 4 and trained.d_k == 2 and trained.d_model == 8
        for name in M.WEIGHTS:
            assert getattr(trained, name).dtype == np.float64
            np.testing.assert_array_equal(getattr(trained, name), model.params[name])

    def test_an_order_renumbers_the_heads_and_keeps_the_model(self):
        """order=3142: your head k is the file's head of digit k; the logits do not change."""
        tokens = evaluation_tokens()[:64]
        plain, mine = load_model("d8_h4_s1"), load_model("d8_h4_s1", order=3142)
        ours = M.forward({w: getattr(mine, w) for w in M.WEIGHTS}, tokens, 4)
        theirs = M.forward({w: getattr(plain, w) for w in M.WEIGHTS}, tokens, 4)
        np.testing.assert_allclose(ours["logits"], theirs["logits"], atol=1e-12)
        np.testing.assert_allclose(ours["A"], theirs["A"][:, [2, 0, 3, 1]], atol=1e-12)

    def test_orders_as_digits_strings_or_lists_are_the_same(self):
        assert head_order(2143, 4) == head_order("2143", 4) == head_order([2, 1, 4, 3], 4) == [2, 1, 4, 3]
        assert head_order(None, 2) == [1, 2]

    @pytest.mark.parametrize("order", [1123, 123, 12345, [0, 1, 2, 3]])
    def test_an_order_that_is_not_a_permutation_is_refused(self, order):
        with pytest.raises(ValueError, match=r"order must list the heads 1\.\.4 once each"):
            head_order(order, 4)

    def test_an_unknown_model_is_named(self):
        with pytest.raises(FileNotFoundError, match="no model 'd8_h3_s0'"):
            load_model("d8_h3_s0")

    def test_evaluation_tokens_are_the_models(self):
        np.testing.assert_array_equal(evaluation_tokens(), M.eval_tokens(M.Config()))


def _quiz(course, item_id):
    """A quiz item of the course, optional or not (the optional ones are checked as the core ones are)."""
    return course.with_optional().quiz.item(item_id)


# Two students of one course: their seeds give different models, head orders and numbers.
SECRET = "a course secret for the tests"
ADA, BOB = "ada@uni.edu", "bob@uni.edu"


class TestPerStudentNumbers:
    def test_two_students_see_different_head_numbers_and_numbers(self, course):
        """Ada and Bob get other models or orders, so other prompts and other right answers."""
        seeds = student_seed(SECRET, ADA), student_seed(SECRET, BOB)
        for item_id in ("your_previous_head", "your_head_ablation", "wide_vs_narrow", "removable_heads"):
            ada, bob = (draw(_quiz(course, item_id), seed) for seed in seeds)
            assert ada.prompt != bob.prompt, item_id
        ada, bob = (draw(_quiz(course, "your_previous_head"), seed) for seed in seeds)
        assert ada.answer != bob.answer, (ada.params, bob.params)
        ada, bob = (draw(_quiz(course, "your_head_ablation"), seed) for seed in seeds)
        assert abs(ada.answer - bob.answer) > 0.1, (ada.params, bob.params)

    def test_the_head_order_moves_the_answer(self, course):
        """The same model under every head order: the previous-token head is at every number 1..4."""
        answers = {COURSE.your_previous_head(2, order) for order in COURSE.HEAD_ORDERS_4}
        assert answers == {1, 2, 3, 4}

    @pytest.mark.parametrize("seed", [0, 7, 11])
    def test_a_student_computes_the_key_as_the_prompt_says(self, course, seed):
        """Loading the model with the student's order and using the model solution's own functions
        gives the item's answer, for the previous-token head and for one head's ablation."""
        v = draw(_quiz(course, "your_previous_head"), seed)
        trained = load_model(f"d8_h4_s{v.params['s4']}", order=v.params["o4"])
        previous, _ = SOLUTION.head_scores(_student_maps(trained, evaluation_tokens()[:SEQUENCES]))
        assert int(np.argmax(previous)) + 1 == v.answer

        v = draw(_quiz(course, "your_head_ablation"), seed)
        trained = load_model(f"d8_h2_s{v.params['s2']}", order=v.params["o2"])
        tokens = evaluation_tokens()
        X, readings = _student_ablation_inputs(trained, tokens)
        deltas = SOLUTION.ablation_deltas(X, readings, trained.W_O, trained.W_U, tokens.astype(float))
        assert abs(deltas[v.params["k"] - 1] - v.answer) <= _quiz(course, "your_head_ablation").tolerance

    @pytest.mark.parametrize("s", range(4))
    def test_wide_vs_narrow_and_removable_heads_from_the_files(self, course, s):
        """The accuracy gap and the count of cheap heads, computed from the files, are the keys."""
        tokens = evaluation_tokens()
        right = {}
        for h in (1, 2):
            m = M.load(MODELS / f"d8_h{h}_s{s}.npz")
            logits = M.forward(m.params, tokens, h)["logits"][:, 1:].reshape(-1, 7, 2, 8)
            right[h] = (logits.argmax(-1) == M.targets(tokens)[:, 1:]).all(-1).mean()
        assert abs((right[2] - right[1]) - COURSE.wide_vs_narrow_accuracy(s)) <= 1e-6
        eight = M.load(MODELS / f"d8_h8_s{s}.npz")
        assert int((analysis.ablation_deltas(eight) < 0.1).sum()) == COURSE.removable_heads(s)

    @pytest.mark.parametrize("s", range(4))
    def test_the_fewest_heads_that_name_both_tokens_from_the_files(self, s):
        """head_count_sweep's key is the fewest heads whose model names both tokens at 99% of the
        positions, recomputed from the files; every model is far from the line (below 0.8 or at
        least 0.99), so the key reads no training noise, and the known-wrong values are never it."""
        tokens = evaluation_tokens()
        for D, counts in COURSE.SWEEP_HEADS.items():
            right = {}
            for h in counts:
                m = M.load(MODELS / f"d{D}_h{h}_s{s}.npz")
                logits = M.forward(m.params, tokens, h)["logits"][:, 1:].reshape(-1, 7, 2, 8)
                right[h] = (logits.argmax(-1) == M.targets(tokens)[:, 1:]).all(-1).mean()
            assert all(a < 0.8 or a >= 0.99 for a in right.values()), (D, right)
            fewest = COURSE.fewest_heads_both(D, s)
            assert fewest == min(h for h, a in right.items() if a >= 0.99) == {8: 2, 16: 1}[D]
            assert fewest not in (COURSE.most_heads_count(D), COURSE.fewest_heads_width(D, s))


def test_the_feedbacks_numbers_are_the_models():
    """What removable_heads, your_head_ablation and model_claims say in their feedback holds for the
    shipped index: two eight-head runs have no head below 0.1 nats and two have one or two; every
    head of a two-head model costs at least 3 nats, and the seed-3 two-head model's heads are mixed."""
    assert [COURSE.removable_heads(s) for s in range(4)] == [2, 0, 1, 0]
    deltas = [COURSE.your_head_delta(s, 12, k) for s in range(4) for k in (1, 2)]
    assert min(deltas) >= 3 and min(COURSE.your_head_delta(3, 12, k) for k in (1, 2)) >= 8
    mixed = load_model("d8_h2_s3")
    previous, _ = SOLUTION.head_scores(_student_maps(mixed, evaluation_tokens()[:SEQUENCES]))
    assert 0.5 < max(previous) < 0.8 and 0.1 < min(previous) < 0.3


def test_the_table_of_zeroed_queries_is_the_models():
    """QUERIES_ZEROED_DELTA (a known-wrong answer's numbers, tabled so grading runs no model) is what
    zeroing each head's W_Q columns costs, recomputed from the files."""
    for (s, head), value in COURSE.QUERIES_ZEROED_DELTA.items():
        assert COURSE.queries_zeroed_delta(s, head) == pytest.approx(value, abs=1e-4), (s, head)
    assert sorted(COURSE.QUERIES_ZEROED_DELTA) == [(s, h) for s in range(4) for h in range(2)]


class TestQuizMistakes:
    @pytest.mark.parametrize("item_id, wrong, mistake", [
        ("your_previous_head", "your_previous_head_from_zero", "heads_numbered_from_zero"),
        ("your_head_ablation", "your_other_head_delta", "removed_other_head"),
        ("your_head_ablation", "your_head_delta_queries_zeroed", "queries_zeroed_not_removed"),
        ("wide_vs_narrow", "wide_vs_narrow_first_only", "counted_one_readout"),
        ("removable_heads", "needed_heads", "counted_needed_heads"),
        ("head_count_sweep", "most_heads_count", "more_heads_better"),
    ])
    def test_a_known_wrong_number_is_named(self, course, tmp_path, item_id, wrong, mistake):
        """An answers file holding the known-wrong value scores 0 on the item and names the mistake."""
        item = _quiz(course, item_id)
        v = draw(item, 0)
        value = next(w.value for w in v.wrong if w.mistake == mistake)
        function = getattr(COURSE, wrong)
        takes = inspect.signature(function).parameters
        assert value == pytest.approx(function(**{k: x for k, x in v.params.items() if k in takes}), abs=1e-9)
        (tmp_path / "answers.yaml").write_text(f"{item_id}: {value}\n")
        result = grade_quiz(course.with_optional().quiz, tmp_path / "answers.yaml", seed=0, item_ids=[item_id]).items[0]
        assert result.score == 0 and result.mistakes == (mistake,)

    @pytest.mark.parametrize("answer, mistake", [
        ("[a, c, e]", None),
        ("[a, b, c, e]", "one_run_generalized"),
        ("[a, c, e, f]", "more_heads_better"),
        ("[a, d]", "heads_are_rules"),
        ("[a, c]", "evidence_dismissed"),
    ])
    def test_claims_are_graded_and_named(self, course, tmp_path, answer, mistake):
        """The claims item: the three supported claims are full marks; a too-strong claim chosen is
        named first, a supported claim left out otherwise."""
        (tmp_path / "answers.yaml").write_text(f"model_claims: {answer}\n")
        result = grade_quiz(course.quiz, tmp_path / "answers.yaml", seed=0, item_ids=["model_claims"]).items[0]
        assert (result.score == result.max_score) == (mistake is None)
        assert result.mistakes == ((mistake,) if mistake else ())


def test_the_student_bundle_ships_the_model_files_and_loads_them(tmp_path):
    """`mha release`: student/models holds every .npz (not the index, not the models' code), and the
    bundle's own grader.trained loads a model from there with nothing else on the path."""
    out = tmp_path / "rel"
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "release", "--out", str(out)],
                                env={"MHA_COURSE_SECRET": ""}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    student = out / "student"
    shipped = sorted(p.name for p in (student / "models").iterdir())
    assert shipped == sorted(p.name for p in MODELS.glob("*.npz")) and len(shipped) == 24
    assert (student / "grader" / "trained.py").is_file()
    code = ("import grader.trained as t, numpy as np; m = t.load_model('d8_h2_s1', order=21); "
            "print(t.__file__, m.num_heads, m.W_O.shape)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MHA_COURSE")}
    env["PYTHONPATH"] = str(student)
    done = subprocess.run([sys.executable, "-c", code], cwd=student, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    path, heads, shape = done.stdout.split(" ", 2)
    assert Path(path).resolve() == (student / "grader" / "trained.py").resolve()
    assert heads == "2" and shape.strip() == "(8, 8)"
