"""Which isolation mode student code runs in here (`mha doctor`), and the warning for graders
that run without root (README, "Security model")."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .isolation import MODES

__all__ = ["MODES", "sandbox_mode", "unprotected_warning"]


def sandbox_mode() -> tuple[str, str]:
    """The mode a student process runs in here, found by running one (a one-line submission in a
    session of its own), and its description: ("namespaces" | "uid" | "same user", text)."""
    from .session import Session  # only `mha doctor` runs one; the warning needs none of it
    folder = Path(tempfile.mkdtemp(prefix="mha-doctor-"))
    try:
        path = folder / "attention.py"
        path.write_text("def probe():\n    return 1\n")
        with Session(path) as session:
            session.run("probe", [[]], 30.0)
            return session.isolation.mode, session.isolation.describe()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def unprotected_warning() -> str | None:
    """What to tell a grader of untrusted code that runs without root, or None as root."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return None
    return ("warning: not running as root, so student code runs as your own user: it can read the hidden "
            "cases and solutions on this machine and change its own score (for example by rewriting the "
            "compiled assignment in your cache). Grade untrusted submissions as root (the security model: docs/security.md).")
