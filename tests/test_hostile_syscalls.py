"""Hostile submissions that reach for the kernel's shared objects, through the CLI, in every mode.

Each is the model solution with one snippet whose attack runs inside `attention_reading` (a side
effect: the function still answers correctly) and whose report of what the kernel allowed is
raised by `count_routing_distributions` (shown: its first case is public). The attacks: take away
write permission from its own keyrings and leave a key readable by every uid; 3 x 256 MiB of
System V shared memory, a semaphore set, a message queue and a POSIX message queue; 40 x 64 MiB
memfds; AF_VSOCK, AF_INET6, AF_INET and AF_NETLINK sockets. Under the system-call filter
(grader/sandbox/seccomp.py) each call fails with EPERM.

Graded by `mha grade` as root with namespaces, as root with MHA_NAMESPACES=off, and as a non-root
user (a dropped uid): exit 0, the exact score deserved (everything but count_routing_distributions),
the report saying EPERM for every attempt, the grader's peak memory under 300 MB, and nothing left:
no process, no file in the run's temporary folder, no System V object with the snippet's keys
(/proc/sysvipc), no POSIX queue, no memfd open anywhere, no key named after it in
any sandbox uid's or the dropped uid's keyrings. Then all four in one `grade-all --jobs 1` with a
correct classmate graded after them: every score exact, the classmate's full marks.

Where a mode cannot run here it is skipped, unless MHA_REQUIRE_ISOLATION=1: then it fails.
"""
from __future__ import annotations

import csv
import ctypes
import os
import platform
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from grader.course.loader import load_course
from grader.course.quiz import answer_key
from grader.course.seeds import student_seed
from grader.sandbox.isolation import NAMESPACES_ENV, SANDBOX_IDS

from ._edges import (
    CR,
    DROPPED_UID,
    ROOT_MODE,
    EdgeCourse,
    deserved,
    dropped_uid_problem,
    edge_course,
    new_folder,
    run_grader,
    scores,
    write_submission,
)
from .conftest import solution_source, uids_holding_keys
from .test_hostile import HOSTILE, leftovers
from .test_seccomp import need

pytestmark = pytest.mark.slow  # grades every snippet through the CLI in every mode

__all__ = ["edge_course"]  # the module's course fixture (tests/_edges.py)

ATTACK = '''

import ctypes as _c
import errno as _errno
import os as _os
import platform as _platform
import socket as _socket

_libc = _c.CDLL(None, use_errno=True)
_report = []
_held = []  # what the attack made, kept for the life of the process
_solved_reading = attention_reading


def _name(code):
    return _errno.errorcode.get(code, str(code))


def attention_reading(weights, values):
    if not _report:
        _report.append(_attack())
    return _solved_reading(weights, values)


def count_routing_distributions(*layer):
    raise PermissionError(_report[0] if _report else "not attacked")
'''

SNIPPETS = {
    "keyrings": ('''
_KEYS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_platform.machine())


def _sys(number, *args):
    _c.set_errno(0)
    result = _libc.syscall(_c.c_long(number), *(_c.c_char_p(a) if isinstance(a, bytes) else _c.c_long(a)
                                                 for a in args))
    return result if result >= 0 else -_c.get_errno()


def _attack():
    add_key, keyctl = _KEYS
    found = {}
    key = _sys(add_key, b"user", (TAG + "-user").encode(), b"for every uid", 13, -4)  # the user keyring
    found["add_key"] = "ok" if key >= 0 else _name(-key)
    if key >= 0:
        found["world_readable"] = _name(-min(_sys(keyctl, 5, key, 0x3F3F3F3F), 0))  # KEYCTL_SETPERM: all
    for label, ring in (("user", -4), ("usersession", -5), ("session", -3)):
        found["chmod_" + label] = _name(-min(_sys(keyctl, 5, ring, 0x01010000), 0))  # view only: no write
    return "keyrings: " + " ".join(f"{k}={v}" for k, v in found.items())
''', "keyrings: add_key=EPERM chmod_user=EPERM chmod_usersession=EPERM chmod_session=EPERM"),
    "sysv_ipc": ('''
def _attack():
    _libc.shmat.restype = _c.c_void_p
    found = []
    for i in range(3):
        shmid = _libc.shmget(_c.c_int(int(TOKEN) + i), _c.c_size_t(256 << 20), 0o1666)  # IPC_CREAT | 0666
        if shmid < 0:
            found.append("shm=" + _name(_c.get_errno()))
            continue
        address = _libc.shmat(shmid, None, 0)
        if address not in (None, _c.c_void_p(-1).value):
            _c.memset(address, 1, 256 << 20)
        found.append("shm=ok")
    for label, made in (("sem", _libc.semget(int(TOKEN), 1, 0o1666)), ("msg", _libc.msgget(int(TOKEN), 0o1666)),
                        ("mq", _libc.mq_open(("/" + TAG).encode(), _os.O_CREAT | _os.O_RDWR, 0o666, None))):
        found.append(f"{label}=" + ("ok" if made >= 0 else _name(_c.get_errno())))
    return "ipc: " + " ".join(found)
''', "ipc: shm=EPERM shm=EPERM shm=EPERM sem=EPERM msg=EPERM mq=EPERM"),
    "memfds": ('''
def _attack():
    try:
        for i in range(40):
            fd = _os.memfd_create(f"{TAG}-{i}")
            _held.append(fd)
            _os.posix_fallocate(fd, 0, 64 << 20)
    except OSError as exc:
        return f"memfd={_name(exc.errno)} after {len(_held)}"
    return f"memfd=ok after {len(_held)}"
''', "memfd=EPERM after 0"),
    "sockets": ('''
def _attack():
    found = []
    for label, family, kind in (("vsock", 40, _socket.SOCK_STREAM), ("inet6", 10, _socket.SOCK_DGRAM),
                                ("inet", 2, _socket.SOCK_DGRAM), ("netlink", 16, _socket.SOCK_RAW),
                                ("unix", 1, _socket.SOCK_DGRAM)):
        try:
            _held.append(_socket.socket(family, kind))
            found.append(f"{label}=ok")
        except OSError as exc:
            found.append(f"{label}={_name(exc.errno)}")
    return "sockets: " + " ".join(found)
''', "sockets: vsock=EPERM inet6=EPERM inet=EPERM netlink=EPERM unix=ok"),
}

# (label, user, environment): every way this machine grades
MODES = [("root-namespaces", None, {}), ("root-no-namespaces", None, {NAMESPACES_ENV: "off"}),
         ("non-root", DROPPED_UID, {})]


# the root modes carry the `root` marker (`-m "not root"` leaves them out)
MODE_PARAMS = [pytest.param(*mode, id=mode[0], marks=[pytest.mark.root] if mode[0].startswith("root-") else [])
               for mode in MODES]


def runnable(label: str, user: int | None) -> str | None:
    """Why this mode cannot run here (None: it can)."""
    if not ROOT_MODE:
        return None if label == "non-root" else "the root modes need root"
    return dropped_uid_problem() if user is not None else None


def source(name: str, token: str) -> str:
    prelude = (HOSTILE / "_prelude.py").read_text()
    text = solution_source().rstrip("\n") + "\n\n\n" + prelude + ATTACK + SNIPPETS[name][0]
    return text.replace("@TOKEN@", token)


def ipc_left(token: str) -> list[str]:
    """System V objects with the snippet's keys (shm, sem, msg: key is the first column)."""
    keys = {str(int(token) + i) for i in range(3)}
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        found += [f"{kind} {row.split()[0]}" for row in rows if row.split()[:1] and row.split()[0] in keys]
    return found


def queues_left(token: str) -> list[str]:
    """The snippet's POSIX message queue, if it exists in this IPC namespace (opened by name:
    /dev/mqueue need not be mounted)."""
    libc = ctypes.CDLL(None, use_errno=True)
    name = f"/mha-hostile-{token}".encode()
    fd = libc.mq_open(name, os.O_RDONLY)
    if fd < 0:
        return []
    os.close(fd)
    return [name.decode()]


def memfds_left(token: str) -> list[str]:
    """Descriptors open anywhere on a memfd named after the token (read as links' text)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if token in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    found.append(f"{pid}/{fd}")
            except OSError:
                pass
    return found


KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())


def keys_left(token: str) -> list[str]:
    """The uids (sandbox uids that own keys, and the dropped uid) whose user or user-session
    keyring holds the snippet's key. Each is searched by a forked child switched to that uid."""
    if KEYCTL is None or not ROOT_MODE:
        return []
    with open("/proc/key-users", "rb") as handle:
        uids = {int(line.split(b":")[0]) for line in handle.read().splitlines() if b":" in line}
    checked = [uid for uid in sorted(uids) if uid in SANDBOX_IDS or uid == DROPPED_UID]
    found = uids_holding_keys(KEYCTL, [f"mha-hostile-{token}-user"], checked, persistent=False)
    return [f"uid {uid}" for uid in found]


@dataclass(frozen=True)
class Graded:
    name: str
    mode: str
    token: str
    run: object  # _edges.GraderRun


@pytest.fixture(scope="module")
def graded(edge_course: EdgeCourse) -> dict[tuple[str, str], Graded | BaseException]:
    """Every snippet graded in every mode that can run here, two at a time."""
    todo = [(name, mode) for name in SNIPPETS for mode in MODES if runnable(mode[0], mode[1]) is None]

    def attempt(job):
        name, (label, user, env) = job
        token = f"{secrets.randbelow(10 ** 8):08d}"
        try:
            folder = write_submission(new_folder(edge_course, name), source(name, token), answers=edge_course.key)
            output = new_folder(edge_course, "out") / "results.json"
            run = run_grader(edge_course, "grade", str(folder), "--format", "gradescope", "--timeout", "5",
                             "--total-timeout", "60", cwd=folder, output=output, user=user if ROOT_MODE else None,
                             env=env)
            return Graded(name, label, token, run)
        except Exception as exc:  # reported by that case's test
            return exc

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {(name, mode[0]): outcome for (name, mode), outcome in zip(todo, pool.map(attempt, todo))}


@pytest.mark.parametrize("label, user, env", MODE_PARAMS)
@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_hostile_syscalls_are_refused(edge_course: EdgeCourse, graded, name: str, label: str, user, env):
    """Exit 0, every problem's points but count_routing_distributions (which raised the report),
    EPERM for every attempt, bounded grader memory, and nothing left behind."""
    need(runnable(label, user))
    outcome = graded[(name, label)]
    if isinstance(outcome, BaseException):
        raise outcome
    run = outcome.run
    assert run.code == 0, run.stderr
    assert scores(run.results()) == deserved(edge_course, lost=(CR,))
    assert SNIPPETS[name][1] in run.report()
    assert 0 < run.peak_mb < 300
    assert (run.left, run.processes) == ([], [])
    token = outcome.token
    assert leftovers(token) == []
    assert ipc_left(token) == []
    assert queues_left(token) == []
    assert memfds_left(token) == []
    assert keys_left(token) == []


@pytest.mark.parametrize("label, user, env", MODE_PARAMS)
def test_classmate_after_them_is_unaffected(edge_course: EdgeCourse, label: str, user, env):
    """`grade-all --jobs 1` on the four hostile students and a correct classmate graded after
    them: exit 0, each hostile student's exact total, the classmate's full marks, nothing left."""
    need(runnable(label, user))
    root = new_folder(edge_course, "class")
    quiz = load_course(edge_course.exercises).quiz
    tokens = {}
    for name in (*SNIPPETS, "zz-classmate"):
        (root / name).mkdir(mode=0o755)
        key = answer_key(quiz, student_seed(edge_course.secret, name))  # each student's own quiz numbers
        if name in SNIPPETS:
            tokens[name] = f"{secrets.randbelow(10 ** 8):08d}"
        write_submission(root / name, source(name, tokens[name]) if name in SNIPPETS else None, answers=key)
    for path in root.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    out = new_folder(edge_course, "graded")
    run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", "--timeout", "5",
                     "--total-timeout", "60", "--no-progress", cwd=root, user=user if ROOT_MODE else None, env=env)
    assert run.code == 0, run.stderr
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert {s: float(r["total"]) for s, r in rows.items()} == {
        **{name: edge_course.total - edge_course.points[CR] for name in SNIPPETS}, "zz-classmate": edge_course.total}
    assert {r["status"] for r in rows.values()} == {"graded"}
    assert 0 < run.peak_mb < 300
    assert (run.left, run.processes) == ([], [])
    left = {name: leftovers(t) + ipc_left(t) + queues_left(t) + memfds_left(t) + keys_left(t)
            for name, t in tokens.items()}
    assert left == {name: [] for name in SNIPPETS}
