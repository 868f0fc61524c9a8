"""Where things are (the package, the course folder, the cache) and writing result files safely."""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from .errors import OutputError

PACKAGE = Path(__file__).resolve().parent  # the grader package's own folder
SUBMISSION_NAME = "attention.py"
# Written by `mha init` beside the starter files: the folder is a student's, so pytest runs the
# checks of `mha check` there (grader/pytest_plugin.py) and nowhere else.
STUDENT_MARKER = ".mha"
STUDENT_MARKER_TEXT = """\
# Written by `mha init`: this folder holds a student's work. With this file here, `pytest` (and an
# editor's test panel) runs the checks of `mha check`, one test per public case and quiz item.
"""


COURSE_ENV = "MHA_COURSE"
COURSE_ENV_ALIAS = "MHA_EXERCISES"  # its older name, still read (never documented as current)
ASSIGNMENT_FILE = "assignment.yaml"
PACKAGED = "packaged"  # `--course packaged`: the course inside the installed package, whatever is around


def packaged_course() -> Path:
    """The default course that ships with the package: grader/_course in an installed
    wheel (built from exercises/, pyproject.toml), exercises/ beside the package in a checkout."""
    inside = PACKAGE / "_course"
    return inside if (inside / ASSIGNMENT_FILE).is_file() else PACKAGE.parent / "exercises"


def _found_upwards(start: Path) -> Path | None:
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        for candidate in (folder, folder / "exercises"):
            if (candidate / ASSIGNMENT_FILE).is_file():
                return candidate
    return None


def locate_course(option: Path | str | None = None, env=None, start: Path | None = None) -> tuple[Path, str]:
    """The course folder and why it was chosen, by the one precedence README states:
    `--course` (`option`), then $MHA_COURSE, then the working folder or the nearest folder
    above it that holds assignment.yaml or exercises/assignment.yaml, then the packaged one.
    The reason is "--course", "MHA_COURSE", "found from the working folder" or "packaged".

    `option` given as the word "packaged" (the string, not a path such as ./packaged) names the
    packaged course outright: what a platform's script passes in a folder a student fills, where
    a lookup from the working folder would find the student's own exercises/."""
    env = os.environ if env is None else env
    if isinstance(option, str) and option == PACKAGED:
        return packaged_course(), "packaged"
    if option is not None:
        return Path(option), "--course"
    for name in (COURSE_ENV, COURSE_ENV_ALIAS):
        if env.get(name):
            return Path(env[name]), name
    found = _found_upwards(start or Path.cwd())
    if found is not None:
        return found, "found from the working folder"
    return packaged_course(), "packaged"


def umask() -> int:
    """This process's umask, read without changing it (Linux), else by setting it back at once."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_KINDS = ((stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISCHR, "a character device"), (stat.S_ISDIR, "a folder"))


def kind_of(mode: int) -> str:
    """'a link', 'a FIFO'... for a file that is not a regular one."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _standard_stream(target: os.stat_result | None) -> int | None:
    """1 or 2 when `target` is this process's own stdout or stderr (what /dev/stdout names)."""
    for fd in (1, 2):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if target is not None and (info.st_dev, info.st_ino) == (target.st_dev, target.st_ino):
            return fd
    return None


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        view = view[os.write(fd, view):]


def check_output(path: Path) -> int | None:
    """How a result may be written to `path`: None to create or replace it (missing or a regular
    file), a file descriptor number to write in place (1 or 2: this process's stdout or stderr,
    as /dev/stdout names them), -1 for a character device (written in place). Anything else (a
    link elsewhere, a FIFO, a socket, a block device, a folder) raises OutputError: the grader
    never renames over it nor opens it."""
    path = Path(path)
    try:
        here = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISREG(here.st_mode):
        return None
    try:
        target = os.stat(path)  # through links: /dev/stdout -> /proc/self/fd/1 -> a pipe or terminal
    except OSError:
        target = None
    stream = _standard_stream(target)
    if stream is not None:
        return stream
    if target is not None and stat.S_ISCHR(target.st_mode):
        return -1
    raise OutputError(f"{path} is {kind_of(here.st_mode)}: results are written only to a regular file "
                      "(replaced whole) or a character device such as /dev/stdout (written in place)")


def _write_device(path: Path, raw: bytes) -> None:
    """Write into the character device at `path`, checking that the file opened is still one."""
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISCHR(os.fstat(fd).st_mode):
            raise OutputError(f"{path} changed while it was opened: nothing was written")
        os.set_blocking(fd, True)
        _write_all(fd, raw)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: str | bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """Write to a temporary file beside `path`, then rename: never a half-written result.

    The file gets `mode`, by default what the umask allows (0666 & ~umask), like any file a
    tool creates. Only a missing path or a regular file is replaced; a character device (or
    this process's stdout or stderr, as /dev/stdout) is written in place; anything else raises
    OutputError (see check_output). With `durable` the data reaches the disk before the rename (a
    result survives a crash of the machine); without it, as for a cache that is rebuilt when
    damaged, the rename alone makes it atomic for every reader."""
    path = Path(path)
    # a lone surrogate (a student id from a folder name that is not UTF-8, say) is written as an
    # escape: no text makes a result unwritable
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    how = check_output(path)
    if how is not None:
        _write_all(how, raw) if how > 0 else _write_device(path, raw)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask() if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if check_output(path) is not None:  # it became a device or a stream meanwhile: leave it alone
            raise OutputError(f"{path} changed while the result was written: nothing was replaced")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_tree(path: Path) -> bool:
    """Delete the folder `path` and everything in it, however deep, without following links;
    True when it is gone. A student may leave thousands of nested folders: this walks them with
    one open folder at a time (no recursion, no path longer than one name), checks each parent
    it climbs back to, and first makes enterable a folder that refuses entry (its owner may)."""
    path = Path(path)
    try:
        fd = _open_folder(str(path), None)
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.unlink(path)  # a link or a file where the folder was
            return True
        except OSError:
            return False
    chain: list[tuple[os.stat_result, str, list[str]]] = []  # each folder entered: identity, name, sub-folders left
    try:
        chain.append((os.fstat(fd), "", _clear(fd)))
        while True:
            pending = chain[-1][2]
            if not pending:
                pending.extend(_clear(fd))  # made since it was cleared (nothing, once the student's processes are dead)
            if pending:
                child = pending.pop()
                try:
                    sub = _open_folder(child, fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    os.unlink(child, dir_fd=fd)  # it became a link or a file
                    continue
                os.close(fd)
                fd = sub
                chain.append((os.fstat(fd), child, _clear(fd)))
                continue
            if len(chain) == 1:
                break
            parent = os.open("..", _FOLDER, dir_fd=fd)
            expected, info = chain[-2][0], os.fstat(parent)
            os.close(fd)
            fd = parent
            if (info.st_dev, info.st_ino) != (expected.st_dev, expected.st_ino):  # moved meanwhile
                return False
            os.rmdir(chain.pop()[1], dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_folder(name: str, parent: int | None) -> int:
    """Open a folder (never through a link); one that refuses its owner entry is opened up first."""
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent)  # not a link: O_NOFOLLOW got that far
        return os.open(name, _FOLDER, dir_fd=parent)


def _clear(fd: int) -> list[str]:
    """Delete every entry of the open folder `fd` but its sub-folders; their names."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


CACHE_ENV = "MHA_CACHE_DIR"


def cache_dir(env=None) -> Path | None:
    """Where the grader keeps what it computed for later runs (seed_cache.py, isolation.py):
    $MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha-exercises, else ~/.cache/mha-exercises; None when
    this user has no home folder (then nothing is kept). Created with mode 0700 by whoever
    writes there: it may hold hidden cases."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "mha-exercises"
    try:
        return Path.home() / ".cache" / "mha-exercises"
    except (RuntimeError, KeyError):  # no HOME and no password entry (an arbitrary container uid)
        return None


def write_private(path: Path, data: str | bytes) -> None:
    """write_atomically into a cache folder that only this user may enter (made so if needed), mode
    0600; not synced to disk: what is read from there is checked, and rebuilt when damaged."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    write_atomically(path, data, mode=0o600, durable=False)
