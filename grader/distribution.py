"""What the package says about itself (version, summary, Python, dependencies, entry point), read
from the installed distribution's metadata: pyproject.toml is their one source.

The exports that write package metadata of their own (exports/wheel.py, the student bundle's
pyproject.toml in classroom/bundles.py) take every fact from here. The one fact an installed
package does not record, the build requirement, is BUILD_REQUIRES; tests/test_metadata.py checks
every fact here against pyproject.toml.

The student bundle (classroom/bundles.py, exports/wheel.py) is the same distribution, versioned
`<version>+student`: both install the import package `grader`, so pip must see one distribution
and replace one install with the other whole, never lay one's files over the other's.

importlib.metadata is imported on first use only: it costs a cold `mha grade` more than the
rest of its start, and grading needs none of this.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["BUILD_REQUIRES", "DISTRIBUTION", "STUDENT_LABEL", "UNKNOWN_VERSION", "dependencies",
           "entry_point", "requires_python", "student_version", "summary", "version"]

DISTRIBUTION = "mha-exercises"
STUDENT_LABEL = "student"  # the student bundle's local version label: <version>+student
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
    """The installed version (`<version>+student` for the student bundle), else UNKNOWN_VERSION."""
    found = _installed(DISTRIBUTION)
    return found.version if found is not None else UNKNOWN_VERSION


def student_version() -> str:
    """The student bundle's version: this grader's, with the local label `+student`."""
    return f"{version().partition('+')[0]}+{STUDENT_LABEL}"


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
