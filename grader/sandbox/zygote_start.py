"""The zygote's command line and environment, and its start with built-in modules only.

A cold `mha grade` or `mha check` waits for the zygote (`spawn.py`) to load Python and numpy
before its first student process can start. `spawn` itself imports subprocess, socket,
tempfile and more, about 12 to 20 ms before it could start the zygote. So the launcher
(`cli/launch.py`) starts it from here first thing, with `os` and `_socket` (both built into the
interpreter) and nothing else: a socket pair, a file for the zygote's stderr, then fork and
exec, as `subprocess.Popen` would (stdin and stdout from /dev/null, its own session, only its
end of the socket and its stderr open, in /). The first `spawn.fork_server()` of the same
process takes it over (`take`); one never taken is stopped by `discard`, or ends by itself
when this process ends (it exits when its socket closes).
"""
from __future__ import annotations

import os
import sys

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
MARKER = "MHA_SANDBOX"  # environment variable carrying a session's marker (isolation.py)
MARKER_LENGTH = 24      # characters of a marker (hex)
# The zygote loads worker.py as its siblings are loaded (worker._sibling): from the file Python
# byte-compiled when the package was installed. Run as a script, worker.py was turned into
# bytecode from its source on every start (6 ms, on the way to a cold grade's first student
# process). Then it is told to serve: its name is not __main__.
ZYGOTE_CODE = ("import sys, importlib.util as u; sys.argv.pop(0); "
               "s = u.spec_from_file_location('_mha_worker', sys.argv[0]); m = u.module_from_spec(s); "
               "sys.modules[s.name] = m; s.loader.exec_module(m); m.zygote(int(sys.argv[2]))")

_early: tuple[int, int, int, int] | None = None  # (our pid, the zygote's pid, our socket, its stderr file)


def student_env(home: str, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of a student process: nothing of the grader's but PATH."""
    env = {**extra, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home,
           "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # needed on some CPUs (see env notes)
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def library_paths() -> list[str]:
    """Where the zygote, started without the site module, finds numpy and the other installed
    packages: this Python's site-packages folders, and numpy's own folder if it is elsewhere
    (found on sys.path as an import of numpy would find it)."""
    import site  # (loaded with the interpreter, unless it started with -S)
    from importlib.machinery import PathFinder  # (frozen: loaded with the interpreter)
    paths = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    spec = PathFinder.find_spec("numpy")
    if spec is not None and spec.origin:
        home = os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
        if home not in paths:
            paths.append(home)
    return paths


def command(control_fd: int) -> tuple[list[str], dict[str, str]]:
    """The zygote's argv and environment, told to serve on descriptor `control_fd`."""
    placeholder = {MARKER: "0" * MARKER_LENGTH}  # overwritten in each child (see confine.mark)
    argv = [sys.executable, "-I", "-S", "-u", "-B", "-c", ZYGOTE_CODE, WORKER, "--zygote", str(control_fd),
            *library_paths()]
    return argv, student_env("/", placeholder)


def _errors_file() -> int:
    """An unnamed file for the zygote's stderr, in the folder tempfile would use first."""
    folder = os.environ.get("TMPDIR") or os.environ.get("TEMP") or os.environ.get("TMP") or "/tmp"
    return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)


def start() -> None:
    """Start the zygote now (Linux only; once per process). Never raises: if it cannot start
    here, `spawn` starts it as before when it is first needed."""
    global _early
    if _early is not None or sys.platform != "linux":
        return
    try:
        import _socket
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    except (ImportError, OSError, AttributeError):
        return
    ours_fd, theirs_fd = ours.detach(), theirs.detach()
    errors = null = -1
    try:
        errors = _errors_file()
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        if min(ours_fd, theirs_fd, errors, null) < 3:  # a standard stream was closed: Popen's care is needed
            raise ValueError("a standard descriptor is closed")
        argv, env = command(theirs_fd)
        pid = os.fork()
        if pid == 0:  # only system calls from here to the exec
            try:
                os.setsid()
                os.chdir("/")
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(errors, 2)
                os.set_inheritable(theirs_fd, True)
                os.closerange(3, theirs_fd)
                os.closerange(theirs_fd + 1, os.sysconf("SC_OPEN_MAX"))
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
    except (OSError, ValueError):
        for fd in (ours_fd, errors):
            if fd >= 0:
                os.close(fd)
        return
    finally:
        os.close(theirs_fd)
        if null >= 0:
            os.close(null)
    _early = (os.getpid(), pid, ours_fd, errors)


def take() -> tuple[int, int, int] | None:
    """The zygote `start` started in this process, now the caller's: (its pid, our end of its
    socket, its stderr file), or None."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if early[0] != os.getpid():  # a forked copy of the process that started it: not ours
        return None
    return early[1:]


def discard() -> None:
    """Stop a zygote `start` started in this process and nobody took."""
    early = take()
    if early is None:
        return
    pid, sock, errors = early
    os.close(sock)
    os.close(errors)
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except OSError:
        pass
