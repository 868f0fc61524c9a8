"""The shipped trained models (exercises/models): files, gradients, retraining, analysis, findings."""
from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from exercises.models import analysis, model, train

from .conftest import EXERCISES

MODELS = EXERCISES / "models"
INDEX = model.read_index(MODELS)
ENTRIES = {e["name"]: e for e in INDEX["models"]}


def entries(d_model: int, n_heads: int) -> list[dict]:
    return [e for e in INDEX["models"] if e["d_model"] == d_model and e["n_heads"] == n_heads]


def shipped(name: str) -> model.Model:
    return model.load(MODELS / ENTRIES[name]["file"])


def assert_same_entry(got: dict, expected: dict) -> None:
    """Index entries agree: names, roles and sizes exactly, numbers to the rounding the index keeps."""
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, (str, int)) or key == "roles":
            assert got[key] == value, key
        else:
            np.testing.assert_allclose(got[key], value, rtol=1e-3, atol=2e-4, err_msg=key)


class TestFiles:
    def test_every_file_loads_without_pickle(self):
        """np.load(allow_pickle=False) reads every member of every .npz, weights as floats,
        the configuration as plain integers and strings."""
        files = sorted(MODELS.glob("*.npz"))
        assert len(files) == len(train.RUNS)
        for path in files:
            with np.load(path, allow_pickle=False) as data:
                assert set(data.files) == set(model.WEIGHTS) | {
                    "format", "task", "name", "vocab", "seq_len", "d_model", "n_heads", "seed"}
                assert all(data[k].dtype == np.float32 for k in model.WEIGHTS)
                assert data["n_heads"].dtype.kind == "i" and data["task"].dtype.kind == "U"
                assert str(data["name"]) == path.stem

    def test_files_are_kilobytes(self):
        """Each model file is under 16 KB."""
        assert max(p.stat().st_size for p in MODELS.glob("*.npz")) < 16_000

    def test_index_and_files_agree(self):
        """The index lists every file once, with the configuration and seed stored in the file."""
        assert sorted(e["file"] for e in INDEX["models"]) == sorted(p.name for p in MODELS.glob("*.npz"))
        for e in INDEX["models"]:
            m = shipped(e["name"])
            c = m.config
            assert (c.vocab, c.seq_len, c.d_model, c.n_heads, c.d_k, m.seed) == \
                (e["vocab"], e["seq_len"], e["d_model"], e["n_heads"], e["d_k"], e["seed"])
            assert c.parameter_count() == e["parameters"]
        assert INDEX["task"] == model.TASK and INDEX["eval_seed"] == model.EVAL_SEED

    def test_index_results_are_the_files_results(self):
        """Loss, accuracies, head scores, roles and ablation deltas in the index are what the
        analysis computes from the shipped files."""
        for name, e in ENTRIES.items():
            assert_same_entry(analysis.describe(shipped(name), e["family"], e["final_train_loss"]), e)

    def test_other_format_is_refused(self, tmp_path):
        """A .npz of another format names the file and the format it found."""
        path = tmp_path / "old.npz"
        np.savez(path, format=np.int64(0), task=np.str_(model.TASK))
        with pytest.raises(ValueError, match=r"old\.npz: not a model file of format 1 .*\(got format 0, "
                                             r"task 'previous_and_first'\)"):
            model.load(path)

    def test_pickled_member_is_never_unpickled(self, tmp_path):
        """An object array (which only pickle can restore) is refused, not loaded."""
        path = tmp_path / "pickled.npz"
        np.savez(path, format=np.int64(1), task=np.array([model.TASK], dtype=object))
        with pytest.raises(ValueError, match="allow_pickle=False"):
            model.load(path)

    def test_missing_members_are_named(self, tmp_path):
        """A model file without some of its arrays names the missing ones."""
        path = tmp_path / "part.npz"
        np.savez(path, format=np.int64(1), task=np.str_(model.TASK), E=np.zeros((8, 8)))
        with pytest.raises(ValueError, match=r"part\.npz: missing P, W_Q, W_K, W_V, W_O, W_U, vocab, seq_len"):
            model.load(path)

    def test_wrong_shape_is_refused(self, tmp_path):
        """A weight of the wrong shape names the weight, its shape and the expected one."""
        m = shipped("d8_h2_s0")
        bad = model.Model(m.config, {**m.params, "W_O": m.params["W_O"][:4]}, m.seed, m.name)
        model.save(tmp_path / "bad.npz", bad)
        with pytest.raises(ValueError, match=r"W_O has shape \(4, 8\), expected \(8, 8\)"):
            model.load(tmp_path / "bad.npz")

    def test_saving_is_deterministic(self, tmp_path):
        """Saving the same model twice writes the same bytes (no time stamps in the archive)."""
        m = shipped("d8_h1_s0")
        model.save(tmp_path / "a.npz", m)
        model.save(tmp_path / "b.npz", m)
        assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
        with zipfile.ZipFile(tmp_path / "a.npz") as archive:
            assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


class TestGradients:
    @pytest.mark.parametrize("n_heads", [1, 2, 4])
    def test_match_finite_differences(self, n_heads):
        """Every entry of every hand-written gradient matches a central difference of the loss."""
        config = model.Config(vocab=4, seq_len=5, d_model=4, n_heads=n_heads)
        params = model.init_params(config, np.random.default_rng(7))
        tokens = np.random.default_rng(8).integers(0, 4, size=(3, 5))
        _, grads = model.loss_and_grads(params, tokens, n_heads)
        eps = 1e-6
        for name, weight in params.items():
            numeric = np.zeros_like(weight)
            for idx in np.ndindex(weight.shape):
                old = weight[idx]
                weight[idx] = old + eps
                up, _ = model.loss_and_grads(params, tokens, n_heads)
                weight[idx] = old - eps
                down, _ = model.loss_and_grads(params, tokens, n_heads)
                weight[idx] = old
                numeric[idx] = (up - down) / (2 * eps)
            assert np.abs(numeric - grads[name]).max() < 1e-7 * max(1.0, np.abs(numeric).max()), name
            assert np.abs(grads[name]).max() > 1e-4, name  # a gradient of zero would pass trivially

    def test_loss_is_the_two_cross_entropies(self):
        """The loss is -log p(token[i-1]) - log p(token[0]) averaged over positions 1..T-1."""
        config = model.Config(vocab=3, seq_len=4, d_model=4, n_heads=2)
        params = model.init_params(config, np.random.default_rng(3))
        tokens = np.array([[2, 0, 1, 1]])
        logits = model.forward(params, tokens, 2)["logits"][0]              # (T, 2V)
        def log_p(row):
            return row - np.log(np.exp(row).sum())
        expected = -np.mean([log_p(logits[i, :3])[tokens[0, i - 1]] + log_p(logits[i, 3:])[tokens[0, 0]]
                             for i in range(1, 4)])
        assert model.loss_and_grads(params, tokens, 2)[0] == pytest.approx(expected, rel=1e-12)

    def test_heads_must_divide_width(self):
        """d_model not a multiple of n_heads is refused with both numbers."""
        with pytest.raises(ValueError, match=r"got d_model=8, n_heads=3"):
            model.Config(d_model=8, n_heads=3)


class TestRetrain:
    def test_script_writes_the_shipped_model(self, tmp_path):
        """`train --only d8_h2_s0` writes that model and its index entry as shipped (weights
        within float32 rounding, index entry equal)."""
        assert train.main(["--out", str(tmp_path), "--only", "d8_h2_s0"]) == 0
        again = model.load(tmp_path / "d8_h2_s0.npz")
        for name in model.WEIGHTS:
            reference = shipped("d8_h2_s0").params[name]
            assert np.abs(again.params[name] - reference).max() <= 1e-5 * np.abs(reference).max(), name
        index = json.loads((tmp_path / "index.json").read_text())
        assert [e["name"] for e in index["models"]] == ["d8_h2_s0"]
        assert_same_entry(index["models"][0], ENTRIES["d8_h2_s0"])

    @pytest.mark.slow
    @pytest.mark.parametrize("run", [r for r in train.RUNS if r.name != "d8_h2_s0"], ids=lambda r: r.name)
    def test_every_shipped_model_is_the_scripts_output(self, run):
        """Training each run from its seed gives the shipped weights to float32 rounding (the
        tolerance also covers BLAS rounding: a 1e-12 change of one initial weight moves the
        final weights by about 1e-12). d8_h2_s0 is the test above, through the script's command."""
        params, _ = train.train(run.config, run.seed)
        ship = shipped(run.name)
        for name in model.WEIGHTS:
            scale = np.abs(ship.params[name]).max()
            assert np.abs(params[name] - ship.params[name]).max() <= 1e-5 * scale, name


class TestAnalysis:
    def test_scores_of_designed_maps(self):
        """A map that reads only i - 1 scores (1, 0); one that reads only key 0 scores (0, 1)."""
        T = 6
        previous = np.zeros((1, 1, T, T))
        previous[0, 0, 0, 0] = 1
        previous[0, 0, np.arange(1, T), np.arange(T - 1)] = 1
        first = np.zeros((1, 1, T, T))
        first[0, 0, :, 0] = 1
        both = np.concatenate([previous, first], axis=1)            # (1, 2, T, T)
        p, f = analysis.head_scores(both)
        assert p.tolist() == [1.0, 0.0] and f.tolist() == [0.0, 1.0]
        assert analysis.head_roles(p, f) == ["previous", "first"]
        assert analysis.head_roles(np.array([0.4]), np.array([0.45])) == ["other"]

    @pytest.mark.parametrize("name", [e["name"] for e in INDEX["models"] if e["n_heads"] == 2])
    def test_two_head_models_have_one_head_of_each_role(self, name):
        """Each two-head model has one previous-token head and one first-token head, at the
        indices the index records, and removing either costs more than 1 nat of loss."""
        m = shipped(name)
        p, f = analysis.head_scores(analysis.attention_maps(m))
        roles = analysis.head_roles(p, f)
        assert sorted(roles) == ["first", "previous"]
        assert roles == ENTRIES[name]["roles"]
        assert p[roles.index("previous")] > 0.65 and f[roles.index("first")] > 0.7
        assert analysis.ablation_deltas(m).min() > 1.0

    def test_ablating_a_head_zeroes_its_reading(self):
        """Ablating head k equals running with head k's rows of W_O set to zero."""
        m = shipped("d8_h4_s1")
        W_O = m.params["W_O"].copy()
        W_O[2 * 2:3 * 2] = 0                                       # head 2 of 4, d_k = 2
        cut = model.Model(m.config, {**m.params, "W_O": W_O}, m.seed, m.name)
        assert analysis.ablate(m, 2)["loss"] == pytest.approx(model.evaluate(cut.params, cut.config)["loss"], rel=1e-12)

    def test_ablate_refuses_a_missing_head(self):
        """A head index outside 0..h-1 names the range."""
        with pytest.raises(ValueError, match=r"head must be in 0\.\.1 \(got 2\)"):
            analysis.ablate(shipped("d8_h2_s0"), 2)

    def test_permuting_heads_keeps_the_function_and_moves_the_roles(self):
        """Renumbered heads: same logits, maps and roles in the new order."""
        m = shipped("d8_h4_s0")
        order = [3, 0, 2, 1]
        moved = analysis.permute_heads(m, order)
        tokens = model.eval_tokens(m.config)[:64]
        before = model.forward(m.params, tokens, 4)
        after = model.forward(moved.params, tokens, 4)
        np.testing.assert_allclose(after["logits"], before["logits"], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(after["A"], before["A"][:, order])
        roles = ENTRIES["d8_h4_s0"]["roles"]
        p, f = analysis.head_scores(analysis.attention_maps(moved))
        assert analysis.head_roles(p, f) == [roles[i] for i in order]

    def test_permute_refuses_a_non_permutation(self):
        """An order that is not a permutation of the heads is refused."""
        with pytest.raises(ValueError, match=r"permutation of 0\.\.1 \(got \[0, 0\]\)"):
            analysis.permute_heads(shipped("d8_h2_s0"), [0, 0])

    def test_layer_is_the_exercises_multi_head_attention(self):
        """The model's attention layer is the reference multi_head_attention with a causal mask."""
        from .conftest import COURSE as reference
        m = shipped("d8_h2_s1")
        tokens = model.eval_tokens(m.config)[:3]
        f = model.forward(m.params, tokens, 2)
        for n in range(3):
            out, weights = reference.multi_head_attention(
                f["X"][n], m.params["W_Q"], m.params["W_K"], m.params["W_V"], m.params["W_O"], 2,
                mask=reference.causal_mask(m.config.seq_len))
            np.testing.assert_allclose(f["X"][n] + out, f["R"][n], rtol=0, atol=1e-12)
            np.testing.assert_allclose(weights, f["A"][n], rtol=0, atol=1e-12)


class TestFindings:
    """What the shipped models show; these hold for the shipped files and for any retrain of them."""

    def test_two_narrow_heads_beat_one_wide_head_at_width_8(self):
        """At d_model = 8 (same weights count), every two-head seed has a lower loss than every
        one-head seed; one head names token[i-1] wrong often, two heads almost never."""
        one, two = entries(8, 1), entries(8, 2)
        assert {e["parameters"] for e in one} == {e["parameters"] for e in two}
        assert max(e["loss"] for e in two) < 0.01 < 0.4 < min(e["loss"] for e in one)
        assert max(e["accuracy"] for e in one) < 0.85 and min(e["accuracy"] for e in two) > 0.99
        assert max(e["previous_accuracy"] for e in one) < 0.85 < 0.95 < min(e["first_accuracy"] for e in one)

    def test_one_wide_head_of_width_16_gets_there_another_way(self):
        """At d_model = 16 one head names both tokens (accuracy above 0.99) by splitting its weight
        between keys 0 and i-1, no head role reaching 0.55, yet its loss stays at least ten times
        the two-head loss for every pair of seeds."""
        one, two = entries(16, 1), entries(16, 2)
        assert min(e["accuracy"] for e in one) > 0.99
        assert all(max(e["previous_score"][0], e["first_score"][0]) < 0.55 for e in one)
        assert min(e["loss"] for e in one) > 10 * max(e["loss"] for e in two)

    def test_head_count_sweep_at_width_8(self):
        """At d_model = 8, 2, 4 and 8 heads all reach mean accuracy above 0.99; 1 head stays below 0.8."""
        mean = {h: np.mean([e["accuracy"] for e in entries(8, h)]) for h in (1, 2, 4, 8)}
        assert mean[1] < 0.8 and min(mean[2], mean[4], mean[8]) > 0.99
