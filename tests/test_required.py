"""MHA_REQUIRE_ISOLATION=1: an isolation test that cannot run here fails instead of skipping."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ._required import REQUIRE_ENV, skip_isolation
from .conftest import ROOT

PROBE = '''
import pytest

@pytest.mark.root
def test_skips_in_its_body():
    pytest.skip("namespaces do not work here")

def test_ordinary_skip():
    pytest.skip("torch is not installed")
'''


class TestSkipIsolation:
    def test_skips_by_default(self, monkeypatch):
        """Without the variable: an ordinary skip, with its reason."""
        monkeypatch.delenv(REQUIRE_ENV, raising=False)
        with pytest.raises(pytest.skip.Exception, match="no namespaces"):
            skip_isolation("no namespaces")

    def test_fails_when_isolation_is_required(self, monkeypatch):
        """MHA_REQUIRE_ISOLATION=1: a failure naming the reason and the variable."""
        monkeypatch.setenv(REQUIRE_ENV, "1")
        with pytest.raises(pytest.fail.Exception, match=r"no namespaces \(isolation tests must run: "
                                                         r"MHA_REQUIRE_ISOLATION=1\)"):
            skip_isolation("no namespaces")


@pytest.mark.parametrize("required, summary", [("", "2 skipped"), ("1", "1 failed, 1 skipped")])
def test_a_root_test_that_skips_fails_only_when_required(tmp_path, required, summary):
    """A `root` test skipping in its body is a failure under MHA_REQUIRE_ISOLATION=1; a skip for
    another reason (an optional tool missing) stays a skip."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport, "
                                          "pytest_runtest_setup  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(PROBE))
    env = {**os.environ, "PYTHONPATH": str(ROOT), REQUIRE_ENV: required}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-o", "markers=root", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1].startswith(summary), done.stdout
    assert done.returncode == (1 if required else 0)
    if required:
        assert "namespaces do not work here (isolation tests must run: MHA_REQUIRE_ISOLATION=1)" in done.stdout
