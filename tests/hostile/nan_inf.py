# NaN and infinity where numbers are expected.
def attention_reading(weights, values):
    return np.full(np.shape(values)[-1], np.nan)


def count_routing_distributions(*layer):
    return float("inf")
