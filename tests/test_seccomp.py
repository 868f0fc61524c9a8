"""The system-call filter of student processes (grader/sandbox/seccomp.py).

A probe submission makes every denied call from a real student process, with arguments that
would fail in some other way (or do nothing lasting) where no filter holds, and returns the
errno of each. Run through a `Session` in a child Python, in every mode this machine has: as
root with namespaces, as root with MHA_NAMESPACES=off, as a non-root user (a dropped uid), and
without the fork server; each denied call must fail with EPERM (clone3 with ENOSYS) while fork,
threads and AF_UNIX sockets keep working. The same probe in a Python without the filter shows
it would have seen the difference. And the modern-style correct submission keeps full marks as
a non-root user (test_modern_submission.py grades it in both root modes).

Where a mode cannot run here it is skipped, unless MHA_REQUIRE_ISOLATION=1: then it fails.
"""
from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.sandbox import seccomp
from grader.sandbox.isolation import NAMESPACES_ENV

from ._edges import DROPPED_UID, ROOT_MODE, drop_to, dropped_uid_problem
from .conftest import EXERCISES, ROOT, SOLUTIONS

MACHINE = platform.machine()

# The numbers of the calls probed, from each ABI's kernel headers (asm/unistd_64.h for x86_64,
# asm-generic/unistd.h for aarch64), kept apart from seccomp.py's own table on purpose.
NUMBERS = {
    "x86_64": dict(
        add_key=248, keyctl=250, request_key=249, memfd_create=319, memfd_secret=447, shmget=29, shmat=30,
        shmctl=31, shmdt=67, semget=64, semop=65, semtimedop=220, semctl=66, msgget=68, msgsnd=69, msgrcv=70,
        msgctl=71, mq_open=240, mq_unlink=241, mq_timedsend=242, mq_timedreceive=243, mq_notify=244,
        mq_getsetattr=245, ptrace=101, process_vm_readv=310, process_vm_writev=311, pidfd_getfd=438,
        perf_event_open=298, userfaultfd=323, bpf=321, io_uring_setup=425, io_uring_enter=426,
        io_uring_register=427, mount=165, umount2=166, pivot_root=155, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, setns=308, unshare=272, kexec_load=246,
        kexec_file_load=320, init_module=175, finit_module=313, delete_module=176, acct=163, swapon=167,
        swapoff=168, reboot=169, open_by_handle_at=304, clone=56, clone3=435),
    "aarch64": dict(
        add_key=217, keyctl=219, request_key=218, memfd_create=279, memfd_secret=447, shmget=194, shmat=196,
        shmctl=195, shmdt=197, semget=190, semop=193, semtimedop=192, semctl=191, msgget=186, msgsnd=189,
        msgrcv=188, msgctl=187, mq_open=180, mq_unlink=181, mq_timedsend=182, mq_timedreceive=183, mq_notify=184,
        mq_getsetattr=185, ptrace=117, process_vm_readv=270, process_vm_writev=271, pidfd_getfd=438,
        perf_event_open=241, userfaultfd=282, bpf=280, io_uring_setup=425, io_uring_enter=426,
        io_uring_register=427, mount=40, umount2=39, pivot_root=41, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, setns=268, unshare=97, kexec_load=104,
        kexec_file_load=294, init_module=105, finit_module=273, delete_module=106, acct=89, swapon=224,
        swapoff=225, reboot=142, open_by_handle_at=265, clone=220, clone3=435),
}

# Each denied call with arguments that, without a filter, fail for another reason or change
# nothing that lasts beyond the probe's process (no IPC_CREAT, names that do not exist, bad
# descriptors, invalid flags). Strings are paths or names.
CALLS = {
    "add_key": (b"user", b"mha-probe", b"x", 1, -2), "keyctl": (0, -3, 0), "request_key": (b"user", b"mha-none", 0, 0),
    "memfd_create": (b"mha-probe", 0), "memfd_secret": (0,),
    "shmget": (0x6D686101, 4096, 0), "shmat": (-1, 0, 0), "shmctl": (-1, 2, 0), "shmdt": (0,),
    "semget": (0x6D686101, 1, 0), "semop": (-1, 0, 0), "semtimedop": (-1, 0, 0, 0), "semctl": (-1, 0, 2),
    "msgget": (0x6D686101, 0), "msgsnd": (-1, 0, 0, 0), "msgrcv": (-1, 0, 0, 0, 0), "msgctl": (-1, 2, 0),
    "mq_open": (b"mha-none", 0, 0, 0), "mq_unlink": (b"mha-none",), "mq_timedsend": (-1, 0, 0, 0, 0),
    "mq_timedreceive": (-1, 0, 0, 0, 0), "mq_notify": (-1, 0), "mq_getsetattr": (-1, 0, 0),
    "ptrace": (2, 0, 0, 0), "process_vm_readv": (0, 0, 0, 0, 0, 0), "process_vm_writev": (0, 0, 0, 0, 0, 0),
    "pidfd_getfd": (-1, 0, 0), "perf_event_open": (0, 0, -1, -1, 0), "userfaultfd": (0,), "bpf": (-1, 0, 0),
    "io_uring_setup": (0, 0), "io_uring_enter": (-1, 0, 0, 0, 0, 0), "io_uring_register": (-1, 0, 0, 0),
    "mount": (0, 0, 0, 0, 0), "umount2": (b"/mha-none", 0), "pivot_root": (b"/mha-none", b"/mha-none"),
    "open_tree": (-1, b"/mha-none", 0), "move_mount": (-1, b"", -1, b"", 0), "fsopen": (b"mha-none", 0),
    "fsconfig": (-1, 0, 0, 0, 0), "fsmount": (-1, 0, 0), "fspick": (-1, b"/mha-none", 0),
    "mount_setattr": (-1, b"", 0, 0, 0), "setns": (-1, 0), "unshare": (0,),
    "kexec_load": (0, 0, 0, -1), "kexec_file_load": (-1, -1, 0, 0, -1), "init_module": (0, 0, 0),
    "finit_module": (-1, b"", 0), "delete_module": (b"mha_none", 0), "acct": (b"/mha-none",),
    "swapon": (b"/mha-none", 0), "swapoff": (b"/mha-none",), "reboot": (0, 0, 0, 0), "open_by_handle_at": (-1, 0, 0),
    "clone3": (0, 0),
}
FD_RESULTS = ("memfd_create", "memfd_secret", "userfaultfd", "io_uring_setup", "open_tree", "fsopen")
CLONE_THREAD = 0x10000  # with any CLONE_NEW* flag and without CLONE_SIGHAND: EINVAL where nothing filters
CLONE_NEW = {"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
             "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
SOCKETS = {"AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17, "AF_VSOCK": 40, "AF_UNIX": 1}

PROBE = """
import ctypes, os, socket, threading

_libc = ctypes.CDLL(None, use_errno=True)
NUMBERS, CALLS, FD_RESULTS, CLONE_NEW, SOCKETS = @TABLES@


def _call(name, args):
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(NUMBERS[name]),
                           *(ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args))
    if result >= 0 and name in FD_RESULTS:
        os.close(result)
    return 0 if result >= 0 else ctypes.get_errno()


def _socket(family, pair=False):
    kind = socket.SOCK_RAW if family in (16, 17) else socket.SOCK_DGRAM if family != 40 else socket.SOCK_STREAM
    try:
        if pair:
            for end in socket.socketpair(family, kind):
                end.close()
        else:
            socket.socket(family, kind).close()
        return 0
    except OSError as exc:
        return exc.errno


def probe():
    seen = {name: _call(name, CALLS[name][1]) for name in CALLS}
    for flag, value in CLONE_NEW.items():
        seen["clone " + flag] = _call("clone", (value | 0x10000 | 17, 0, 0, 0, 0))
    for family, number in SOCKETS.items():
        seen["socket " + family] = _socket(number)
    seen["socketpair AF_INET"] = _socket(2, pair=True)
    seen["socketpair AF_UNIX"] = _socket(1, pair=True)
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    seen["fork"] = 0 if os.waitpid(pid, 0)[1] == 7 << 8 else -1
    box = []
    thread = threading.Thread(target=box.append, args=(1,))
    thread.start()
    thread.join()
    seen["thread"] = 0 if box == [1] else -1
    with open("/proc/self/status") as handle:
        status = [line.split()[1] for line in handle if line.startswith(("Seccomp:", "NoNewPrivs:"))]
    return [status, sorted(seen.items())]
"""

# What the probe must see under the filter
EXPECTED = {**{name: errno.EPERM for name in CALLS}, "clone3": errno.ENOSYS,
            **{f"clone {flag}": errno.EPERM for flag in CLONE_NEW},
            **{f"socket {family}": errno.EPERM for family in SOCKETS}, "socket AF_UNIX": 0,
            "socketpair AF_INET": errno.EPERM, "socketpair AF_UNIX": 0, "fork": 0, "thread": 0}

# A child Python that opens a session on the probe and prints what came back, as JSON
RUN_PROBE = """
import json, sys
from pathlib import Path
from grader.sandbox import spawn
if sys.argv[2] == "direct":
    spawn.FORK_SERVER = False
from grader.sandbox.session import Session
with Session(Path(sys.argv[1])) as session:
    case = session.run("probe", [[]], 60.0).cases[0]
    print(json.dumps({"mode": session.isolation.mode, "status": case.status.name, "value": case.value,
                      "error": str(case.error), "detail": case.detail}))
"""

REQUIRED = os.environ.get("MHA_REQUIRE_ISOLATION") == "1"


def need(problem: str | None) -> None:
    """Skip a mode that cannot run here, or fail when isolation is required (MHA_REQUIRE_ISOLATION=1)."""
    if problem is None:
        return
    if REQUIRED:
        pytest.fail(f"MHA_REQUIRE_ISOLATION=1, but {problem}")
    pytest.skip(problem)


def probe_source() -> str:
    tables = (NUMBERS[MACHINE], {name: (NUMBERS[MACHINE][name], args) for name, args in CALLS.items()},
              FD_RESULTS, CLONE_NEW, SOCKETS)
    return PROBE.replace("@TABLES@", repr(tables))


@pytest.fixture
def folder():
    """A folder every user may read (the dropped uid's grader reads the submission in it)."""
    path = Path(tempfile.mkdtemp(prefix="mha-seccomp-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def namespaces_problem() -> str | None:
    """Why student processes do not run in namespaces here as root (None: they do)."""
    from grader.sandbox.doctor import sandbox_mode
    mode, text = sandbox_mode()
    return None if mode == "namespaces" else f"student code runs in mode {mode!r} here: {text}"


# (mode label, user, environment, start): every way a student process starts
MODES = [
    ("namespaces", None, {}, "fork"),
    ("uid", None, {NAMESPACES_ENV: "off"}, "fork"),
    ("uid", None, {}, "direct"),
    ("same user", DROPPED_UID, {}, "fork"),
    ("same user", DROPPED_UID, {}, "direct"),
]


@pytest.mark.skipif(MACHINE not in NUMBERS, reason=f"no system-call table for {MACHINE} (seccomp.py installs none)")
class TestInEveryMode:
    @pytest.mark.parametrize("mode, user, env, start", MODES, ids=[
        "root-namespaces", "root-no-namespaces", "root-no-fork-server", "non-root", "non-root-no-fork-server"])
    def test_each_denied_call_fails_with_eperm(self, folder, mode, user, env, start):
        """From a student process in this mode: every denied call fails with EPERM (clone3 with
        ENOSYS), the filter and no_new_privs are in /proc/self/status, and fork, threads and
        AF_UNIX sockets still work."""
        if not ROOT_MODE:  # the tests' own user is the non-root case
            need(None if user is not None else "the root modes need root")
            user = None
        elif user is not None:
            need(dropped_uid_problem())
        elif mode == "namespaces" and start == "fork":
            need(namespaces_problem())
        submission = folder / "attention.py"
        submission.write_text(probe_source())
        os.chmod(submission, 0o644)
        environment = {**{k: v for k, v in os.environ.items() if k != NAMESPACES_ENV}, **env,
                       "PYTHONPATH": str(ROOT)}
        if user is not None:
            environment.update(HOME=str(folder), MHA_CACHE_DIR=str(folder / "cache"))
        done = subprocess.run([sys.executable, "-c", RUN_PROBE, str(submission), start], cwd=folder,
                              env=environment, capture_output=True, text=True, timeout=120,
                              preexec_fn=(lambda: drop_to(user)) if user is not None else None)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert (result["mode"], result["status"]) == (mode, "RETURNED"), result
        status, seen = result["value"]
        assert status == ["1", "2"]  # NoNewPrivs: 1, Seccomp: 2 (a filter)
        assert dict(seen) == EXPECTED


@pytest.mark.skipif(MACHINE not in NUMBERS, reason=f"no system-call table for {MACHINE}")
def test_the_probe_sees_the_difference_without_the_filter(folder):
    """The same probe in a Python without the filter: the calls that EPERM could not come from
    anything else do not fail with it (so the test above can fail)."""
    (folder / "probe.py").write_text(probe_source() + "\nimport json\nprint(json.dumps(probe()))\n")
    done = subprocess.run([sys.executable, str(folder / "probe.py")], capture_output=True, text=True, timeout=60,
                          cwd=folder)
    assert done.returncode == 0, done.stderr
    status, seen = json.loads(done.stdout)
    seen = dict(seen)
    assert status[1] == "0"
    assert seen["clone3"] == errno.EINVAL and seen["socket AF_INET"] == 0 and seen["socket AF_UNIX"] == 0
    assert {seen[name] for name in ("shmget", "semget", "msgget", "mq_open")} == {errno.ENOENT}
    assert {seen[f"clone {flag}"] for flag in CLONE_NEW} == {errno.EINVAL}


class TestProgram:
    @pytest.mark.parametrize("abi", sorted(seccomp._TABLES))
    def test_assembles_within_bpf_limits(self, abi):
        """Every ABI's filter assembles (forward jumps within 255) to well under 4096 instructions,
        one comparison per denied call."""
        data, count = seccomp.assemble(seccomp.program(abi))
        assert len(data) == 8 * count and count < 100
        assert len(seccomp._TABLES[abi][1]) == len(seccomp.DENIED) + len(seccomp._CHECKED)

    @pytest.mark.parametrize("abi", sorted(NUMBERS))
    def test_table_matches_the_kernel_headers(self, abi):
        """seccomp.py's numbers are those of the kernel headers, for every call denied or checked."""
        table = dict(zip(seccomp.DENIED + seccomp._CHECKED, seccomp._TABLES[abi][1]))
        assert {name: table[name] for name in NUMBERS[abi]} == NUMBERS[abi]
        assert set(seccomp.DENIED) == set(CALLS) - {"clone3"}

    def test_unknown_system_installs_nothing(self, monkeypatch):
        """On a machine with no table, install() changes nothing and says so."""
        monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
        before = seccomp.status()
        assert seccomp.supported() is False
        assert seccomp.install() is False
        assert seccomp.status() == before


@pytest.mark.skipif(not ROOT_MODE, reason="as a non-root user, test_modern_submission.py grades in this mode already")
def test_modern_submission_full_marks_as_non_root(folder):
    """The modern-style correct submission, graded by `mha grade` as a non-root user (its student
    process under the filter, as the same user): exit 0 and the assignment's whole max score."""
    need(dropped_uid_problem())
    submission = folder / "submission"
    submission.mkdir(mode=0o755)
    shutil.copyfile(ROOT / "tests" / "submissions" / "correct_future_float32.py", submission / "attention.py")
    shutil.copyfile(SOLUTIONS / "answers.yaml", submission / "answers.yaml")
    for path in submission.iterdir():
        os.chmod(path, 0o644)
    out = folder / "out"
    out.mkdir()
    os.chown(out, DROPPED_UID, 0)
    env = {**{k: v for k, v in os.environ.items() if k != NAMESPACES_ENV}, "PYTHONPATH": str(ROOT),
           "HOME": str(out), "MHA_CACHE_DIR": str(out / "cache")}
    done = subprocess.run([sys.executable, "-m", "grader", "--course", str(EXERCISES), "grade", str(submission),
                           "--format", "gradescope", "--output", str(out / "results.json")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=folder,
                          preexec_fn=lambda: drop_to(DROPPED_UID))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((out / "results.json").read_text())
    # a written item's test has no status: pending, graded by hand
    assert [f"{t['name']}: {t['output']}" for t in data["tests"] if t.get("status", "passed") != "passed"] == []
    assert data["score"] == load_course(EXERCISES).max_score > 0


class TestDoctor:
    def test_says_the_filter_is_in_force(self, cli):
        """`mha doctor` reports, after the mode, the filter it saw in a student process and the
        limits on memory and processes."""
        result = cli("doctor")
        assert result.exit_code == 0
        lines = result.stdout.splitlines()
        expected = "system calls: filtered (seccomp" if seccomp.supported() else "system calls: NOT filtered"
        assert lines[1].startswith(expected)
        assert lines[2].startswith("memory: the address-space limit of each student process (RLIMIT_AS) only")
        assert lines[3].startswith("processes: RLIMIT_NPROC")

    def test_says_why_not_where_there_is_no_table(self, monkeypatch):
        """On a system with no table, the first line says the calls are NOT filtered, and why."""
        from grader.sandbox import doctor
        monkeypatch.setattr(doctor, "_probe", lambda: ("same user", "", "0"))
        monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
        assert doctor.confinement()[0] == "system calls: NOT filtered (no system-call table for riscv64)"
