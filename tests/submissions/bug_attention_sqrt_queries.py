# scaled_dot_product_attention: scaled by the number of queries
def scaled_dot_product_attention(Q, K, V, mask=None):
    n_queries = Q.shape[0]
    scores = np.dot(Q, K.T) / np.sqrt(n_queries)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    attn = softmax(scores)
    return np.dot(attn, V), attn
