"""The process table read from /proc (grader/sandbox/proctable.py)."""
from __future__ import annotations

import os
import subprocess

import pytest

from grader.sandbox import proctable

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")


@pytest.fixture
def family():
    """A shell with one sleeping child; yields (shell pid, child pid)."""
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    child = int(shell.stdout.readline())
    try:
        yield shell.pid, child
    finally:
        shell.kill()
        subprocess.run(["kill", "-9", str(child)], check=False)
        shell.wait()
        shell.stdout.close()


class TestStatus:
    def test_reads_parent_uids_and_state(self):
        """This process: its parent, its four uids, alive."""
        me = proctable.status(os.getpid())
        assert me.ppid == os.getppid() and me.uids[:3] == os.getresuid() and len(me.uids) == 4
        assert me.alive and proctable.alive(os.getpid())

    def test_a_missing_process_is_none(self):
        """A pid nobody has gives None, never an error."""
        assert proctable.status(2 ** 22 + 7) is None and not proctable.alive(2 ** 22 + 7)


class TestChildren:
    def test_lists_children_and_descendants(self, family):
        """The shell's child is its child and its descendant; the sleeping child has no child."""
        shell, child = family
        assert proctable.children(shell) == [child]
        assert proctable.children(child) == []
        assert proctable.descendants(shell) == {shell, child}

    def test_the_table_agrees(self, family):
        """The full table builds the same tree from parent pids."""
        shell, child = family
        assert proctable.tree(proctable.processes(), [shell]) == {shell, child}
