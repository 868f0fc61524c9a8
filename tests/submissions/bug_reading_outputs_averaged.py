# multi_head_reading: the heads' contributions averaged
def multi_head_reading(weights, values, W_O):
    weights, values, W_O = np.asarray(weights), np.asarray(values), np.asarray(W_O)
    h, d_v = values.shape[0], values.shape[-1]
    readings = np.stack([weights[i] @ values[i] for i in range(h)])
    concat = np.concatenate(list(readings), axis=-1)
    output = sum(readings[i] @ W_O[i * d_v:(i + 1) * d_v] for i in range(h)) / h   # mean over heads
    return readings, concat, output
