"""What a student process does to itself before any student code runs: resource limits, the
switch to the student's uid, process flags, and the session marker in its environment.

Loaded by path from `worker.py` (which runs as a script, with no grader package on its path);
it imports nothing but the standard library.
"""
import ctypes
import os
import resource

LIMITS = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC, "cpu": resource.RLIMIT_CPU,
          "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36


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
