"""The grader's dependencies as wheels, pinned to the versions running here, for offline installs.

An autograder image must build without the network and install the same versions every time:
`pinned()` gives `numpy==X`, `PyYAML==Y`, `click==Z` (and `pip==P`, which installs them) as
installed in this environment; `download(python, platform)` fetches their binary wheels for
that Python and platform with `pip download` (the package index or pip's cache: the export
needs them once, the image never).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..errors import InternalError

__all__ = ["DISTRIBUTIONS", "GRADESCOPE_PLATFORMS", "download", "pinned", "running_python"]

DISTRIBUTIONS = ("numpy", "PyYAML", "click", "pip")
# Gradescope's images are Ubuntu (20.04 and later: glibc >= 2.31) on x86_64: every manylinux tag
# such a system accepts (pip does not widen a --platform it is given).
GRADESCOPE_PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(31, 16, -1)) + \
    ("manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")


def running_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def pinned() -> list[str]:
    """`name==version` of each dependency as installed here."""
    found = []
    for name in DISTRIBUTIONS:
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            raise InternalError(f"{name} is not installed here, so its version cannot be pinned") from None
    return found


def download(python: str, platforms: tuple[str, ...] = GRADESCOPE_PLATFORMS, requirements: list[str] | None = None,
             timeout: float = 600) -> dict[str, bytes]:
    """{wheel file name: bytes} of `requirements` (default: `pinned()`) for CPython `python`
    ("3.11") on one of `platforms`; InternalError with pip's last lines when they cannot be had."""
    requirements = pinned() if requirements is None else requirements
    with tempfile.TemporaryDirectory(prefix="mha-wheels-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                   "--no-deps", "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
                   *(f"--platform={p}" for p in platforms), "--dest", folder, *requirements]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InternalError(f"pip download failed: {exc}") from exc
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-3:])
            raise InternalError(f"cannot download wheels of {', '.join(requirements)} for Python {python} on "
                                f"Linux x86_64 (the export needs the package index or pip's cache once):\n{tail}")
        return {path.name: path.read_bytes() for path in sorted(Path(folder).glob("*.whl"))}
