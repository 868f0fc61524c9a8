# KeyboardInterrupt raised inside a function.
def predict_shapes(seq_len, d_model, num_heads):
    raise KeyboardInterrupt
