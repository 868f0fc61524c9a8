"""Model answers for the multi-head attention exercises (instructors only).

Shape legend: n queries, m keys, T positions, d_model model width, h heads,
d_k = d_model // h per-head width, d_v value width.
"""
import math

import numpy as np


def softmax(scores):
    """Softmax over the last axis. Subtracting each row's max keeps exp() from overflowing."""
    x = np.asarray(scores, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_reading(weights, values):
    """z = sum_j a_j v_j: one weight per position scales that position's whole value vector."""
    return np.asarray(weights, dtype=np.float64) @ np.asarray(values, dtype=np.float64)


def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1,
                                batch=1, causal=False, num_kv_heads=None):
    """One softmax row per query, per head, per sequence of the batch, per layer.

    d_v and d_k are widths and num_keys is the length of each row: none of them adds a row.
    A causal mask aligned top-left, as here, shortens rows but never removes one (query i still sees keys 0..i).
    Shared key/value heads (num_kv_heads) still leave every query head its own scores."""
    return num_layers * batch * num_heads * num_queries


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V; mask True = may attend."""
    d_k = Q.shape[-1]
    scores = Q @ K.T / math.sqrt(d_k)           # (n, m)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # exp(-inf) = 0: masked keys get no weight
    weights = softmax(scores)                   # (n, m), each row sums to 1
    return weights @ V, weights                 # (n, d_v), (n, m)


def split_heads(X, num_heads):
    """(L, d_model) -> (h, L, d_k); head i (i = 1..h, index i - 1) takes columns (i-1)*d_k:i*d_k."""
    n, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return X.reshape(n, num_heads, d_model // num_heads).transpose(1, 0, 2)


def merge_heads(H):
    """(h, L, d_v) -> (L, h * d_v), undoing split_heads."""
    h, n, d_head = H.shape
    return H.transpose(1, 0, 2).reshape(n, h * d_head)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    """Project, split into heads, attend in each head independently, concatenate, mix with W_O.

    Written without the optional problems' helpers (split_heads, merge_heads,
    scaled_dot_product_attention), so that it runs in the core alone."""
    n, d_model = X.shape
    d_k = d_model // num_heads
    q, k, v = ((X @ W).reshape(n, num_heads, d_k).transpose(1, 0, 2) for W in (W_Q, W_K, W_V))  # (h, n, d_k)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d_k)     # (h, n, n): each head scaled by its own width
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)            # the same mask for every head
    weights = softmax(scores)                               # every head normalizes its own rows
    concat = (weights @ v).transpose(1, 0, 2).reshape(n, d_model)   # (n, h * d_k), head 1 first
    return concat @ W_O, weights                            # (n, d_model), (h, n, n)


def predict_shapes(seq_len, d_model, num_heads, src_len=None, batch=None, d_v=None, average_weights=True):
    """Shapes inside multi-head attention, batch first: L queries, S keys, N sequences."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    h, L = num_heads, seq_len
    S = seq_len if src_len is None else src_len   # self-attention reads its own positions
    d_k = d_model // h
    d_v = d_k if d_v is None else d_v
    N = () if batch is None else (batch,)          # an optional leading batch axis
    return {
        "q_head": (*N, h, L, d_k),
        "k_head": (*N, h, S, d_k),
        "v_head": (*N, h, S, d_v),
        "scores": (*N, h, L, S),                   # every query against every key, per head
        "weights": (*N, h, L, S),
        "head_output": (*N, h, L, d_v),
        "concat": (*N, L, h * d_v),
        "output": (*N, L, d_model),
        "returned_weights": (*N, L, S) if average_weights else (*N, h, L, S),  # nn.MultiheadAttention
    }


def parameter_count(d_model, num_heads, bias=True):
    """W_Q, W_K, W_V, W_O are each d_model x d_model however the width is split into heads."""
    weights = 4 * d_model * d_model
    biases = 4 * d_model if bias else 0
    return weights + biases


def previous_token_head(seq_len):
    """Key j carries the direction of position j + 1, so query i matches key i - 1."""
    strength = math.sqrt(seq_len) * (10 + math.log(seq_len))
    W_Q = strength * np.eye(seq_len)
    W_K = np.eye(seq_len, k=1)
    return W_Q, W_K


def sink_head(seq_len):
    """Every query asks for one direction that only position 0's key has."""
    strength = math.sqrt(seq_len) * (10 + math.log(seq_len))
    W_Q = np.zeros((seq_len, seq_len))
    W_Q[:, 0] = strength
    W_K = np.zeros((seq_len, seq_len))
    W_K[0, 0] = 1.0
    return W_Q, W_K


def multi_head_reading(weights, values, W_O):
    """Each head reads its own values with its own row; join the readings head after head; then W_O."""
    weights, values = np.asarray(weights, dtype=np.float64), np.asarray(values, dtype=np.float64)
    one_query = weights.ndim == 2
    rows = weights[:, None, :] if one_query else weights   # (h, n, T)
    readings = rows @ values                               # (h, n, d_v)
    concat = np.concatenate(list(readings), axis=-1)       # (n, h * d_v): head 0's coordinates first
    output = concat @ W_O                                  # (n, d_model)
    if one_query:
        return readings[:, 0], concat[0], output[0]
    return readings, concat, output


def head_contributions(weights, values, W_O):
    """Head i adds z^(i) W_O^(i) (rows (i-1)*d_v:i*d_v of W_O); removing it takes exactly that away."""
    z = np.asarray(weights, dtype=np.float64) @ np.asarray(values, dtype=np.float64)  # (h, n, d_v)
    h, n, d_v = z.shape
    blocks = np.asarray(W_O, dtype=np.float64).reshape(h, d_v, -1)                     # (h, d_v, d_model)
    contributions = z @ blocks                                                         # (h, n, d_model)
    output = contributions.sum(axis=0)
    return contributions, output - contributions


def two_head_layer(seq_len):
    """Columns 0:T are head 1 (previous-token), columns T:2T head 2 (sink): each its own softmax."""
    prev_q, prev_k = previous_token_head(seq_len)
    sink_q, sink_k = sink_head(seq_len)
    return np.hstack([prev_q, sink_q]), np.hstack([prev_k, sink_k])


def padded_batch_attention(X, W_Q, W_K, W_V, W_O, num_heads, key_mask=None):
    """Multi-head attention over a batch; padded keys score -inf, and a row with no real key reads nothing."""
    X = np.asarray(X, dtype=np.float64)
    N, L, d_model = X.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads

    def heads(W):
        return (X @ W).reshape(N, L, num_heads, d_k).transpose(0, 2, 1, 3)   # (N, h, L, d_k)

    q, k, v = heads(W_Q), heads(W_K), heads(W_V)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)                    # (N, h, L, S)
    if key_mask is not None:
        keep = np.asarray(key_mask, dtype=bool)[:, None, None, :]            # (N, 1, 1, S): keys only
        scores = np.where(keep, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)   # a row of -inf: exp gives zeros, not inf - inf = nan
    e = np.exp(scores - top)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)     # empty rows stay 0
    concat = (weights @ v).transpose(0, 2, 1, 3).reshape(N, L, d_model)      # (N, L, h * d_k)
    return concat @ W_O, weights


def one_head_both_designs(seq_len, max_scale):
    """One head scoring p [j = i - 1] + s [j = 0] with p, s <= max_scale: the best it does for the
    worst query's smaller target weight. Both scales as large as allowed (raising either never
    lowers the smaller weight of the pair it favours less), and the worst query is the last."""
    c = math.exp(max_scale)
    return c / (2 * c + seq_len - 2)       # the last query: two targets and T - 2 keys scored 0


def run_model(tokens, E, P, W_Q, W_K, W_V, W_O, W_U, num_heads):
    """Embed with positions, one causal multi-head attention layer added to its input, read out."""
    tokens = np.asarray(tokens).astype(int)
    T = len(tokens)
    X = E[tokens] + P[:T]                                   # (T, d_model)
    causal = np.tril(np.ones((T, T), dtype=bool))           # query i reads keys 0 .. i
    out, weights = multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, causal)
    return weights, (X + out) @ W_U                         # (h, T, T), (T, 2V)


def head_scores(weights):
    """Head k's mean weight on key i - 1 and on key 0, over the sequences and queries 2 .. T-1."""
    w = np.asarray(weights, dtype=np.float64)   # (N, h, T, T)
    i = np.arange(2, w.shape[-1])               # query 1's previous key is key 0: it tells nothing
    previous = w[:, :, i, i - 1].mean(axis=(0, 2))
    first = w[:, :, i, 0].mean(axis=(0, 2))
    return previous, first


def ablation_deltas(X, readings, W_O, W_U, tokens):
    """Zero one head's reading before W_O, rerun the residual and readout, compare the losses."""
    X, z = np.asarray(X, dtype=np.float64), np.asarray(readings, dtype=np.float64)
    tokens = np.asarray(tokens).astype(int)
    N, h, T, d_k = z.shape

    def loss(z):
        """Both readouts' cross-entropies (token[i-1], then token[0]), averaged over positions 1 .. T-1."""
        concat = z.transpose(0, 2, 1, 3).reshape(N, T, h * d_k)   # (N, T, h * d_k), head 1 first
        logits = (X + concat @ W_O) @ W_U                          # (N, T, 2V)
        V = logits.shape[-1] // 2
        total = 0.0
        for part, target in ((logits[:, 1:, :V], tokens[:, :-1]), (logits[:, 1:, V:], tokens[:, :1])):
            shifted = part - part.max(axis=-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))   # (N, T-1, V)
            target = np.broadcast_to(target, log_p.shape[:2])
            total -= np.take_along_axis(log_p, target[..., None], axis=-1).mean()
        return total

    whole = loss(z)
    deltas = []
    for k in range(h):
        removed = z.copy()
        removed[:, k] = 0.0
        deltas.append(loss(removed) - whole)
    return np.array(deltas)


def thin_head(k, mask=None):
    """Width 1: the score is q_i k_j, so q_i > 0 ranks the keys as k does and q_i < 0 reverses
    the ranking. A query can prefer only the largest or the smallest key it may see."""
    k = np.asarray(k, dtype=np.float64)                         # (T,)
    T = k.shape[0]
    allowed = np.ones((T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    reach = np.zeros((T, T))
    for i in range(T):
        keys = np.flatnonzero(allowed[i])
        if keys.size:
            reach[i, keys[np.argmax(k[keys])]] = 1              # any q_i > 0
            reach[i, keys[np.argmin(k[keys])]] = 1              # any q_i < 0
    previous = all(reach[i, i - 1] for i in range(1, T))        # each query picks its own q_i
    return reach, float(previous)


def one_wide_head(weights, tokens, vocab):
    """The split of one head's weight between key i - 1 and key 0, and which token's key wins it."""
    w = np.asarray(weights, dtype=np.float64)                   # (N, T, T)
    tokens = np.asarray(tokens).astype(int)                     # (N, T)
    i = np.arange(2, w.shape[-1])                               # query 1's two keys are one
    prev, first = w[:, i, i - 1], w[:, i, 0]                    # (N, T - 2)
    t_prev, t_first = tokens[:, i - 1], np.broadcast_to(tokens[:, :1], prev.shape)
    differ = t_prev != t_first                                  # only a contest says who is favoured
    favour = np.zeros(vocab)
    for t in range(vocab):
        won = np.concatenate([(prev - first)[differ & (t_prev == t)], (first - prev)[differ & (t_first == t)]])
        favour[t] = won.mean() if won.size else 0.0
    return np.array([prev.mean(), first.mean()]), np.argsort(-favour, kind="stable")


def from_torch_layout(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """PyTorch stacks the Q, K, V projections by rows and applies each as x A^T: slice, then transpose."""
    E = out_proj_weight.shape[0]
    W_Q, W_K, W_V = (in_proj_weight[i * E:(i + 1) * E].T for i in range(3))   # (E, E) each
    b_Q, b_K, b_V = (in_proj_bias[i * E:(i + 1) * E] for i in range(3))       # (E,) each
    return W_Q, W_K, W_V, out_proj_weight.T, b_Q, b_K, b_V, out_proj_bias
