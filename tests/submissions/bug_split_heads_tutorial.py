# split_heads: copied from a batched tutorial (view as (batch, heads, seq, depth), then transpose)
def split_heads(X, num_heads):
    seq_len, d_model = X.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    depth = d_model // num_heads
    x = np.reshape(X, (1, num_heads, seq_len, depth))
    return np.transpose(x, (0, 2, 1, 3))
