"""Tests that need root or namespaces: skipped where they cannot run, a failure where they must.

With MHA_REQUIRE_ISOLATION=1 (set by .ci/run as root) a test that cannot exercise the sandbox's
isolation here fails instead of skipping, so a run that proves nothing about it never looks green.
Use `skip_isolation(reason)` where pytest.skip would be called, and mark root-only tests with
`@pytest.mark.root` (conftest.py skips them without root, or fails them when isolation is required).
"""
from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_ENV = "MHA_REQUIRE_ISOLATION"
ROOT_MODE = os.geteuid() == 0


def isolation_required() -> bool:
    """Whether every isolation test must run here (MHA_REQUIRE_ISOLATION=1)."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def skip_isolation(reason: str) -> NoReturn:
    """Skip this isolation test because `reason`; fail instead when isolation is required."""
    if isolation_required():
        pytest.fail(f"{reason} (isolation tests must run: {REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(reason)


__all__ = ["REQUIRE_ENV", "ROOT_MODE", "isolation_required", "skip_isolation"]
