# multi_head_attention: a ViT-style block that scales the attention after the softmax
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, dim = X.shape
    head_dim = dim // num_heads
    q = (X @ W_Q).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    k = (X @ W_K).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    v = (X @ W_V).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    attn = q @ k.transpose(0, 2, 1)
    if mask is not None:
        attn = np.where(mask, attn, -1e9)
    attn = softmax(attn) / np.sqrt(dim)
    x = (attn @ v).transpose(1, 0, 2).reshape(n, dim)
    return x @ W_O, attn
