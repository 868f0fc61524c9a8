# scaled_dot_product_attention: scaled by the sequence length of the keys
def scaled_dot_product_attention(Q, K, V, mask=None):
    seq_len = len(K)
    scores = Q @ K.T
    scores = scores / seq_len ** 0.5
    if mask is not None:
        scores[~mask] = -1e9
    weights = softmax(scores)
    output = weights @ V
    return output, weights
