# multi_head_attention: the heads joined by a reshape
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, d_model = X.shape
    q, k, v = [split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V)]
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(d_model // num_heads)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    concat = (weights @ v).reshape(n, d_model)
    return concat @ W_O, weights
