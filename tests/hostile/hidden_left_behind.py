# In the hidden phase (attention_reading called after predict_shapes, the last problem of the
# public phase), writes what it was passed to every place it can write ($HOME, its working
# folder, /tmp, /var/tmp, /dev/shm), leaves a daemon that keeps writing it there, locks its
# files and home away (mode 000) and, where it can, its keyrings (no write, no setattr), then
# crashes. A later process of the session raises, at import, with anything of that it finds (in
# those places, or in a classmate process's home beside its own): no hidden input may reach any
# report, and the later problems keep their points (nothing was there to find).
import ctypes
import os
import platform
import time

_solved = attention_reading
_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine(), (None, None))
_libc = ctypes.CDLL(None, use_errno=True)
_NAME = "left-" + TOKEN


def _places():
    home, here = os.path.expanduser("~"), os.getcwd()
    places = [home, here, "/tmp", "/var/tmp", "/dev/shm"]
    try:  # the session folder's other homes (earlier processes')
        parent = os.path.dirname(here)
        places += [os.path.join(parent, name) for name in os.listdir(parent)]
    except OSError:
        pass
    return places


def _found():
    for folder in _places():
        try:
            os.chmod(folder, 0o700)  # locked away by the process that left it (the same uid)
        except OSError:
            pass
        try:
            os.chmod(os.path.join(folder, _NAME), 0o600)
            with open(os.path.join(folder, _NAME)) as handle:
                return handle.read()
        except OSError:
            continue
    return None


_seen = _found()
if _seen:
    raise ImportError("found: " + _seen)

_calls = []
_shapes = predict_shapes


def predict_shapes(*args):
    _calls.append("public phase over")
    return _shapes(*args)


def _leave(secret):
    for folder in _places()[:5]:
        path = os.path.join(folder, _NAME)
        try:
            with open(path, "w") as handle:
                handle.write(secret)
            os.chmod(path, 0)
        except OSError:
            pass


def _lock_keyrings():
    if _CALLS[0] is None:
        return
    for ring in (-4, -5):  # the user and user-session keyrings: a key, then view only for everyone
        _libc.syscall(ctypes.c_long(_CALLS[0]), b"user", (TAG + "-locked").encode(), b"x", ctypes.c_size_t(1),
                      ctypes.c_long(ring))
        _libc.syscall(ctypes.c_long(_CALLS[1]), ctypes.c_long(5), ctypes.c_long(ring), ctypes.c_long(0x01010101))


def attention_reading(weights, values):
    if not _calls:
        return _solved(weights, values)
    secret = "LEAK" + repr(values.tolist())[:60]
    _leave(secret)
    if os.fork() == 0:  # a daemon that writes it again and again
        os.setsid()
        if os.fork() == 0:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                _leave(secret)
                time.sleep(0.02)
        os._exit(0)
    _lock_keyrings()
    for folder in (os.path.expanduser("~"), os.getcwd()):
        try:
            os.chmod(folder, 0)
        except OSError:
            pass
    time.sleep(0.1)
    os._exit(3)
