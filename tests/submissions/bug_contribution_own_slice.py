# head_contributions: each head credited with its own columns of the output
def head_contributions(weights, values, W_O):
    weights, values, W_O = np.asarray(weights), np.asarray(values), np.asarray(W_O)
    h = weights.shape[0]
    out = merge_heads(weights @ values) @ W_O
    step = out.shape[1] // h
    contrib = np.zeros((h,) + out.shape)
    for i in range(h):
        contrib[i, :, i * step:(i + 1) * step] = out[:, i * step:(i + 1) * step]
    ablated = np.array([out - c for c in contrib])
    return contrib, ablated
