# multi_head_attention: the mask accepted and never used
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    heads, maps = [], []
    Q, K, V = split_heads(X @ W_Q, num_heads), split_heads(X @ W_K, num_heads), split_heads(X @ W_V, num_heads)
    for h in range(num_heads):
        out, attn = scaled_dot_product_attention(Q[h], K[h], V[h])
        heads.append(out)
        maps.append(attn)
    return merge_heads(np.stack(heads)) @ W_O, np.stack(maps)
