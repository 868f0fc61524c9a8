"""Where a release or an export may write, and writing a folder whole or not at all.

`refuse_reading` refuses an output that the copy would read: the course folder itself, a file
of the course (`course.manifest.course_files`) or a folder holding one (problems/, models/),
and the grader package that the autograder bundle copies. Any other place is fine, a dist/
inside the course folder too: no release or export reads it.

`staged_folder` builds a folder in a temporary folder beside it and renames it into place at
the end: a failure leaves nothing behind, and is one line (`one_line`), never a list of every
file a copy missed.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import InternalError, SubmissionError
from .paths import PACKAGE, umask

__all__ = ["one_line", "refuse_reading", "staged_folder"]


def _absolute(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _reason(path: Path, root: Path, files: list[Path], folders: set[Path], holding: bool = True) -> str | None:
    """Why the copy of the course would read `path` (None: it would not)."""
    if path == root:
        return "is the course folder"
    if holding and _within(root, path):
        return f"holds the course folder {root}"
    if path in files:
        return "is a file of the course"
    folder = next((f for f in sorted(folders) if _within(path, f)), None)
    if folder is not None:
        return f"is in {folder.relative_to(root)}/, which the course reads from"
    package = _absolute(PACKAGE)
    if _within(path, package) or (holding and _within(package, path)):
        return "is in the grader package, which the autograder bundle copies"
    return None


def refuse_reading(course, targets: Iterable[Path], what: str = "--out", into: Path | None = None) -> None:
    """SubmissionError (exit 2) when a path in `targets` is, holds or lies in something the copy of
    `course` reads: the course folder, one of its files or their folders, the grader package.
    `into`: the folder the targets are written into, refused when it is the course folder or lies
    in what the copy reads (it may hold the course: only the targets are written)."""
    from .course.manifest import course_files
    root = _absolute(course.root)
    files = [_absolute(course.root / p) for p in course_files(course)]
    folders = {f.parent for f in files} - {root}
    checks = [(Path(into), False)] if into is not None else []
    for target, holding in checks + [(Path(t), True) for t in targets]:
        reason = _reason(_absolute(target), root, files, folders, holding)
        if reason:
            raise SubmissionError(f"{what} {target} {reason}: choose a folder outside it, or one inside the "
                                  "course folder such as dist/, which no release or export reads")


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line: a failed copy of many files names the first and counts the rest."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        failures = exc.args[0]
        first = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{first[0]}: {first[-1]}".splitlines()[0] + more
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _merge(staged: Path, target: Path) -> None:
    """Move what `staged` holds into the existing folder `target`, folder by folder."""
    for entry in sorted(staged.iterdir()):
        there = target / entry.name
        if entry.is_dir() and not entry.is_symlink() and there.is_dir() and not there.is_symlink():
            _merge(entry, there)
        else:
            os.replace(entry, there)


@contextmanager
def staged_folder(target: Path, merge: bool = False) -> Iterator[Path]:
    """A temporary folder beside `target` to write into; renamed to `target` when the block ends
    well, removed when it fails (the failure re-raised as one InternalError line). With `merge`,
    an existing `target` keeps what it holds and gets the staged files moved in."""
    target = Path(target)
    if target.exists() and not (merge and target.is_dir()):
        raise SubmissionError(f"{target} already exists; remove it or choose another --out")
    parent = target.absolute().parent
    made = [folder for folder in (parent, *parent.parents) if not folder.exists()]  # removed again on failure
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
        os.chmod(staged, 0o777 & ~umask())  # what a folder made with mkdir gets, not mkdtemp's 0700
    except OSError as exc:
        raise InternalError(f"cannot write {target}: {one_line(exc)}") from exc
    moving = False
    try:
        yield staged
        moving = True
        if target.is_dir():
            _merge(staged, target)
        else:
            os.rename(staged, target)
    except (OSError, shutil.Error) as exc:
        left = "" if moving else "; nothing was written"
        raise InternalError(f"cannot write {target}: {one_line(exc)}{left}") from exc
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        for folder in made:  # the folders made for `target`, when it did not come to be
            if target.exists():
                break
            with contextlib.suppress(OSError):
                folder.rmdir()
