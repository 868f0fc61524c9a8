# multi_head_reading: the readings joined by a reshape
def multi_head_reading(weights, values, W_O):
    readings = np.einsum("h...t,htd->h...d", weights, values)
    h = readings.shape[0]
    if readings.ndim == 2:
        concat = readings.reshape(-1)
    else:
        concat = readings.reshape(readings.shape[1], h * readings.shape[2])
    return readings, concat, concat @ W_O
