"""The grader's dependencies as wheels, pinned to the versions running here, for offline installs.

An autograder image must build without the network and install the same versions every time:
`pinned()` gives `numpy==X`, `PyYAML==Y`, `click==Z` (and `pip==P`, which installs them) as
installed in this environment; `download(python, platform)` fetches their binary wheels for
that Python and platform with `pip download` (the package index or pip's cache: the export
needs them once, the image never). `resolve(python)` does the same for an image whose Python
the installed versions have no wheels for (a 3.10 image from a 3.11 install): the newest
version within the package's supported range that has one, and a note saying so.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ..errors import InternalError

__all__ = ["DISTRIBUTIONS", "GRADESCOPE_PLATFORMS", "download", "pinned", "resolve", "running_python"]

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


def _floors() -> dict[str, str]:
    """{distribution (lower case): its lowest supported version} from the package's dependencies."""
    from .. import distribution
    floors = {}
    for dependency in distribution.dependencies():
        name, _, floor = dependency.partition(">=")
        floors[name.strip().lower()] = floor.strip()
    return floors


def resolve(python: str, platforms: tuple[str, ...] = GRADESCOPE_PLATFORMS,
            timeout: float = 600) -> tuple[dict[str, bytes], list[str]]:
    """The dependency wheels for CPython `python` and what was changed to get them.

    Each dependency at the version installed here when it has a wheel for `python`; else the
    newest release between the floor the package declares (its metadata) and the installed version that
    has one (numpy 2.3 and later have no wheels for Python 3.10, for instance), with a note
    saying so. InternalError, saying how to get the wheels, when a dependency has none."""
    try:
        return download(python, platforms=platforms, timeout=timeout), []
    except InternalError:
        pass  # some pinned version has no wheel for that Python: look for each one alone
    floors, wheels, notes = _floors(), {}, []
    for requirement in pinned():
        name, installed = requirement.split("==")
        try:
            wheels.update(download(python, platforms=platforms, requirements=[requirement], timeout=timeout))
            continue
        except InternalError:
            pass
        floor = floors.get(name.lower())
        wanted = f"{name}>={floor},<={installed}" if floor else f"{name}<={installed}"
        try:
            found = download(python, platforms=platforms, requirements=[wanted], timeout=timeout)
        except InternalError:
            raise InternalError(
                f"no wheel of {wanted} for Python {python} on Linux x86_64 in the package index or pip's cache. "
                f"Where the network is, run: pip download '{wanted}' --only-binary=:all: --python-version {python} "
                f"--platform manylinux2014_x86_64 --dest wheels && export again with PIP_FIND_LINKS=wheels; or "
                f"export for the Python your image has (--python)") from None
        wheels.update(found)
        got = next(n.split("-")[1] for n in found)
        notes.append(f"{name} {installed} has no wheel for Python {python}: the export carries {name} {got}, "
                     f"the newest release from {floor or 'any'} up with one")
    return wheels, notes


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


def pip_wheel(wheels: Iterable[str]) -> str:
    """The file name of the one pip wheel among `wheels` (ValueError unless exactly one)."""
    pips = sorted(name for name in wheels if name.startswith("pip-"))
    if len(pips) != 1:
        raise ValueError(f"the wheels must hold exactly one pip wheel (got {pips or 'none'})")
    return pips[0]


def offline_requirements(wheels: Iterable[str], own: str) -> str:
    """What pip installs offline: the grader's own wheel `own` and every other wheel but pip,
    pinned by the version in its file name."""
    pins = sorted(name.split("-")[0].lower() + "==" + name.split("-")[1] for name in wheels
                  if not name.startswith("pip-"))
    return " ".join([f"mha-exercises=={own.split('-')[1]}", *pins])
