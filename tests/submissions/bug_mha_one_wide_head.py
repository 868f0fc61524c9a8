# multi_head_attention: one head over the whole width
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.T / np.sqrt(K.shape[1])
    if mask is not None:
        scores[~mask] = -np.inf
    weights = softmax(scores)
    return (weights @ V) @ W_O, weights
