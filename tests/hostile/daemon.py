# A double fork + setsid daemon (reparented away from the worker), then a correct answer: the problem loses its points.
import os
import time

_solved = count_routing_distributions


def count_routing_distributions(*layer):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    time.sleep(0.05)  # the middle process has exited: the daemon is an orphan
    return _solved(*layer)
