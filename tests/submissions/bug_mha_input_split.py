# multi_head_attention: the input split into heads, each projected by its own block
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, d_model = X.shape
    d_k = d_model // num_heads
    outputs, all_weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        x_i = X[:, cols]                       # this head's part of the input
        q = x_i @ W_Q[cols, cols]
        k = x_i @ W_K[cols, cols]
        v = x_i @ W_V[cols, cols]
        out, w = scaled_dot_product_attention(q, k, v, mask)
        outputs.append(out)
        all_weights.append(w)
    return np.concatenate(outputs, axis=1) @ W_O, np.array(all_weights)
