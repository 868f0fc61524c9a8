# scaled_dot_product_attention: the mask applied to the weights, with -inf
def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = K.shape[-1]
    weights = softmax(Q @ K.T / math.sqrt(d_k))
    if mask is not None:
        weights = np.where(mask == False, float("-inf"), weights)
    return weights @ V, weights
