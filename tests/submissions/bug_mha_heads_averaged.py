# multi_head_attention: one attention map, the heads' maps averaged
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    Qh, Kh, Vh = (split_heads(X @ W, num_heads) for W in (W_Q, W_K, W_V))
    outs, maps = [], []
    for q, k, v in zip(Qh, Kh, Vh):
        o, a = scaled_dot_product_attention(q, k, v, mask=mask)
        outs.append(o)
        maps.append(a)
    attn = sum(maps) / num_heads   # as nn.MultiheadAttention returns it
    return merge_heads(np.array(outs)) @ W_O, attn
