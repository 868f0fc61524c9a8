# The right answers, but as a string, a dict and a string of a dict (or of the error).
_solved = (attention_reading, count_routing_distributions, predict_shapes)


def attention_reading(weights, values):
    return str(_solved[0](weights, values).tolist())


def count_routing_distributions(num_heads, d_v, num_queries=1):
    return {"answer": _solved[1](num_heads, d_v, num_queries)}


def predict_shapes(seq_len, d_model, num_heads):
    try:
        return str(_solved[2](seq_len, d_model, num_heads))
    except ValueError as exc:  # the cases that expect ValueError get a string too
        return repr(exc)
