"""A wheel of this grader, built from the running package: what exports ship so that a
platform installs exactly this grader, offline, without this repository or a package index.

`build(course)` returns (file name, bytes) of `mha_exercises-<version>-py3-none-any.whl`:
every file of the installed `grader` package (no caches, no packaged course of its own),
the course's own files as the packaged course (`grader/_course`: its manifest,
`course.manifest.course_files`, so never course.yaml, as a secret never goes into a package, nor
the instructor's own attention.py and answers.yaml, which may hold the answers, nor anything
else lying in the course folder), and the dist-info pip needs (METADATA with the light
dependencies, WHEEL, entry_points.txt, the license, RECORD). It works from a checkout and from an
installed wheel alike, and is deterministic: the same files give byte-identical bytes.

`build_student(assignment)`: `mha_exercises-<version>+student-py3-none-any.whl` (the same
distribution, so pip replaces one install with the other whole), what students
may have: the modules of the student bundle (`classroom.bundles.STUDENT_MODULES`, an allow-list:
no reference, no bugs (its known-wrong implementations), no loader, no quiz key) and the otter
checks, no course, and the default seed's public seed cases (`grader/_seed_cases/default.json`: public cases
with their expected answers precomputed, a withheld case with the form of its answer only) for the otter
export's student checks (`grading/otter_checks.py`).
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from .. import distribution as installed
from ..course.model import Course
from ..distribution import DISTRIBUTION
from ..grading.otter_checks import STUDENT_SEED_CASES as SEED_CASES  # where otter_checks finds the public seed cases
from ..paths import PACKAGE
from .archive import zip_bytes

__all__ = ["DISTRIBUTION", "SEED_CASES", "build", "build_student", "filename", "metadata"]

# What the student wheel holds beyond the student bundle's modules: what the otter tests and the
# nbgrader test cells call.
STUDENT_EXTRA = ("grading/otter_checks.py", "grading/nbgrader_checks.py")
LICENSE_TEXT = "MIT License: see the LICENSE file of the mha-exercises source distribution.\n"
_SKIP = {"__pycache__", "_course"}


def _version() -> str:
    return installed.version()


def filename(version: str | None = None) -> str:
    """The wheel's file name (PEP 427, the distribution name normalised), of this grader's version
    or of `version` (the student wheel's: `installed.student_version()`)."""
    return f"{DISTRIBUTION.replace('-', '_')}-{version or _version()}-py3-none-any.whl"


def metadata(version: str | None = None) -> str:
    """METADATA (core metadata 2.4, PEP 639 license expression), the facts taken from this
    installed grader's own metadata."""
    lines = ["Metadata-Version: 2.4", f"Name: {DISTRIBUTION}", f"Version: {version or _version()}",
             f"Summary: {installed.summary()}", "License-Expression: MIT", "License-File: LICENSE",
             f"Requires-Python: {installed.requires_python()}"]
    lines += [f"Requires-Dist: {d}" for d in installed.dependencies()]
    return "\n".join(lines) + "\n"


def _license() -> str:
    for candidate in (PACKAGE.parent / "LICENSE",):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    try:
        from importlib.metadata import PackageNotFoundError, distribution
        text = distribution(DISTRIBUTION).read_text("licenses/LICENSE")
    except (PackageNotFoundError, OSError):
        text = None
    return text or LICENSE_TEXT


def _package_files(folder: Path, prefix: str, skip: set[str]) -> dict[str, bytes]:
    """Regular files under `folder` as {prefix/relative path: bytes}, less the parts named in `skip`."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part in skip for part in relative.parts) or path.suffix == ".pyc" or path.is_symlink() \
                or not path.is_file():
            continue
        files[f"{prefix}/{relative.as_posix()}"] = path.read_bytes()
    return files


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(version: str, files: dict[str, bytes], scripts: bool) -> tuple[str, bytes]:
    info = f"{DISTRIBUTION.replace('-', '_')}-{version}.dist-info"
    files[f"{info}/METADATA"] = metadata(version).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: mha-exercises\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if scripts:
        files[f"{info}/entry_points.txt"] = f"[console_scripts]\nmha = {installed.entry_point()}\n".encode()
    files[f"{info}/top_level.txt"] = b"grader\n"
    files[f"{info}/licenses/LICENSE"] = _license().encode()
    record = [_record_line(name, data) for name, data in sorted(files.items())] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    return filename(version), zip_bytes(files)


def build(course: Course) -> tuple[str, bytes]:
    """(file name, wheel bytes) of the grader with `course` as its packaged course: the files of its
    manifest (`course.manifest.course_files`), never the rest of its folder."""
    from ..course.manifest import course_files
    files = _package_files(PACKAGE, "grader", _SKIP)
    for relative in course_files(course):
        files[f"grader/_course/{relative.as_posix()}"] = (Path(course.root) / relative).read_bytes()
    return _wheel(_version(), files, scripts=True)


def build_student(course) -> tuple[str, bytes]:
    """(file name, wheel bytes) of the student package: pruned, no course, public seed cases."""
    import json

    from ..classroom.bundles import student_package
    from ..course.quiz import DEFAULT_SEED
    from ..grading.seed_cases import build as build_seed_cases
    files = {f"grader/{name}": data for name, data in sorted(student_package(STUDENT_EXTRA).items())}
    seed_cases = build_seed_cases(course, DEFAULT_SEED, "default")
    files[f"grader/{SEED_CASES}"] = (json.dumps(seed_cases, sort_keys=True, separators=(",", ":")) + "\n").encode()
    return _wheel(installed.student_version(), files, scripts=False)
