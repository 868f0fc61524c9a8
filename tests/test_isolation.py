"""Who student code runs as, and the clean-up after it (grader/sandbox/isolation.py)."""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import platform
import pwd
import secrets
import select
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.errors import InternalError
from grader.sandbox import isolation
from grader.sandbox.isolation import PACKAGE, SANDBOX_IDS, Isolation, private_paths, processes, protect
from grader.sandbox.session import Limits, RunStatus, Session

from .conftest import (
    REQUIRE_ISOLATION,
    installation_hidden_from_others,
    installation_in_tmp,
    isolation_missing,
    run_as_uid,
)

ROOT_MODE = os.geteuid() == 0


@pytest.fixture
def root_needed():
    if not ROOT_MODE:
        isolation_missing("a separate student user needs root")


def needs_root(test):
    """Marks a test (or class) `root` (conftest.py: `-m "not root"` leaves it out) and makes it
    skip without root, or fail where isolation is required."""
    return pytest.mark.root(pytest.mark.usefixtures("root_needed")(test))


class TestPrivatePaths:
    def test_lists_package_course_solutions_git_and_checkout(self, tmp_path):
        """The grader package, the course folder, solutions/ and .git/ beside it, and the
        source checkout the grader runs from (its tests/submissions hold complete solutions)."""
        root = tmp_path / "exercises"
        assert private_paths(root) == (PACKAGE, root, tmp_path / "solutions", tmp_path / ".git", PACKAGE.parent)
        assert (PACKAGE.parent / "tests" / "submissions").is_dir()  # this run is from a checkout


class TestProtect:
    def test_removes_access_by_others_only(self, tmp_path):
        """o-rwx; the owner's and the group's bits stay; missing folders are skipped."""
        folder = tmp_path / "exercises"
        folder.mkdir()
        os.chmod(folder, 0o775)
        protect([folder, tmp_path / "missing"])
        assert folder.stat().st_mode & 0o777 == 0o770

    def test_each_folder_once_per_process(self, tmp_path, monkeypatch):
        """A batch protects the same folders for every submission: checked the first time only."""
        folder = tmp_path / "exercises"
        folder.mkdir()
        protect([folder])
        calls = []
        monkeypatch.setattr(isolation.os, "stat", lambda *args, **kw: calls.append(args) or os.lstat(*args))
        protect([folder])
        assert calls == []

    def test_refuses_the_file_system_root(self, monkeypatch):
        """Never chmod '/': that would lock every other user out of the machine."""
        calls = []
        monkeypatch.setattr(isolation.os, "chmod", lambda *args: calls.append(args))
        with pytest.raises(InternalError, match="refusing"):
            protect([Path("/")])
        assert calls == []


def _session_pids(uid: int) -> list[int]:
    return [p.pid for p in processes().values() if uid in p.uids and p.alive]


def _sleeping(uid: int) -> int:
    """How many live processes of `uid` there are, if all of them run `sleep` (else -1)."""
    names = []
    for pid in _session_pids(uid):
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            pass
    return len(names) if set(names) <= {"sleep"} else -1


@needs_root
class TestSeparateUser:
    def test_claims_distinct_unused_ids_and_releases_them(self):
        """Two sessions get different uids that no account uses; closing frees the claim."""
        first, second = Isolation(), Isolation()
        try:
            assert first.uid != second.uid and {first.uid, second.uid} <= set(SANDBOX_IDS)
            for uid in (first.uid, second.uid):
                with pytest.raises(KeyError):
                    pwd.getpwuid(uid)
        finally:
            first.close()
            second.close()
        for uid in (first.uid, second.uid):  # free again: the claim is a lock on a root-only file
            fd = os.open(f"{isolation.CLAIMS[0]}/{uid}", os.O_RDWR | os.O_NOFOLLOW)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)

    def test_claims_are_out_of_reach_of_student_code(self):
        """The claims folder is root's alone (0700, in a folder only root writes): no student uid
        can create, lock or replace a claim, so none can use up the uids (an abstract socket
        name could be bound by anyone)."""
        jail = Isolation()
        try:
            info = os.lstat(isolation.CLAIMS[0])
            parent = os.lstat(os.path.dirname(isolation.CLAIMS[0]))
            assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o700
            assert parent.st_uid == 0 and not parent.st_mode & 0o022
        finally:
            jail.close()

    def test_close_kills_every_process_of_the_uid(self):
        """A child and an orphaned grandchild running as the student uid are both killed (the
        processes are made by `sleep` and os.fork, whatever /bin/sh is)."""
        jail = Isolation()
        try:
            pid = os.fork()
            if pid == 0:  # only system calls and exec here
                try:
                    os.setsid()
                    os.setgroups([])
                    os.setresgid(jail.gid, jail.gid, jail.gid)
                    os.setresuid(jail.uid, jail.uid, jail.uid)
                    if os.fork() == 0:
                        if os.fork() == 0:
                            os.execvp("sleep", ["sleep", "600"])
                        os._exit(0)  # the grandchild is orphaned
                    os.execvp("sleep", ["sleep", "600"])
                finally:
                    os._exit(1)
            deadline = time.monotonic() + 30
            while _sleeping(jail.uid) != 2 and time.monotonic() < deadline:  # the middle process is gone
                time.sleep(0.01)
            assert _sleeping(jail.uid) == 2  # the child and the orphaned grandchild
        finally:
            jail.close()
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # reaped by the clean-up already (the grader is a subreaper)
        assert _session_pids(jail.uid) == []

    def test_close_deletes_the_uids_files_in_shared_folders(self, tmp_path):
        """Files and folders the uid made in /tmp go; anyone else's stay (after a student process
        that ran outside namespaces, which could see /tmp)."""
        jail = Isolation()
        jail.started(SimpleNamespace(jailed=False, why="a test"))
        tag = f"mha-isolation-test-{secrets.token_hex(4)}"
        theirs, folder, ours = Path(f"/tmp/{tag}-file"), Path(f"/tmp/{tag}-dir"), Path(f"/tmp/{tag}-root")
        try:
            theirs.write_text("x")
            folder.mkdir()
            (folder / "inner").write_text("x")
            ours.write_text("x")
            for path in (theirs, folder, folder / "inner"):
                os.chown(path, jail.uid, jail.gid)
        finally:
            jail.close()
        try:
            assert not theirs.exists() and not folder.exists()
            assert ours.exists()
        finally:
            ours.unlink()

    def test_close_leaves_shared_folders_alone_after_jailed_processes(self, tmp_path, monkeypatch):
        """Jailed student processes could write only to their session folder and their own tmpfs:
        closing such a session does not scan the machine's shared folders."""
        from grader.sandbox import isolation
        swept = []
        monkeypatch.setattr(isolation, "sweep", lambda uid, folders: swept.append(uid))
        jail = Isolation()
        jail.started(SimpleNamespace(jailed=True, why=""))
        jail.close()
        outside = Isolation()
        outside.started(SimpleNamespace(jailed=True, why=""))
        outside.started(SimpleNamespace(jailed=False, why="a test"))  # one process outside is enough
        outside.close()
        assert swept == [outside.uid]

    def test_shared_folders_are_walked_only_once_a_process_runs_outside_namespaces(self, monkeypatch):
        """The walk of the shared folders (for the sweep) starts when the session's first student
        process outside namespaces starts, once; a session of jailed processes never starts it."""
        from grader.sandbox import isolation
        walks = []
        monkeypatch.setattr(isolation, "walk_soon", lambda: walks.append("walk"))
        jailed = Isolation()
        try:
            jailed.started(SimpleNamespace(jailed=True, why=""))
            jailed.started(SimpleNamespace(jailed=True, why=""))
        finally:
            jailed.close()
        assert walks == []
        outside = Isolation()
        try:
            outside.started(SimpleNamespace(jailed=True, why=""))
            outside.started(SimpleNamespace(jailed=False, why="a test"))
            outside.started(SimpleNamespace(jailed=False, why="a test"))
        finally:
            outside.close()
        assert walks == ["walk"]

    def test_student_process_runs_as_the_session_user(self, write_submission):
        """uid/gid are the session's, no supplementary groups, umask 077."""
        path = write_submission("""
            import os
            def whoami():
                mask = os.umask(0)
                return [os.getuid(), os.getgid(), len(os.getgroups()), mask]
        """)
        with Session(path) as session:
            run = session.run("whoami", [[]], 10.0)
            expected = [session.isolation.uid, session.isolation.gid, 0, 0o077]
        assert run.cases[0].status is RunStatus.RETURNED
        assert run.cases[0].value == expected


class TestResourceLimits:
    def test_files_are_capped_in_size(self, write_submission):
        """Writing past Limits.file_bytes fails with 'File too large' (EFBIG), in any mode."""
        path = write_submission("""
            def fill():
                with open("big.bin", "wb") as handle:
                    handle.write(b"x" * (2 << 20))
        """)
        with Session(path, Limits(file_bytes=1 << 20)) as session:
            run = session.run("fill", [[]], 10.0)
        assert run.cases[0].status is RunStatus.RAISED
        assert run.cases[0].error.message == "[Errno 27] File too large"


class TestStartup:
    def test_a_student_process_that_cannot_start_is_the_graders_failure(self, write_submission):
        """If the worker dies before any student code runs, grading fails loudly (exit 4), never a 0."""
        path = write_submission("def f():\n    return 1\n")
        with pytest.raises(InternalError, match="the student process could not start"):
            with Session(path, Limits(memory_bytes=16 << 20)) as session:  # too little to start Python
                session.run("f", [[]], 10.0)


class TestSharedFoldersWalk:
    """The world-writable folders below /tmp & co. are found by a walk kept for ten minutes."""

    def test_a_recent_walk_is_used_and_an_old_one_walks_again(self, tmp_path, monkeypatch):
        from grader.paths import CACHE_ENV
        from grader.sandbox import sweep
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
        shared = tmp_path / "shared"
        (shared / "deep" / "open").mkdir(parents=True)
        os.chmod(shared, 0o1777)
        os.chmod(shared / "deep" / "open", 0o777)
        roots = (str(shared),)
        sweep._writable_dirs.cache_clear()
        found = sweep._writable_dirs(roots)
        assert found == (str(shared), str(shared / "deep" / "open"))
        record = json.loads((tmp_path / "cache" / "shared-folders.json").read_text())
        assert record["roots"] == list(roots) and record["folders"] == list(found)
        assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700

        walks = []
        real = sweep._find_writable
        monkeypatch.setattr(sweep, "_find_writable", lambda *a: walks.append(a) or real(*a))
        sweep._writable_dirs.cache_clear()
        assert sweep._writable_dirs(roots) == found and walks == []  # the record, no walk
        record["walked"] -= sweep.WALK_MAX_AGE + 1
        (tmp_path / "cache" / "shared-folders.json").write_text(json.dumps(record))
        sweep._writable_dirs.cache_clear()
        assert sweep._writable_dirs(roots) == found and len(walks) == 1  # too old: walked again
        (tmp_path / "cache" / "shared-folders.json").write_text("{not json")
        sweep._writable_dirs.cache_clear()
        assert sweep._writable_dirs(roots) == found and len(walks) == 2  # damaged: walked again
        sweep._writable_dirs.cache_clear()


KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}.get(platform.machine(), (None, None))


@needs_root
@pytest.mark.skipif(KEYCTL is None, reason="keyctl's system call number is known for x86_64 and aarch64 only")
class TestKeyrings:
    @pytest.mark.parametrize("fork_server", [True, False], ids=["zygote", "no-zygote"])
    def test_close_empties_the_uids_keyrings(self, fork_server, monkeypatch):
        """A key the student uid put in its user keyring is there before close (the check works)
        and gone after: a later session that draws the same uid finds nothing. Without a fork
        server (student processes started as fresh Pythons) the grader empties them itself."""
        from grader.sandbox import spawn
        monkeypatch.setattr(spawn, "FORK_SERVER", fork_server)
        libc = ctypes.CDLL(None, use_errno=True)
        name = f"mha-keyring-test-{secrets.token_hex(4)}".encode()
        syscall, c_long = libc.syscall, ctypes.c_long

        def add() -> int:
            made = syscall(c_long(ADD_KEY), b"user", name, b"secret", ctypes.c_size_t(6), c_long(-4))
            return 0 if made > 0 else 1

        def find() -> int:  # 0: found
            return 0 if syscall(c_long(KEYCTL), c_long(10), c_long(-4), b"user", name, c_long(0)) > 0 else 1

        jail = Isolation()
        try:
            assert run_as_uid(jail.uid, add) == 0
            assert run_as_uid(jail.uid, find) == 0
            assert jail.uid in isolation.key_users()
        finally:
            jail.close()
        assert run_as_uid(jail.uid, find) == 1

    def test_keyrings_that_cannot_be_emptied_retire_the_uid(self, monkeypatch):
        """When the uid's keyrings cannot be emptied (the student took away the permission), close
        does not fail (the student's grade stands) and no later session draws that uid while it
        owns keys; once it owns none, the uid is drawn again."""
        jail = Isolation()
        uid, owners = jail.uid, {jail.uid}
        monkeypatch.setattr(isolation, "key_users", lambda: owners)
        monkeypatch.setattr(Isolation, "_clear_keys", lambda self, uid, gid: False)
        jail.close()
        monkeypatch.setattr(isolation, "SANDBOX_IDS", range(uid, uid + 1))
        with pytest.raises(InternalError, match="no free uid"):
            Isolation()
        owners.clear()  # its keys are gone (a reboot, the kernel's collection)
        again = Isolation()
        try:
            assert again.uid == uid
        finally:
            again.close()


@needs_root
class TestClaims:
    def test_bound_socket_names_take_no_uid(self):
        """Every abstract socket name a grader once claimed uids with, bound by someone else, leaves
        every uid free: claims are locks in a root-only folder (were they socket names, one student
        could make every classmate fail with "no free uid")."""
        import resource
        import socket
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        held = []
        try:
            for number in SANDBOX_IDS:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                try:
                    sock.bind(f"\0mha-sandbox-{number}")
                    held.append(sock)
                except OSError:
                    sock.close()
            jails = [Isolation() for _ in range(3)]
            assert len({j.uid for j in jails}) == 3
            for jail in jails:
                jail.close()
        finally:
            for sock in held:
                sock.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


FUTURE_IMPORTS = """from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import logging
import pathlib
import sqlite3
import xml.etree.ElementTree as ET

log = logging.getLogger("student")


def modules() -> list:
    # every one of these imported: their files are read as the student's uid
    table = sqlite3.connect(":memory:").execute("select 1").fetchone()[0]
    rows = list(csv.reader(io.StringIO("a,b")))
    return [json.loads(json.dumps(table)), rows[0][1], pathlib.PurePath("x/y").name, ET.fromstring("<a/>").tag,
            dataclasses.is_dataclass(log), datetime.date(2024, 1, 2).isoformat()]
"""


@needs_root
class TestImports:
    @pytest.mark.parametrize("namespaces", ["default", "off"])
    def test_ordinary_standard_modules_import_as_the_student_uid(self, write_submission, monkeypatch, namespaces):
        """`from __future__ import annotations`, logging, pathlib, json, csv, sqlite3 (an extension
        module) and xml import in every root mode, from a Python installation that other users
        cannot read by its path when this machine's is one (a failed import would score 0)."""
        if namespaces == "off":
            monkeypatch.setenv(isolation.NAMESPACES_ENV, "off")
        path = write_submission(FUTURE_IMPORTS)
        with Session(path) as session:
            run = session.run("modules", [[]], 30.0)
            mode = session.isolation.mode
        assert run.cases[0].status is RunStatus.RETURNED, run
        assert run.cases[0].value == [1, "b", "y", "a", False, "2024-01-02"]
        assert mode in (("uid",) if namespaces == "off" else ("namespaces",) if REQUIRE_ISOLATION else ("namespaces", "uid"))

    def test_this_machines_installation_is_the_unreadable_case(self):
        """The case above is the hard one only where other users cannot reach the installation."""
        jail = Isolation()
        try:
            stdlib = os.path.dirname(os.__file__).encode()
            libc = ctypes.CDLL(None, use_errno=True)
            reached = run_as_uid(jail.uid, lambda: 0 if libc.access(stdlib, os.R_OK | os.X_OK) == 0 else 1) == 0
            assert reached is not installation_hidden_from_others()  # (where it is reached, the test above proves less)
        finally:
            jail.close()


@needs_root
class TestNamespaces:
    @pytest.fixture(autouse=True)
    def _needs_namespaces(self, write_submission):
        with Session(write_submission("def f():\n    return 1\n", "probe.py")) as session:
            session.run("f", [[]], 30.0)
            if session.isolation.mode != "namespaces":
                isolation_missing(f"namespaces do not work here: {session.isolation.describe()}")

    def test_the_student_sees_only_its_own_files(self, write_submission):
        """Its root holds the system folders, the Python installation and its session folder: not
        the checkout's files (CI keeps its venv inside the checkout: that folder alone is there),
        not the course, not /root's other files, not the machine's /tmp."""
        path = write_submission("""
            import os
            def look():
                checkout = os.path.exists(os.path.join(@CHECKOUT@, 'tests'))  # a venv inside it is seen
                tmp = set(os.listdir("/tmp"))
                python = tmp & @PYTHON@  # a virtualenv under /tmp stays at its path, read-only
                return [sorted(tmp - python) == [os.path.basename(os.path.dirname(os.getcwd()))],
                        [name for name in python if os.access(os.path.join("/tmp", name), os.W_OK)],
                        checkout, os.path.exists("/proc/1/cmdline") and os.getpid() == 1,
                        sorted(os.listdir("/dev"))]
        """.replace("@CHECKOUT@", repr(str(PACKAGE.parent))).replace("@PYTHON@", repr(installation_in_tmp())))
        with Session(path) as session:
            run = session.run("look", [[]], 30.0)
        assert run.cases[0].status is RunStatus.RETURNED, run
        assert run.cases[0].value == [True, [], False, True, ["fd", "full", "null", "random", "shm", "stderr",
                                                              "stdin", "stdout", "urandom", "zero"]]

    def test_every_student_process_gets_a_network_namespace_never_used_before(self, write_submission):
        """Two students at once are in different network namespaces (neither reaches the other's
        abstract socket names); a later student, and a later process of the same session (after
        a crash), are in namespaces none of them used, with no network."""
        import socket
        name = f"\0mha-netns-test-{secrets.token_hex(4)}"
        path = write_submission("""
            import os, socket
            NAME = @NAME@
            def where():
                return os.readlink("/proc/self/ns/net")
            HELD = []
            def hold():  # binds the name and keeps the socket (the process lives on)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(NAME)
                s.listen(1)
                HELD.append(s)
                return "held"
            def crash():
                os._exit(3)
            def reach():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(NAME)
                    return "connected"
                except OSError:
                    pass
                s.bind(NAME)  # free
                try:
                    socket.create_connection(("127.0.0.1", 9), timeout=1)
                    return "network"
                except OSError:
                    return "free"
        """.replace("@NAME@", repr(name)))
        held = []  # the namespaces seen, kept open here so that none's number is reused meanwhile

        def where(session):
            seen = session.run("where", [[]], 30.0).cases[0].value
            held.append(os.open(f"/proc/{session._worker.proc.pid}/ns/net", os.O_RDONLY))
            assert os.readlink(f"/proc/self/fd/{held[-1]}") == seen
            return seen
        try:
            seen = [os.readlink("/proc/self/ns/net")]
            with Session(path) as first:
                seen.append(where(first))
                assert first.run("hold", [[]], 30.0).cases[0].value == "held"
                with Session(path) as other:  # at the same time: another namespace
                    seen.append(where(other))
                    assert other.run("reach", [[]], 30.0).cases[0].value == "free"
                assert first.run("crash", [[]], 30.0).cases[0].status is RunStatus.CRASHED
                seen.append(where(first))  # a fresh process of the same session
                assert first.run("reach", [[]], 30.0).cases[0].value == "free"
            with Session(path) as one, Session(path) as two:
                seen += [where(one), where(two)]
                assert [one.run("reach", [[]], 30.0).cases[0].value,
                        two.run("reach", [[]], 30.0).cases[0].value] == ["free", "free"]
        finally:
            for fd in held:
                os.close(fd)
        assert len(set(seen)) == len(seen) == 6, seen
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.bind(name)  # never bound in the grader's own namespace
        probe.close()

    def test_nothing_of_one_student_is_left_for_the_next(self, write_submission):
        """Every student process gets its own copy of the root the fork server builds once: what
        one writes in /tmp, /var/tmp or /dev/shm is there for it alone (not for a classmate at the
        same time, not for a later one), and the shared part cannot be written at all."""
        path = write_submission("""
            import os
            def leave():
                for folder in ("/tmp", "/var/tmp", "/dev/shm"):
                    with open(os.path.join(folder, "left" + folder.replace("/", "-")), "w") as handle:
                        handle.write("x")
                written = []
                session = os.path.dirname(os.getcwd())  # root's, readable by the student's group
                for folder in ("/", "/var", "/dev", "/proc/..", session):
                    try:
                        open(os.path.join(folder, "mine"), "w").close()
                        written.append(folder)
                    except OSError:
                        pass
                return [bool(os.statvfs("/").f_flag & os.ST_RDONLY), written]
            def find():
                return sorted({name for folder in ("/tmp", "/var/tmp", "/dev/shm") for name in os.listdir(folder)
                               if not name.startswith("mha-run-")} - @PYTHON@)
        """.replace("@PYTHON@", repr(installation_in_tmp())))
        mine = ["left-dev-shm", "left-tmp", "left-var-tmp"]
        with Session(path) as first:
            assert first.run("leave", [[]], 30.0).cases[0].value == [True, []]
            assert first.run("find", [[]], 30.0).cases[0].value == mine
            with Session(path) as other:
                assert other.run("find", [[]], 30.0).cases[0].value == []
        for _ in range(2):
            with Session(path) as later:
                assert later.run("find", [[]], 30.0).cases[0].value == []
                assert later.isolation.mode == "namespaces"

    @pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "reap-not-seen"])
    def test_daemons_end_with_the_process_id_space_that_held_them(self, write_submission, monkeypatch, reaped):
        """A student process leaves double-forked daemons (in a session of their own, ignoring every
        signal they can) in its process-id space. Once the student process, process 1 of that
        space, is reaped, none of them runs, without a scan of /proc: the kernel killed them. If
        its reaping is not seen in time, the session scans for the uid's processes as ever."""
        path = write_submission("""
            import os, signal, time
            def leave():
                for _ in range(3):
                    if os.fork() == 0:
                        os.setsid()
                        if os.fork() == 0:
                            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                                signal.signal(sig, signal.SIG_IGN)
                            while True:
                                time.sleep(1)
                        os._exit(0)
                time.sleep(0.2)
                return len([p for p in os.listdir("/proc") if p.isdigit()])
        """)
        from grader.sandbox import session as session_module
        if not reaped:
            monkeypatch.setattr(session_module, "reap", lambda proc: proc.release(seconds=0.0) and False)
        scans = []
        real_kill_all = Isolation.kill_all
        monkeypatch.setattr(Isolation, "kill_all", lambda self, worker=None: scans.append(worker) or
                            real_kill_all(self, worker))
        with Session(path) as session:
            run = session.run("leave", [[]], 30.0)
            uid = session.isolation.uid
        assert run.cases[0].status is RunStatus.RETURNED and run.cases[0].value >= 4, run  # itself and 3 daemons
        assert session.isolation.mode == "namespaces"
        assert not [p for p in processes().values() if uid in p.uids]
        assert (scans == []) is reaped

    def test_session_folders_made_outside_tmp(self, write_submission, monkeypatch):
        """Session folders made elsewhere ($TMPDIR under /root here, or /var/tmp) are at their own
        path in the student's root, alone in their folder, with an empty /tmp beside them."""
        parents = [Path(tempfile.mkdtemp(prefix="mha-test-sessions-", dir=folder)) for folder in ("/root", "/var/tmp")]
        path = write_submission("""
            import os
            def look():
                here = os.path.dirname(__file__)  # the session folder, by the path the grader made it at
                with open("note", "w") as handle:
                    handle.write("x")
                return [os.path.dirname(here), os.listdir(os.path.dirname(here)) == [os.path.basename(here)],
                        sorted(set(os.listdir("/tmp")) - @PYTHON@), os.path.basename(os.getcwd()),
                        os.path.join(here, os.path.basename(os.getcwd()), "note")]
        """.replace("@PYTHON@", repr(installation_in_tmp())))
        try:
            for parent in parents:
                monkeypatch.setattr(tempfile, "tempdir", str(parent))
                with Session(path) as session:
                    run = session.run("look", [[]], 30.0)
                    assert session.isolation.mode == "namespaces"
                    value = run.cases[0].value
                    assert Path(value[4]).read_text() == "x", value  # written to the real session folder
                    assert value[3] == "home-1", value  # the first process's home, in the session folder
                assert value[:2] == [str(parent), True], value
                assert value[2] == ([] if parent.parts[1] == "root" else [os.path.basename(parent)]), value
        finally:
            for parent in parents:
                shutil.rmtree(parent, ignore_errors=True)

    def test_a_kernel_without_open_tree_means_no_namespaces_and_says_why(self, tmp_path, monkeypatch):
        """Before Linux 5.2 a session folder cannot be moved into a copy of the root: the probe
        fails (so the grader runs without namespaces), and says which call failed."""
        from grader.sandbox import confine, jail
        monkeypatch.setattr(jail, "SYS_OPEN_TREE", 100000)  # no such system call: ENOSYS, as on an old kernel
        session = tmp_path / "mha-run-probe"
        session.mkdir()
        own = os.open("/proc/self/ns/pid", os.O_RDONLY)
        try:
            works, why = jail.probe(jail.Roots(confine.library_folders()), str(session), [], 1 << 20, own)
        finally:
            os.close(own)
        assert (works, why) == (False, "[Errno 38] open_tree: Function not implemented")
        assert os.listdir(session) == []  # the folder the root was built on is gone

    @pytest.mark.parametrize("made_in", ["/tmp", "/root"])
    def test_a_python_installation_in_tmp_stays_in_sight(self, tmp_path, made_in):
        """Each student process's fresh /tmp (and the folder its session folder is made in) would
        cover a Python installation inside it (a virtualenv in /tmp): it is put back, read-only,
        with the folders hidden inside it still covered."""
        from grader.sandbox import jail
        library = tmp_path / "venv" / "site-packages"
        (library / "secret").mkdir(parents=True)
        (library / "module.py").write_text("X = 1\n")
        (library / "secret" / "answers").write_text("hidden")
        parent = Path(tempfile.mkdtemp(prefix="mha-test-sessions-", dir=made_in))
        if made_in == "/root":
            library = parent / "venv" / "site-packages"  # inside the folder the session folders are made in
            shutil.copytree(tmp_path / "venv" / "site-packages", library)
        session = parent / "mha-run-x"
        session.mkdir()
        read, write = os.pipe()
        try:
            root = jail.Roots([str(library)]).get(str(session), [str(library / "secret")])
            pid = os.fork()
            if pid == 0:
                try:
                    jail.enter(root, str(session), 1 << 20)
                    seen = [open(library / "module.py").read(), os.listdir(library / "secret"),
                            os.access(library, os.W_OK), os.listdir(session), sorted(os.listdir("/tmp"))]
                    os.write(write, json.dumps(seen).encode())
                finally:
                    os._exit(0)
            os.close(write)
            ready, _, _ = select.select([read], [], [], 60)  # bounded: a child stuck in a mount fails the test
            if not ready:
                os.kill(pid, signal.SIGKILL)
            seen = json.loads(os.read(read, 1 << 16)) if ready else None
            os.waitpid(pid, 0)
        finally:
            os.close(read)
            shutil.rmtree(parent)
        assert seen is not None and seen[:4] == ["X = 1\n", [], False, []]
        in_tmp = {parent.name, library.relative_to("/tmp").parts[0]} if made_in == "/tmp" else set()
        assert set(seen[4]) == in_tmp  # the student's own /tmp: only the ways to its session folder and the library

    @pytest.mark.parametrize("ahead", ["built", "failed"])
    def test_the_root_is_built_while_the_fork_server_waits(self, write_submission, monkeypatch, ahead):
        """`prestart` (as `mha grade` and `mha check` start) has a new fork server build the
        student's root before any request comes, in a folder it lends and then deletes; if that
        fails (here: the folder is gone), the first request for namespaces tries again, and gets them."""
        from grader.sandbox import spawn
        path = write_submission("def f():\n    return 1\n")
        spawn.stop_fork_server()
        lent, real_mkdtemp = [], tempfile.mkdtemp
        monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: (lent.append(real_mkdtemp(**kw)), lent[-1])[1])
        if ahead == "built":
            spawn.prestart()
            spawn.prestart()  # as `mha grade` does (once as it starts, once for its command): one folder lent
            server = spawn.fork_server()
        else:
            server = spawn.fork_server()
            lent.append(os.path.join(tempfile.gettempdir(), f"mha-test-gone-{secrets.token_hex(4)}"))
            server._send({"op": "prepare", "jail": spawn.jail_spec(), "folder": lent[-1]})
        monkeypatch.undo()
        deadline = time.monotonic() + 60
        while server.prepared is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if ahead == "built":
            assert server.prepared == (True, "")
        else:
            assert server.prepared[0] is False and "No such file or directory" in server.prepared[1], server.prepared
        assert len(lent) == 1 and not os.path.exists(lent[0])  # the lent folder is gone
        with Session(path) as session:
            assert session.run("f", [[]], 30.0).cases[0].value == 1
            assert session.isolation.mode == "namespaces"
        assert spawn.fork_server() is server

    def test_namespaces_off_runs_the_fallback(self, write_submission, monkeypatch):
        """MHA_NAMESPACES=off: as root without namespaces, and the mode says why."""
        monkeypatch.setenv(isolation.NAMESPACES_ENV, "off")
        with Session(write_submission("def f():\n    return 1\n")) as session:
            session.run("f", [[]], 30.0)
            assert session.isolation.mode == "uid"
            assert "MHA_NAMESPACES=off" in session.isolation.describe()
