"""Which isolation mode student code runs in here and which limits hold (`mha doctor`), and the
warning for graders that run without root (docs/security.md)."""
from __future__ import annotations

import os
import platform
import shutil
import tempfile
from pathlib import Path

from .isolation import MODES

__all__ = ["MODES", "confinement", "sandbox_mode", "unprotected_warning"]

# what a probe student process reports: the Seccomp field of its /proc/self/status
PROBE = """
def probe():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("Seccomp:"):
                return line.split()[1]
    return "unknown"
"""


def _probe() -> tuple[str, str, str]:
    """Run one student process (a one-line submission in a session of its own): its mode, the
    mode's description, and its Seccomp field ("2": a filter; "0": none; "unknown")."""
    from .session import RunStatus, Session  # only `mha doctor` runs one; the warning needs none of it
    folder = Path(tempfile.mkdtemp(prefix="mha-doctor-"))
    try:
        path = folder / "attention.py"
        path.write_text(PROBE)
        with Session(path) as session:
            case = session.run("probe", [[]], 30.0).cases[0]
            seccomp = str(case.value) if case.status is RunStatus.RETURNED else "unknown"
            return session.isolation.mode, session.isolation.describe(), seccomp
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sandbox_mode() -> tuple[str, str]:
    """The mode a student process runs in here, found by running one, and its description:
    ("namespaces" | "uid" | "same user", text)."""
    mode, text, _ = _probe()
    return mode, text


def confinement() -> list[str]:
    """Which limits hold for a student process here, one line each: the system-call filter
    (seen in force in a student process, or why not), memory and processes."""
    from . import seccomp
    mode, _, state = _probe()
    if state == "2":
        calls = ("system calls: filtered (seccomp, no_new_privs): no keyrings, memfd, System V or POSIX IPC, "
                 "sockets beyond AF_UNIX, ptrace, bpf, perf events, userfaultfd, io_uring, mounts or new namespaces")
    elif not seccomp.supported():
        calls = f"system calls: NOT filtered (no system-call table for {platform.machine() or 'this system'})"
    else:
        calls = "system calls: NOT filtered (the kernel refused the seccomp filter, or has none)"
    memory = ("memory: the address-space limit of each student process (RLIMIT_AS) only; "
              "files it writes in tmpfs folders are bounded by the file-size limit per file"
              + (" and by its own /tmp of 128 MiB" if mode == "namespaces" else "")
              + " (no cgroup memory limit)")
    processes = ("processes: RLIMIT_NPROC of the student's uid" + (" (a fresh uid: exact)" if mode != "same user"
                                                                  else " (shared with your own processes)"))
    return [calls, memory, processes]


def unprotected_warning() -> str | None:
    """What to tell a grader of untrusted code that runs without root, or None as root."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return None
    return ("warning: not running as root, so student code runs as your own user: it can read the hidden "
            "cases and solutions on this machine and change its own score (for example by rewriting the "
            "seed cache in your cache). Grade untrusted submissions as root (the security model: docs/security.md).")
