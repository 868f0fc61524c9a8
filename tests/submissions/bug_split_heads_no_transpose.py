# split_heads: reshaped to (n, h, d_k) and returned
def split_heads(X, num_heads):
    seq_len, d_model = X.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model {d_model} is not divisible by {num_heads} heads")
    depth = d_model // num_heads
    return np.reshape(X, (seq_len, num_heads, depth))
