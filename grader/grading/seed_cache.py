"""The seed cache: one seed's cases and quiz items, prepared once, for cold starts.

A cold `mha grade` or `mha check` spent about a third of its own time parsing the problem
files and running the reference on every case. Those depend only on the course's files, the
grader's code and the seed, so the first run stores them (full seed cases, seed_cases.py) and
later runs read one file instead, as Python reuses its .pyc files. The file is packed
(seed_cases.pack): the JSON, then every array's bytes, which are read in place (no base64 to
decode, a fifth of the JSON to parse: about 5 ms less of each cold start).

A seed cache file is stored with its stamp: the seed, the size and modification
time of every file of the grader package (its generators, checks...),
and the size, modification time and CRC-32 of every YAML file of the assignment and of its
code (its reference, bugs, answer functions). It is used only when the stamp equals
the current one exactly: change any of them and the next run compiles afresh. (The file name is
a CRC-32 of the stamp; hashlib is not used
because loading OpenSSL would slow every cold start.) A file that cannot be read, is damaged, or
was written for another stamp is ignored and replaced; nothing here is ever needed for a
correct grade.

Where: $MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha-exercises, else ~/.cache/mha-exercises, in a
folder only the grader's user may enter (mode 0700). A seed cache file holds hidden cases
and quiz answers: student code, which runs as another user when the grader is root, cannot
read it (docs/security.md). It is data only (JSON and the arrays' bytes, each read with the
dtype and shape the JSON gives it), never code.
"""
from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path

from ..paths import CACHE_ENV, PACKAGE, cache_dir, write_private
from .seed_cases import SeedCases, build, pack, unpack

__all__ = ["CACHE_ENV", "cache_dir", "cached_seed_cases", "stamp", "validated", "mark_validated"]

FORMAT = 2  # format 2: packed (seed_cases.pack), arrays as their bytes after the JSON
SUFFIX = ".cases"
STUDENT_FILES = {"answers.yaml", "attention.py"}  # files in the course folder that are not the course's


def _files(root: Path | str, wanted: Callable[[str], bool], prune: Callable[[str], bool],
           relative: str = "") -> list[tuple[str, str]]:
    """(relative path, path) of the `wanted` files under `root`, each folder's files (by name) before
    its subfolders (by name, those `prune` names left out, links to folders not followed), as os.walk
    lists them: plain strings, as this runs on every cold start."""
    files: list[str] = []
    folders: list[str] = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                try:
                    folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    folder = False
                (folders if folder else files).append(entry.name)
    except OSError:
        return []
    found = [(relative + name, os.path.join(root, name)) for name in sorted(files) if wanted(name)]
    for name in sorted(folders):
        if not prune(name):
            found += _files(os.path.join(root, name), wanted, prune, f"{relative}{name}/")
    return found


def stamp(root: Path, seed: int) -> str:
    """What a seed cache file depends on: the grader, the course's YAML files and code, the seed."""
    return _stamped(_files_stamp(root), seed)


def _stamped(files: str, seed: int) -> str:
    return f"format {FORMAT}\nseed {seed}\n{files}"  # the grader's version is in its files' stamps


def _files_stamp(root: Path) -> str:
    """The size and modification time of the grader's files, and those and the CRC-32 of the course's,
    and where the course is (its bugs run from there when a case fails: a copy elsewhere is
    prepared on its own)."""
    lines = [f"course {Path(root).resolve()}"]
    for relative, path in _files(PACKAGE, lambda n: n.endswith((".py", ".json")), lambda d: d == "__pycache__"):
        info = os.stat(path)
        lines.append(f"grader/{relative} {info.st_size} {info.st_mtime_ns}")
    for relative, path in _files(Path(root).resolve(), lambda n: n.endswith((".yaml", ".yml", ".py")) and n not in STUDENT_FILES,
                                 lambda d: d.startswith(".")):
        with open(path, "rb") as handle:
            info, data = os.fstat(handle.fileno()), handle.read()
        lines.append(f"{relative} {len(data)} {info.st_mtime_ns} {zlib.crc32(data):08x}")
    return "\n".join(lines)


def cached_seed_cases(root: Path, seed: int, load_course: Callable[[], object] | None = None, *,
             valid_then: Callable[..., dict] | None = None) -> SeedCases:
    """The assignment at `root` with every case and quiz item of seed `seed` prepared: read from
    the cache when it is there and current, else built and stored. The assignment built is the one
    `mha validate` accepts (`valid_then`, validation.valid_then: SpecErrors for one it rejects, exactly
    as without a cache), or what `load_course()` returns."""
    folder = cache_dir()
    try:
        files = _files_stamp(root)
    except OSError:  # an unreadable assignment file: loading it says which
        folder = files = None
    if folder is None or files is None:
        return _seed_cases(_build(root, seed, load_course, valid_then, None))
    current = _stamped(files, seed)
    path = folder / f"{zlib.crc32(current.encode()):08x}-{seed}{SUFFIX}"
    try:
        data, blob = unpack(path.read_bytes())
        if data.get("stamp") == current:  # the grader's own file: each problem decoded when used
            return SeedCases(data, path, lazy=True, blob=blob)
    except Exception:  # none yet, damaged, or of another version: prepare again
        pass
    data = {**_build(root, seed, load_course, valid_then, _stamped(files, -1)), "stamp": current}
    try:
        write_private(path, pack(data))
        _prune(path.parent, keep=KEEP)
    except OSError:
        pass  # no cache this time (read-only home, full disk): grading does not need it
    return _seed_cases(data)


def _build(root: Path, seed: int, load_course: Callable[[], object] | None,
           valid_then: Callable[..., dict] | None, course_stamp: str | None) -> dict:
    def prepare(course) -> dict:
        return build(course, seed, "cached", hidden=True)
    if load_course is not None:
        return prepare(load_course())
    if valid_then is None:
        raise TypeError("compiled() needs load_course or valid_then")
    return valid_then(root, prepare, course_stamp)  # the cases prepared while the keys are checked


KEEP = 16  # seed cache files kept: every change of the files makes a new one


def _prune(folder: Path, keep: int) -> None:
    """Delete all but the `keep` most recently written seed cache files (and any of format 1)."""
    found = sorted(folder.glob(f"*-*{SUFFIX}"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in [*found[keep:], *folder.glob("*-*.json")]:
        old.unlink(missing_ok=True)


def _seed_cases(data: dict) -> SeedCases:
    """Cases the grader has just prepared: each problem's decoded when first used, as when read
    back from the cache."""
    return SeedCases(data, Path("<seed cache>"), lazy=True)


def _validation_marker(root: Path, course_stamp: str | None) -> tuple[Path, str] | None:
    """Where the note that the course at `root`, as it is now, passed validation is kept, and its
    stamp (`course_stamp` when the caller has it: `stamp(root, -1)`)."""
    folder = cache_dir()
    if folder is None:
        return None
    if course_stamp is None:
        try:
            course_stamp = stamp(root, -1)  # no seed: the course itself
        except OSError:
            return None
    return folder / f"{zlib.crc32(course_stamp.encode()):08x}.valid", course_stamp


def validated(root: Path, course_stamp: str | None = None) -> bool:
    """Whether the course at `root` passed validation unchanged since (grader, YAML files, code)."""
    marker = _validation_marker(root, course_stamp)
    if marker is None:
        return False
    try:
        return json.loads(marker[0].read_bytes()).get("stamp") == marker[1]
    except Exception:  # none yet, damaged: validate again
        return False


def mark_validated(root: Path, course_stamp: str | None = None) -> None:
    """Note that the course at `root`, as it is now, passed validation (nothing when there is no cache)."""
    marker = _validation_marker(root, course_stamp)
    if marker is None:
        return
    try:
        write_private(marker[0], json.dumps({"stamp": marker[1]}, separators=(",", ":")))
        found = sorted(marker[0].parent.glob("*.valid"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in found[KEEP:]:  # one note per version of a course: keep as many as seed cache files
            old.unlink(missing_ok=True)
    except OSError:
        pass
