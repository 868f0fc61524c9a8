# Tries to take every sandbox uid from the students graded beside it: binds every abstract socket
# name a grader once used to claim uids, and tries to create or lock the claim files. Holds on
# to whatever it got while its first problem runs; answers correctly. Reports what it could do.
import os
import resource
import socket
import time

_solved = attention_reading
_held = []
_tried = {}


def _squat():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    except (ValueError, OSError):
        pass
    bound = 0
    for number in range(61000, 65000):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(f"\0mha-sandbox-{number}")
            _held.append(sock)
            bound += 1
        except OSError:
            sock.close()
    _tried["sockets"] = "some" if bound else "none"
    for folder in ("/run/mha-sandbox", "/var/lib/mha-sandbox"):
        try:
            with open(os.path.join(folder, "61000"), "a"):
                pass
            _tried[folder] = "OPEN"
        except OSError:
            _tried[folder] = "closed"


_squat()


def attention_reading(weights, values):
    if not _tried.get("slept"):
        time.sleep(0.3)  # classmates start their sessions meanwhile
    _tried["slept"] = "yes"
    return _solved(weights, values)


def predict_shapes(*args, **kwargs):
    raise PermissionError("claims: " + " ".join(f"{k}={v}" for k, v in sorted(_tried.items())))
