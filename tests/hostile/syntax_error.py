# A syntax error: the report names its line (the 4th line of this file).


def attention_reading(weights, values)
    return weights @ values
