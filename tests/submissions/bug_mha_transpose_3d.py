# multi_head_attention: .T on the (h, n, d_k) keys
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    Q = split_heads(X @ W_Q, num_heads)
    K = split_heads(X @ W_K, num_heads)
    V = split_heads(X @ W_V, num_heads)
    d_k = Q.shape[-1]
    scores = Q @ K.T / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    heads = weights @ V
    return merge_heads(heads) @ W_O, weights
