# multi_head_attention: ported from a ViT block (scale from the model width, a PyTorch-style mask)
def multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads, mask=None):
    n, dim = X.shape
    head_dim = dim // num_heads
    scale = dim ** -0.5
    q = (X @ W_Q).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    k = (X @ W_K).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    v = (X @ W_V).reshape(n, num_heads, head_dim).transpose(1, 0, 2)
    attn = (q @ k.transpose(0, 2, 1)) * scale
    if mask is not None:
        attn = attn.masked_fill(mask == 0, float("-inf"))
    attn = softmax(attn)
    x = (attn @ v).transpose(1, 0, 2).reshape(n, dim)
    return x @ W_O, attn
