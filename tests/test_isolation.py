"""Who student code runs as, and the clean-up after it (grader/sandbox/isolation.py)."""
from __future__ import annotations

import json
import os
import pwd
import fcntl
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.sandbox import isolation, sweep
from grader.errors import InternalError
from grader.sandbox.isolation import PACKAGE, SANDBOX_IDS, Isolation, private_paths, processes, protect
from grader.sandbox.session import Limits, RunStatus, Session

ROOT_MODE = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT_MODE, reason="a separate student user needs root")


class TestPrivatePaths:
    def test_lists_package_assignment_solutions_git_and_checkout(self, tmp_path):
        """The grader package, the assignment folder, solutions/ and .git/ beside it, and the
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
        name could be bound by anyone: issue 12)."""
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
            while len(_session_pids(jail.uid)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(_session_pids(jail.uid)) == 2  # the child and the orphaned grandchild
        finally:
            jail.close()
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # reaped by the clean-up already (the grader is a subreaper)
        assert _session_pids(jail.uid) == []

    def test_close_deletes_the_uids_files_in_shared_folders(self, tmp_path):
        """Files and folders the uid made in /tmp go; anyone else's stay."""
        jail = Isolation()
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
        from grader.sandbox import isolation, sweep
        from grader.paths import CACHE_ENV
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
