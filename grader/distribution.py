"""What the package says about itself (version, summary, Python, dependencies, entry point), read
from the installed distribution's metadata: pyproject.toml is their one source.

The exports that write package metadata of their own (exports/wheel.py, the student bundle's
pyproject.toml in classroom/release.py) take every fact from here. The one fact an installed
package does not record, the build requirement, is BUILD_REQUIRES; tests/test_metadata.py checks
every fact here against pyproject.toml.

importlib.metadata is imported on first use only: it costs a cold `mha grade` more than the
rest of its start, and grading needs none of this.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["BUILD_REQUIRES", "DISTRIBUTION", "STUDENT_DISTRIBUTION", "UNKNOWN_VERSION", "dependencies",
           "entry_point", "requires_python", "summary", "version"]

DISTRIBUTION = "mha-exercises"
STUDENT_DISTRIBUTION = "mha-exercises-student"  # the student bundle (classroom/release.py)
BUILD_REQUIRES = "setuptools>=77"  # pyproject.toml's [build-system] requires (not in installed metadata)
UNKNOWN_VERSION = "0+unknown"  # a checkout imported without being installed


@functools.cache
def _installed(name: str) -> Distribution | None:
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        return distribution(name)
    except PackageNotFoundError:
        return None


def _full() -> Distribution:
    """The full grader's metadata; a clear error where the package runs uninstalled."""
    found = _installed(DISTRIBUTION)
    if found is None:
        from .errors import InternalError
        raise InternalError(f"{DISTRIBUTION} is not installed, so its metadata (version, dependencies) is "
                            "unknown: install it (pip install -e . in a checkout)")
    return found


def version() -> str:
    """The installed version: the full grader's, else the student bundle's, else UNKNOWN_VERSION."""
    for name in (DISTRIBUTION, STUDENT_DISTRIBUTION):
        found = _installed(name)
        if found is not None:
            return found.version
    return UNKNOWN_VERSION


def summary() -> str:
    return _full().metadata["Summary"]


def requires_python() -> str:
    return _full().metadata["Requires-Python"]


def dependencies() -> tuple[str, ...]:
    """The light install's requirements (no extra's), as pyproject.toml writes them."""
    return tuple(r for r in _full().requires or () if "extra ==" not in r)


def entry_point(name: str = "mha") -> str:
    """The console script `name` as `module:function`."""
    for point in _full().entry_points:
        if point.group == "console_scripts" and point.name == name:
            return point.value
    from .errors import InternalError
    raise InternalError(f"{DISTRIBUTION} declares no console script {name!r}")
