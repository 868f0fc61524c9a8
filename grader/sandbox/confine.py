"""What a student process does to itself before any student code runs: resource limits, the
switch to the student's uid, process flags, the session marker in its environment, and the
counting stdout and stderr student code finds.

Loaded by path from `worker.py` (which runs as a script, with no grader package on its path);
it imports nothing but the standard library.
"""
import ctypes
import os
import platform
import resource
import signal
import sys

LIMITS = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC, "cpu": resource.RLIMIT_CPU,
          "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311}.get(platform.machine())
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 1, 7, 22
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -2, -4, -5


def set_limits(spec, strict):
    """Lower the resource limits (soft = hard, so student code cannot raise them again). A limit
    the system refuses (RLIMIT_AS on macOS...) is skipped unless `strict` (as root, on Linux)."""
    for item in spec.split(","):
        name, _, value = item.partition("=")
        limit = int(value)
        try:
            hard = resource.getrlimit(LIMITS[name])[1]
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(LIMITS[name], (limit, limit))
        except (ValueError, OSError):
            if strict:
                raise


def become(uid, gid):
    """Switch to the student's uid and gid for good, with no supplementary groups."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError(f"credentials are {os.getresuid()}/{os.getresgid()}/{os.getgroups()}")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError("root could be regained")


def _keyctl(*args):
    """keyctl(2), or -1 where the system has none (not Linux, no keyrings in the kernel)."""
    if SYS_KEYCTL is None:
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(ctypes.c_long(SYS_KEYCTL), *(ctypes.c_long(a) for a in args))


def new_session_keyring():
    """Before the switch to the student's uid: leave the session keyring inherited from the
    grader for a new, empty one (owned by root, possessed by this process and its children only):
    student code then holds no key of the grader's, what it adds there dies with its processes,
    and its uid owns a key only if student code made one (see /proc/key-users)."""
    _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)


def clear_user_keyrings():
    """Run as a sandbox uid after its session: empty the keyrings the kernel keeps per uid
    beyond any process (the user, user-session and persistent keyrings), so a later session
    drawing the same uid finds no key. Returns whether the user keyrings were cleared."""
    persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING)  # linked there: possessed, so writable
    if persistent > 0:
        _keyctl(KEYCTL_CLEAR, persistent)
    return all(_keyctl(KEYCTL_CLEAR, spec) == 0 for spec in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING))


def prctl(option, value):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def check_room(spec):
    """Fail (the grader's fault) when the address-space limit is below what this process already
    maps: a forked child has Python and numpy loaded before its limits are set."""
    limit = next((int(v) for k, _, v in (item.partition("=") for item in spec.split(",")) if k == "as"), None)
    try:
        with open("/proc/self/statm", "rb") as handle:
            mapped = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    if limit is not None and mapped >= limit:
        raise OSError(f"the memory limit ({limit >> 20} MiB) is below the {mapped >> 20} MiB "
                      "the student process needs to start")


def mark(name, value):
    """Write the session's marker into the environment block the kernel shows in
    /proc/PID/environ: a forked child shows the zygote's block, which os.environ cannot change.
    The zygote carries a placeholder of the same length."""
    prefix = f"{name}=".encode()
    try:
        envp = ctypes.c_void_p.in_dll(ctypes.CDLL(None), "environ").value
        entries = ctypes.cast(envp, ctypes.POINTER(ctypes.c_void_p))
        i = 0
        while entries[i]:
            entry = ctypes.string_at(entries[i])
            if entry.startswith(prefix) and len(entry) == len(prefix) + len(value):
                ctypes.memmove(entries[i] + len(prefix), value.encode(), len(value))
            i += 1
    except (OSError, AttributeError, ValueError):
        pass  # not Linux: the marker is only read from /proc


def library_folders():
    """The folders this Python imports from (standard library, extension modules, installed packages)."""
    folders = [p for p in (*sys.path, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
               if p and os.path.isabs(p)]
    return list(dict.fromkeys(folders))


def open_import_folders():
    """Before the switch to the student's uid: a descriptor of every folder on sys.path, so that
    folders this uid cannot reach (an installation under /root...) can still be imported from."""
    opened = {}
    for path in sys.path:
        if path and os.path.isabs(path) and os.path.isdir(path) and path not in opened:
            try:
                opened[path] = os.open(path, os.O_RDONLY | os.O_DIRECTORY)  # close-on-exec
            except OSError:
                pass
    return opened


def import_through(opened):
    """After the switch: each import folder this uid cannot reach by its path is reached through
    its descriptor (/proc/self/fd/N, always open to the process itself), on sys.path and in the
    __path__ of every package already imported, so every module of the installation imports."""
    moved = {}
    for path, fd in opened.items():
        if os.access(path, os.R_OK | os.X_OK) and os.access(os.path.dirname(path) or "/", os.X_OK):
            os.close(fd)
        else:
            moved[path] = f"/proc/self/fd/{fd}"
    if not moved:
        return
    prefixes = sorted(moved, key=len, reverse=True)

    def through(entry):
        for prefix in prefixes:
            if entry == prefix or entry.startswith(prefix + os.sep):
                return moved[prefix] + entry[len(prefix):]
        return entry
    sys.path[:] = [through(p) for p in sys.path]
    for module in list(sys.modules.values()):
        paths = getattr(module, "__path__", None)
        if type(paths) is list:
            paths[:] = [through(p) if isinstance(p, str) else p for p in paths]
    sys.path_importer_cache.clear()


def clear_keys_as(uid, gid):
    """Empty the per-uid keyrings of a sandbox uid, as that uid, in a child; whether it worked."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os._exit(0 if clear_user_keyrings() else 1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return status == 0


class Counted:
    """sys.stdout or sys.stderr as student code finds it: the same stream, counting its writes,
    so the worker knows whether a problem printed anything (see serve)."""

    def __init__(self, stream):
        self._stream, self.writes = stream, 0

    def write(self, text):
        self.writes += 1
        return self._stream.write(text)

    def writelines(self, lines):
        self.writes += 1
        return self._stream.writelines(lines)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def kill_orphans(children):
    """SIGKILL and reap every child of this process that it did not fork as a student process
    (`children`): what a student process left when it exited (a double-forked daemon...), which
    comes to the zygote (a child subreaper) outside namespaces. (The zygote's other children, a
    probe or a keyring clean-up, are waited for before it reads its socket again.) A killed
    orphan's own children come here in turn, and are killed at the next wake-up (SIGCHLD)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as handle:
            found = [int(pid) for pid in handle.read().split()]
    except (OSError, ValueError):
        return
    for pid in found:
        if pid not in children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, os.WNOHANG)
            except (OSError, ChildProcessError):
                pass
