"""Reading a student's files: never through a link, only regular files, never more than a bound.

A submission may come from a zip or a git repository, both of which can hold links, and the
grader may be root: `attention.py` linked to the reference or `answers.yaml` linked to
/etc/shadow must not be read, and a FIFO or /proc/kmsg must not stall the grader. Every file
of a submission is opened by name inside a folder already open (`openat`): a name is one path
component, the last component is opened with O_NOFOLLOW, a sub-folder is entered with
O_NOFOLLOW too, so every file read lies inside the submission folder. A file that is not a
regular file is refused before it is opened (lstat), and checked again once open (fstat).
Everything is read once, into memory; the grader works on those bytes (the sandbox gets a
private copy), never on the student's path again.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from ..paths import kind_of
from ..records import record
from ..sandbox.student_text import one_line

__all__ = ["StudentFile", "open_folder", "read_student_file", "entry_kind", "refusal", "shown_name", "SOURCE_BYTES",
           "PARSE_BYTES"]

SOURCE_BYTES = 1 << 20  # the code of a submission (attention.py, or a notebook's code cells); a solution is a few KiB
# student code the grader itself parses with `ast` (the call graph, a notebook cell): a syntax
# tree takes up to a thousand times its text's size, so only text this short is parsed here
PARSE_BYTES = 64 << 10

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@record
class StudentFile:
    """One file of a submission, as read: its bytes, or why it was not read (or neither: missing)."""

    name: str
    data: bytes | None = None
    problem: str | None = None  # why it was not read: a link, a FIFO, too large...

    @property
    def missing(self) -> bool:
        return self.data is None and self.problem is None

    def text(self) -> str:
        """The bytes as UTF-8 text (undecodable bytes as escapes: the sandbox reports them)."""
        return (self.data or b"").decode("utf-8", "backslashreplace")


def open_folder(path: Path | str, parent: int | None = None, follow: bool = False) -> int:
    """An open folder: `path` inside the open folder `parent` (never through a link), or a folder
    the user named (`follow`: the user's own path, links allowed). Raises OSError."""
    return os.open(path, _FOLDER & ~os.O_NOFOLLOW if follow else _FOLDER, dir_fd=parent)


def entry_kind(folder: int | None, name: str | Path) -> str | None:
    """None for a regular file; 'missing', or 'a link', 'a FIFO'... for anything else (never
    followed). `name` is inside the open folder `folder`, or a path when `folder` is None."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unreadable"
    return None if stat.S_ISREG(mode) else kind_of(mode)


def read_student_file(folder: int, name: str, limit: int) -> StudentFile:
    """The file `name` (one path component) of the open folder `folder`, read whole if it is a
    regular file of at most `limit` bytes; otherwise a StudentFile saying why it was not read."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    shown = shown_name(name)
    kind = entry_kind(folder, name)
    if kind == "missing":
        return StudentFile(name)
    if kind is not None:
        return StudentFile(name, problem=refusal(name, kind))
    try:
        fd = os.open(name, _READ, dir_fd=folder)
    except FileNotFoundError:
        return StudentFile(name)
    except OSError as exc:
        what = "a link" if exc.errno == errno.ELOOP else None
        return StudentFile(name, problem=refusal(name, what) if what else
                           f"{shown} cannot be read ({exc.strerror or exc}): it was not read")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the two looks
            return StudentFile(name, problem=refusal(name, kind_of(info.st_mode)))
        if info.st_size > limit:
            return StudentFile(name, problem=_too_large(name, limit))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return StudentFile(name, problem=f"{shown} cannot be read ({exc.strerror or exc}): it was not read")
    finally:
        os.close(fd)
    if size > limit:
        return StudentFile(name, problem=_too_large(name, limit))
    return StudentFile(name, data=b"".join(chunks))


_PLAIN_NAME = re.compile(r"[\w.-]{1,100}(/[\w.-]{1,100})?", re.ASCII)


def shown_name(name: str) -> str:
    """A file's name as a message shows it: a plain name (letters, digits, `._-`, like attention.py
    or a notebook's usual name) as it is; any other (the student chose it: spaces, line breaks,
    controls) as inert text after the grader's words, so it can neither break a report's line nor
    start one (a forged "PASS softmax [10/10]")."""
    return name if _PLAIN_NAME.fullmatch(name) else f"the file {one_line(name, 255)}"


def refusal(name: str, kind: str) -> str:
    """What the reports say about a file that was not read because of what it is."""
    if kind == "a link":
        return f"{shown_name(name)} is a link: it was not read (submit the file itself)"
    return f"{shown_name(name)} is not a regular file ({kind}): it was not read"


def _too_large(name: str, limit: int) -> str:
    return f"{shown_name(name)} is too large (more than {limit} bytes)"
