"""Reference multi-head attention in float64 numpy: the grader's source of truth.

Shape legend
    n        query positions (rows of Q; in self-attention also the key positions)
    m        key/value positions
    T        positions read by one attention row
    d_model  model width;  h heads;  d_k = d_model // h (per-head query/key/value width)
    d_v      value width

Every function has the name and signature of the student API. The reference also records
what it does: each softmax normalization (one per query row per head) and the shape of each
intermediate of multi-head attention. ``count_routing_distributions``, ``predict_shapes`` and
``parameter_count`` are answered by running the computation and reading that record, so the
grader never checks them against a formula typed a second time.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Trace", "tracing", "softmax", "attention_reading", "count_routing_distributions",
    "scaled_dot_product_attention", "split_heads", "merge_heads", "multi_head_attention",
    "predict_shapes", "parameter_shapes", "build_parameters", "parameter_count", "previous_token_head", "sink_head",
    "causal_mask", "head_pattern_weights", "attention_layer", "multi_head_reading", "head_contributions",
    "two_head_layer", "layer_pattern_weights", "from_torch_layout", "biased_attention",
]


@dataclass
class Trace:
    """What one run of the reference did: softmax rows normalized and intermediate shapes."""

    normalizations: int = 0
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def shape(self, name: str, array: np.ndarray) -> np.ndarray:
        self.shapes[name] = tuple(int(s) for s in array.shape)
        return array


_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("mha_trace", default=None)


@contextlib.contextmanager
def tracing() -> Iterator[Trace]:
    """Record every softmax normalization and named shape inside the block."""
    trace = Trace()
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def _record(name: str, array: np.ndarray) -> np.ndarray:
    trace = _TRACE.get()
    return trace.shape(name, array) if trace is not None else array


def softmax(scores) -> np.ndarray:
    """Softmax over the last axis; any leading shape. Subtracting the row max keeps exp finite."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis")
    with np.errstate(invalid="ignore"):
        shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    trace = _TRACE.get()
    if trace is not None:
        # one distribution per row of the last axis, for every leading index (heads, queries)
        trace.normalizations += x.size // x.shape[-1] if x.shape[-1] else 0
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_reading(weights, values) -> np.ndarray:
    """z = sum_j a_j v_j: weights (T,) or (n, T), values (T, d_v) -> (d_v,) or (n, d_v)."""
    a = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    return a @ v  # the same scalar a_j multiplies every coordinate of v_j


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """(n, m) bool mask, True where query i may attend to key j (j <= i)."""
    return np.tri(n, n if m is None else m, dtype=bool)


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask) -> tuple[np.ndarray, np.ndarray]:
    """Attention over the last two axes: q (..., n, d_k), k (..., m, d_k), v (..., m, d_v)."""
    d_k = q.shape[-1]
    scores = _record("scores", q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k))  # (..., n, m)
    if mask is not None:
        allowed = np.asarray(mask, dtype=bool)
        if not allowed.any(axis=-1).all():
            raise ValueError("mask leaves a query row with no position it may attend to")
        scores = np.where(allowed, scores, -np.inf)  # masked keys get exactly zero weight
    weights = _record("weights", softmax(scores))
    return weights @ v, weights  # (..., n, d_v), (..., n, m)


def scaled_dot_product_attention(Q, K, V, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T / sqrt(d_k)) V. Q (n, d_k), K (m, d_k), V (m, d_v), mask bool (n, m)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    return _attend(q, k, v, mask)


def split_heads(X, num_heads: int) -> np.ndarray:
    """(n, d_model) -> (h, n, d_k): head i gets columns i*d_k:(i+1)*d_k."""
    x = np.asarray(X, dtype=np.float64)
    n, d_model = x.shape
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return x.reshape(n, num_heads, d_k).transpose(1, 0, 2)  # (n, h, d_k) -> (h, n, d_k)


def merge_heads(H) -> np.ndarray:
    """(h, n, d_head) -> (n, h * d_head): the inverse of split_heads."""
    heads = np.asarray(H, dtype=np.float64)
    h, n, d_head = heads.shape
    return heads.transpose(1, 0, 2).reshape(n, h * d_head)  # (h, n, d) -> (n, h, d) -> (n, h*d)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads: int, mask=None):
    """Self-attention with h heads. X (n, d_model), each W (d_model, d_model).

    Returns output (n, d_model) and the per-head weights (h, n, n).
    """
    x = np.asarray(X, dtype=np.float64)
    w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64) for w in (W_Q, W_K, W_V, W_O))
    q = _record("q_head", split_heads(x @ w_q, num_heads))  # (h, n, d_k)
    k = split_heads(x @ w_k, num_heads)                    # (h, n, d_k)
    v = split_heads(x @ w_v, num_heads)                    # (h, n, d_k)
    heads, weights = _attend(q, k, v, mask)                # (h, n, d_k), (h, n, n)
    _record("head_output", heads)
    concat = _record("concat", merge_heads(heads))         # (n, d_model)
    output = _record("output", concat @ w_o)               # W_O mixes across head slices
    return output, weights


def count_routing_distributions(num_heads: int, d_v: int, num_queries: int = 1, num_keys: int | None = None,
                                d_k: int | None = None, num_layers: int = 1, batch: int = 1,
                                causal: bool = False, num_kv_heads: int | None = None) -> int:
    """Run `num_layers` layers of `num_heads` heads over a batch and count their softmax rows.

    Queries come from `num_queries` positions, keys and values from `num_keys` (cross-attention;
    None: self-attention, as many keys as queries); d_k (None: d_v) is the query/key width.
    `num_kv_heads` (None: num_heads) key/value heads are shared by groups of query heads
    (1: multi-query attention, between 1 and num_heads: grouped-query attention).
    """
    m = num_queries if num_keys is None else num_keys
    width = d_v if d_k is None else d_k
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if kv_heads < 1 or num_heads % kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={kv_heads}")
    rng = np.random.default_rng(0)
    mask = causal_mask(num_queries, m) if causal else None
    # Widths add no rows, and every layer has the same shapes as the first: the layer is run once, with
    # widths of at most 1 (a width of 0 or less is kept, so it fails as a full-size layer would), and its
    # rows counted for each layer. tests/test_reference.py checks that this equals running every layer
    # at full size.
    layers = len(range(num_layers))
    width, d_v = _narrow(width), _narrow(d_v)
    with tracing() as trace:
        for _ in range(min(layers, 1)):  # every layer runs its own heads on its own scores
            q = rng.standard_normal((batch, num_heads, num_queries, width))  # (N, h, L, d_k)
            k = rng.standard_normal((batch, kv_heads, m, width))             # (N, h_kv, S, d_k)
            v = rng.standard_normal((batch, kv_heads, m, d_v))               # (N, h_kv, S, d_v)
            group = num_heads // kv_heads  # query heads reading one key/value head
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # (N, h, S, d_k), (N, h, S, d_v)
            _attend(q, k, v, mask)
    return trace.normalizations * layers


def _narrow(width):
    """A width of 1 for any integer width above 1: the count of softmax rows is the same."""
    return 1 if isinstance(width, (int, np.integer)) and not isinstance(width, bool) and width > 1 else width


def _split(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(..., n, h*d) -> (..., h, n, d): head i gets columns i*d:(i+1)*d."""
    *lead, n, width = x.shape
    return np.swapaxes(x.reshape(*lead, n, num_heads, width // num_heads), -2, -3)


def _merge(heads: np.ndarray) -> np.ndarray:
    """(..., h, n, d) -> (..., n, h*d), the inverse of _split."""
    *lead, h, n, d = heads.shape
    return np.swapaxes(heads, -2, -3).reshape(*lead, n, h * d)


def attention_layer(x_q, x_kv, W_Q, W_K, W_V, W_O, num_heads: int, average_weights: bool = True):
    """Multi-head attention in PyTorch's batch-first layout, cross-attention allowed.

    x_q (N, L, d_model) queries' inputs, x_kv (N, S, d_model) keys' and values' inputs (the
    batch axis N is optional); W_Q, W_K (d_model, h*d_k), W_V (d_model, h*d_v), W_O (h*d_v, d_model).
    Returns the output (N, L, d_model) and the weights as nn.MultiheadAttention returns them:
    averaged over the heads (N, L, S), or per head (N, h, L, S).
    """
    q = _record("q_head", _split(x_q @ W_Q, num_heads))   # (N, h, L, d_k)
    k = _record("k_head", _split(x_kv @ W_K, num_heads))  # (N, h, S, d_k)
    v = _record("v_head", _split(x_kv @ W_V, num_heads))  # (N, h, S, d_v)
    heads, weights = _attend(q, k, v, None)               # (N, h, L, d_v), (N, h, L, S)
    _record("head_output", heads)
    concat = _record("concat", _merge(heads))             # (N, L, h*d_v)
    output = _record("output", concat @ W_O)              # (N, L, d_model)
    returned = weights.mean(axis=-3) if average_weights else weights
    return output, _record("returned_weights", returned)


def predict_shapes(seq_len: int, d_model: int, num_heads: int, src_len: int | None = None,
                   batch: int | None = None, d_v: int | None = None,
                   average_weights: bool = True) -> dict[str, tuple[int, ...]]:
    """Run one multi-head attention layer and report the shapes it actually produced.

    seq_len = L query positions, src_len = S key positions (None: self-attention, S = L),
    batch = N (None: no batch axis), d_v the per-head value width (None: d_k = d_model / h).
    """
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    width_v = d_k if d_v is None else d_v
    lead = () if batch is None else (batch,)
    # shapes do not depend on the values: all-ones inputs and projections suffice
    x_q = np.ones((*lead, seq_len, d_model))
    x_kv = np.ones((*lead, seq_len if src_len is None else src_len, d_model))
    w_qk, w_v, w_o = np.ones((d_model, d_model)), np.ones((d_model, num_heads * width_v)), np.ones((num_heads * width_v, d_model))
    with tracing() as trace:
        attention_layer(x_q, x_kv, w_qk, w_qk, w_v, w_o, num_heads, average_weights)
    return dict(trace.shapes)


def parameter_shapes(d_model: int, num_heads: int, bias: bool = True) -> dict[str, tuple[int, ...]]:
    """The shape of every learned array of one attention layer, kept per head as an implementation would."""
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    shapes: dict[str, tuple[int, ...]] = {}
    for i in range(num_heads):
        for name in ("Q", "K", "V"):
            shapes[f"W_{name}[{i}]"] = (d_model, d_k)  # this head's slice
            if bias:
                shapes[f"b_{name}[{i}]"] = (d_k,)
    shapes["W_O"] = (num_heads * d_k, d_model)  # mixes the concatenated heads
    if bias:
        shapes["b_O"] = (d_model,)
    return shapes


def build_parameters(d_model: int, num_heads: int, bias: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """The learned arrays of one attention layer: weights drawn at random, biases zero."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape) if name.startswith("W_") else np.zeros(shape)
            for name, shape in parameter_shapes(d_model, num_heads, bias).items()}


def parameter_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    """Count the entries of the arrays build_parameters allocates (from their shapes, without
    allocating them)."""
    return int(sum(math.prod(shape) for shape in parameter_shapes(d_model, num_heads, bias).values()))


def head_pattern_weights(seq_len: int, W_Q, W_K) -> np.ndarray:
    """Weights (n, n) of one head with X = I (one-hot positions), W_V = W_O = I, causal mask."""
    eye = np.eye(seq_len)
    _, weights = multi_head_attention(eye, W_Q, W_K, eye, eye, 1, mask=causal_mask(seq_len))
    return weights[0]


def previous_token_head(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K so that query i (i >= 1) puts almost all its weight on key i - 1."""
    # score(i, j) = c * [j == i - 1] / sqrt(T); a gap of 12 nats beats up to T - 1 rivals
    c = math.sqrt(seq_len) * (12.0 + math.log(seq_len))
    w_q = c * np.eye(seq_len)
    w_k = np.eye(seq_len, k=1)  # row j is e_{j+1}: key j answers query j + 1
    return w_q, w_k


def sink_head(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K so that every query puts almost all its weight on position 0."""
    c = math.sqrt(seq_len) * (12.0 + math.log(seq_len))
    w_q = np.zeros((seq_len, seq_len))
    w_q[:, 0] = c          # every query carries the same 'look for the start' direction
    w_k = np.zeros((seq_len, seq_len))
    w_k[0, 0] = 1.0        # only position 0's key has that direction
    return w_q, w_k



# --- several heads in one layer: their readings, their contributions, two designed heads -------

def multi_head_reading(weights, values, W_O):
    """Each head reads its own values with its own weights; the readings are joined, then W_O.

    weights (h, T) for one query or (h, n, T) for n queries; values (h, T, d_v), head i's
    value vectors; W_O (h*d_v, d_model). Returns (readings, concat, output):
    (h, d_v), (h*d_v,), (d_model,) for one query; (h, n, d_v), (n, h*d_v), (n, d_model) for n.
    """
    a = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    w_o = np.asarray(W_O, dtype=np.float64)
    one_query = a.ndim == 2
    rows = a[:, None, :] if one_query else a              # (h, n, T)
    readings = rows @ v                                   # (h, n, d_v): head i uses only its own row
    concat = merge_heads(readings)                        # (n, h*d_v): head 0's coordinates first
    output = concat @ w_o                                 # (n, d_model)
    if one_query:
        return readings[:, 0], concat[0], output[0]
    return readings, concat, output


def head_contributions(weights, values, W_O):
    """What each head adds to the layer's output, and the output with each head removed.

    weights (h, n, m) per-head patterns, values (h, m, d_v) per-head values (X W_V^(i)), W_O
    (h*d_v, d_model). output = concat(z_1..z_h) W_O = sum_i z_i W_O^(i), where W_O^(i) is the
    block of rows i*d_v:(i+1)*d_v. Returns contributions (h, n, d_model), z_i W_O^(i) for each
    head, and ablated (h, n, d_model): the output computed again with head i's reading zeroed.
    """
    a = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    w_o = np.asarray(W_O, dtype=np.float64)
    z = a @ v                                             # (h, n, d_v)
    h, _, d_v = z.shape
    blocks = w_o.reshape(h, d_v, w_o.shape[-1])           # (h, d_v, d_model): W_O^(i)
    contributions = z @ blocks                            # (h, n, d_model)
    ablated = []
    for i in range(h):                                    # remove head i and run the projection again
        kept = z.copy()
        kept[i] = 0.0
        ablated.append(merge_heads(kept) @ w_o)
    return contributions, np.stack(ablated)


def two_head_layer(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_Q, W_K (seq_len, 2*seq_len) of a two-head layer: head 0 previous-token, head 1 sink."""
    prev_q, prev_k = previous_token_head(seq_len)
    sink_q, sink_k = sink_head(seq_len)
    return np.hstack([prev_q, sink_q]), np.hstack([prev_k, sink_k])  # columns 0:T head 0, T:2T head 1


def layer_pattern_weights(seq_len: int, W_Q, W_K, num_heads: int) -> np.ndarray:
    """Weights (h, n, n) of a designed layer: X = I, W_V = W_O = I per head, causal mask.

    W_Q and W_K are (seq_len, h*d); head i uses columns i*d:(i+1)*d, scaled by its own width d.
    """
    eye = np.eye(seq_len)
    q = split_heads(eye @ np.asarray(W_Q, dtype=np.float64), num_heads)  # (h, n, d)
    k = split_heads(eye @ np.asarray(W_K, dtype=np.float64), num_heads)
    _, weights = _attend(q, k, q, causal_mask(seq_len))
    return weights


# --- PyTorch's layout: nn.MultiheadAttention's parameters as the course's matrices ------------

def from_torch_layout(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """The course's W_Q, W_K, W_V, W_O and biases b_Q, b_K, b_V, b_O of an nn.MultiheadAttention.

    torch stores in_proj_weight (3E, E) as the query, key and value projections stacked by rows,
    in_proj_bias (3E,) likewise, and out_proj as a Linear(E, E); a Linear computes x A^T + b. The
    course computes X W + b, so each W is a block of rows, transposed. Heads need no reordering:
    torch and split_heads both give head i the columns (i - 1) * d_k to i * d_k - 1.
    Returns (W_Q, W_K, W_V, W_O), each (E, E), then (b_Q, b_K, b_V, b_O), each (E,).
    """
    w_in = np.asarray(in_proj_weight, dtype=np.float64)
    b_in = np.asarray(in_proj_bias, dtype=np.float64)
    w_out = np.asarray(out_proj_weight, dtype=np.float64)
    b_out = np.asarray(out_proj_bias, dtype=np.float64)
    E = w_out.shape[0]
    if w_in.shape != (3 * E, E) or b_in.shape != (3 * E,) or w_out.shape != (E, E) or b_out.shape != (E,):
        raise ValueError(f"expected in_proj_weight (3E, E), in_proj_bias (3E,), out_proj (E, E) and (E,) "
                         f"for E = {E}; got {w_in.shape}, {b_in.shape}, {w_out.shape}, {b_out.shape}")
    w_q, w_k, w_v = (w_in[i * E:(i + 1) * E].T for i in range(3))  # rows of A -> columns of W: (E, E)
    b_q, b_k, b_v = (b_in[i * E:(i + 1) * E] for i in range(3))     # (E,)
    return w_q, w_k, w_v, w_out.T, b_q, b_k, b_v, b_out


def biased_attention(X, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, num_heads: int, mask=None):
    """multi_head_attention with biases: Q = X W_Q + b_Q (and K, V likewise), output + b_O.

    A column of ones appended to X carries each bias as one more row of its W, so the course's
    own multi_head_attention runs the biased layer unchanged. X (n, d_model); returns the output
    (n, d_model) and the per-head weights (h, n, n).
    """
    x = np.asarray(X, dtype=np.float64)
    ones = np.hstack([x, np.ones((len(x), 1))])                     # (n, d_model + 1)
    w_q, w_k, w_v = (np.vstack([W, b]) for W, b in ((W_Q, b_Q), (W_K, b_K), (W_V, b_V)))
    out, weights = multi_head_attention(ones, w_q, w_k, w_v, W_O, num_heads, mask=mask)
    return out + np.asarray(b_O, dtype=np.float64), weights
