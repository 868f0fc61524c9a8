"""Record torch.nn.MultiheadAttention's answers on fixed inputs, for a test that needs no torch.

torch is never a dependency of the package, yet the course's reference must keep agreeing with
an implementation it shares no code with. So, where torch is installed, this script runs
nn.MultiheadAttention (float64, no biases, batch first) on seeded inputs and writes the inputs
and torch's outputs to `torch_mha.npz` beside it; tests/test_reference.py::TestRecordedTorch checks
the reference against that file on every run, and its live test records afresh and compares
when torch is importable. Re-record (CONTRIBUTING.md) only when a case is added or changed:

    python -m pip install torch==2.13.0
    python tests/oracle/record_torch.py            # writes tests/oracle/torch_mha.npz

One layer's weights (d_model 6) serve every case; the outputs are stored by case:
- `self`: self-attention of one sequence, two heads, per-head weights;
- `causal`: the same with a causal mask (torch's attn_mask is True where a key is blocked, the
  course's mask True where it may be attended), three heads;
- `one_head`: the same sequence through one head;
- `cross`: batched cross-attention (queries from one input, keys and values from another),
  weights averaged over the heads and per head;
- `padded`: a padded batch (torch's key_padding_mask is True at padding, the course's key_mask
  True at a real token), every sequence with at least one real token;
- `torch_layout`: a layer with biases whose parameters are given in torch's own layout, under its
  own names (`in_proj_weight` (3E, E), `in_proj_bias`, `out_proj.weight`, `out_proj.bias`, loaded
  with load_state_dict, which refuses a wrong name or shape), causal, per-head weights; the course
  reads them with from_torch_layout. Beside it, what the quiz says of torch's masks: `misread`, the
  course's causal mask passed to that layer unchanged (read as the keys to block: the last query has
  none left, nan), and `sdpa`, F.scaled_dot_product_attention given the course's mask (True = may
  attend there).
"""
from __future__ import annotations

import argparse
import math
import sys
import zipfile
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "torch_mha.npz"
SEED = 20260
D_MODEL = 6
HEADS = {"self": 2, "causal": 3, "one_head": 1, "cross": 2, "padded": 3, "torch_layout": 3}  # each divides D_MODEL
TORCH_NAMES = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")  # its state_dict


def inputs(seed: int = SEED) -> dict[str, np.ndarray]:
    """The inputs of every case, drawn from one seeded generator: one layer's weights, one sequence
    (the self-attention cases) and one batch (the cross-attention queries' inputs, and the keys'
    and values' inputs, which the padded case also attends over)."""
    rng = np.random.default_rng(seed)
    found = {w: rng.standard_normal((D_MODEL, D_MODEL)) / math.sqrt(D_MODEL) for w in ("W_Q", "W_K", "W_V", "W_O")}
    found["X"] = rng.standard_normal((5, D_MODEL))                   # (n, d_model)
    found["x_q"] = rng.standard_normal((2, 3, D_MODEL))              # (N, L, d_model)
    found["x_kv"] = rng.standard_normal((2, 4, D_MODEL))             # (N, S, d_model)
    found["key_mask"] = np.array([[True, True, True, False], [True, False, False, False]])  # (N, S)
    shapes = {"in_proj_weight": (3 * D_MODEL, D_MODEL), "in_proj_bias": (3 * D_MODEL,),
              "out_proj.weight": (D_MODEL, D_MODEL), "out_proj.bias": (D_MODEL,)}
    for name in TORCH_NAMES:  # drawn after the arrays above, which stay as they were
        found[f"torch_layout.{name}"] = rng.standard_normal(shapes[name]) / math.sqrt(D_MODEL)
    found["cases"], found["heads"] = np.array(list(HEADS)), np.array(list(HEADS.values()))
    return found


def record(given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """torch's outputs on `given` (the arrays of `inputs()`), keyed as the file stores them."""
    import torch  # only here: the test that reads the file never needs it

    def layer(case: str) -> torch.nn.MultiheadAttention:
        mha = torch.nn.MultiheadAttention(D_MODEL, HEADS[case], bias=False, batch_first=True, dtype=torch.float64)
        with torch.no_grad():  # torch computes x @ W.T: its weights are the course's, transposed
            mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([given[w].T for w in ("W_Q", "W_K", "W_V")])))
            mha.out_proj.weight.copy_(torch.from_numpy(given["W_O"].T))
        return mha

    found: dict[str, np.ndarray] = {}
    with torch.no_grad():
        x = torch.from_numpy(given["X"])[None]                                               # (1, n, d_model)
        n = x.shape[1]
        for case in ("self", "causal", "one_head"):
            blocked = torch.from_numpy(~np.tril(np.ones((n, n), dtype=bool))) if case == "causal" else None
            out, weights = layer(case)(x, x, x, attn_mask=blocked, average_attn_weights=False)
            found[f"{case}.output"], found[f"{case}.weights"] = out[0].numpy(), weights[0].numpy()
        mha = layer("cross")
        q, kv = torch.from_numpy(given["x_q"]), torch.from_numpy(given["x_kv"])
        out, averaged = mha(q, kv, kv)                                                       # (N, L, S)
        _, per_head = mha(q, kv, kv, average_attn_weights=False)                             # (N, h, L, S)
        found |= {"cross.output": out.numpy(), "cross.averaged": averaged.numpy(), "cross.per_head": per_head.numpy()}
        padding = torch.from_numpy(~given["key_mask"])
        out, weights = layer("padded")(kv, kv, kv, key_padding_mask=padding, average_attn_weights=False)
        found |= {"padded.output": out.numpy(), "padded.weights": weights.numpy()}
        biased = torch.nn.MultiheadAttention(D_MODEL, HEADS["torch_layout"], batch_first=True, dtype=torch.float64)
        biased.load_state_dict({name: torch.from_numpy(given[f"torch_layout.{name}"]) for name in TORCH_NAMES})
        allowed = torch.from_numpy(np.tril(np.ones((n, n), dtype=bool)))                    # the course's mask
        out, weights = biased(x, x, x, attn_mask=~allowed, average_attn_weights=False)
        found |= {"torch_layout.output": out[0].numpy(), "torch_layout.weights": weights[0].numpy()}
        _, misread = biased(x, x, x, attn_mask=allowed, average_attn_weights=False)
        found["misread.weights"] = misread[0].numpy()
        qkv = [x[0] @ torch.from_numpy(given[w]) for w in ("W_Q", "W_K", "W_V")]            # one head, (n, d_model)
        found["sdpa.output"] = torch.nn.functional.scaled_dot_product_attention(*qkv, attn_mask=allowed).numpy()
    found["torch_version"] = np.array(torch.__version__)
    return found


def write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz (np.load reads it) whose bytes depend on the arrays alone: entries in name order, each
    dated 1980-01-01, so recording the same answers again changes nothing git sees."""
    with zipfile.ZipFile(path, "w") as archive:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w") as entry:
                np.lib.format.write_array(entry, np.asarray(arrays[name]), allow_pickle=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the file to write (default: {OUT.name} beside this script)")
    args = parser.parse_args(argv)
    given = inputs()
    arrays = {**given, **record(given)}
    write(args.out, arrays)
    print(f"{args.out}: {len(arrays)} arrays, torch {arrays['torch_version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
