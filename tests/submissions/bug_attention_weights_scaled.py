# scaled_dot_product_attention: the scale applied after the softmax
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.T
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    attention = softmax(scores)
    attention = attention / np.sqrt(Q.shape[1])   # scaled dot-product
    return attention @ V, attention
