# Leaves children behind and answers correctly: the problem loses its points, and no process may survive grading.
import os

_solved = attention_reading


def attention_reading(weights, values):
    if os.fork() == 0:  # a plain fork that sleeps
        import time
        time.sleep(600)
        os._exit(0)
    os.posix_spawnp("sleep", ["sleep", "9" + TOKEN], dict(os.environ))  # a program of its own
    return _solved(weights, values)
