# softmax: the "works for multi-dimensional arrays" answer, pasted as found
def softmax(scores):
    """Compute softmax values for each sets of scores in x."""
    e_x = np.exp(scores - np.max(scores))
    return e_x / e_x.sum(axis=0)
