# Shrinks its stdin pipe to one page at import, then sleeps in the first problem: the next
# problem's request (sent ahead, larger than a page) cannot be written until it reads again. The
# grader must not wait for that write: the first problem times out, the others are graded.
import fcntl as _fcntl
import time as _time

_fcntl.fcntl(0, 1031, 4096)  # F_SETPIPE_SZ


def count_routing_distributions(*layer):
    _time.sleep(600)
