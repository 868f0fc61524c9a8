"""Linux namespaces for a student process, through the kernel interface (ctypes): no network, no
System V IPC shared with anyone, its own process-id space, and a file system of its own that
holds only the system folders, the Python installation, and its session folder.

Loaded by path from `worker.py` (like `confine.py`), so it imports nothing but the standard
library. Everything here runs as root: in the fork server, in a child of it that builds a
root, or in the forked student process before the switch to the student's uid; any failure
is the grader's.

The student's file system is built once per fork server (`make_root`, kept by `Roots`), on a
tmpfs that becomes the root of a mount namespace of its own and is then made read-only:
- read-only binds of the system folders (SYSTEM) and of the Python installation (the folders
  the fork server imports from), at their own paths; the parents of those paths are tmpfs
  folders anyone may enter, so an installation under a private home folder (/root/.pyenv...)
  is readable there while it is not outside;
- an empty tmpfs over every private folder that lies under one of those binds (the grader
  package, when it is installed in site-packages);
- a few device files (null, zero, full, random, urandom), /var/tmp and /dev/shm leading to
  /tmp, and empty folders for /tmp, /proc and the folder the session folders are made in.
Each student process (`enter`) gets its own copy of that namespace, and in it a fresh /tmp
(mode 1777, a tmpfs bounded in size), its session folder (the submission and this process's
own home, made fresh for it) at its own path, a network namespace never used before, and a
/proc of its own process-id space. Nothing else exists there: not the course, not the
checkout, not classmates' files, not what an earlier student left. (A
Python installation inside /tmp, such as a virtualenv there, waits at /.kept/N in the root and
is put back at its own path over the fresh /tmp.)
"""
import ctypes
import os
import platform

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "i686": 217, "armv7l": 218}.get(platform.machine())
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # Linux 5.2; the same number on every architecture
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH, AT_FDCWD = 1, 0o2000000, 4, -100

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
TMP = ("/tmp", "/var/tmp", "/dev/shm")  # one fresh tmpfs, at /tmp, for all three
KEPT_ROOTS = 4  # roots a fork server keeps (one per folder the session folders are made in...)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    """`result` of a libc call or system call, unless it failed."""
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def unshare(flags):
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _setns(fd, kind):
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(kind)), "setns")


def _mount(source, target, fstype, flags, data=None):
    def enc(s):
        return None if s is None else s.encode()
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _bind(source, target, writable=False):
    _mount(source, target, None, MS_BIND)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (0 if writable else MS_RDONLY)
    _mount(None, target, None, flags)


def _makedirs(path, mode=0o755):
    """Folders owned by root that anyone may enter (whatever the umask)."""
    if os.path.isdir(path):
        return
    _makedirs(os.path.dirname(path), mode)
    os.mkdir(path)
    os.chmod(path, mode)


def _under(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def enter_new_pid_space():
    """In the zygote, before a fork: the next child is process 1 of a fresh process-id space
    (when it exits, the kernel kills every process left in it)."""
    unshare(CLONE_NEWPID)


def leave_pid_space(own):
    """In the zygote, after the fork: later children start in its own process-id space again
    (`own`: a descriptor of /proc/self/ns/pid, opened at start)."""
    _setns(own, CLONE_NEWPID)


def new_network():
    """A descriptor of a fresh network namespace (only a loopback interface, down), made by this
    process, which stays in its own. See `join_network`."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        unshare(CLONE_NEWNET)
        try:
            return os.open("/proc/self/ns/net", os.O_RDONLY)
        finally:
            _setns(own, CLONE_NEWNET)
    finally:
        os.close(own)


def join_network(fd):
    """Enter the network namespace of descriptor `fd` (as root, before the uid switch).

    Every student process gets a network namespace never used before (`Networks`), and its
    descriptor is closed once that process has exited: the process was process 1 of its own
    process-id space, so every process that was ever inside has exited by then, and the kernel
    tears the namespace down. Nothing one student process leaves in a network namespace (IPv6
    flow labels kept for minutes, abstract unix socket names, the state of the loopback
    interface) can reach a later one, of its own session or of a classmate's."""
    _setns(fd, CLONE_NEWNET)


class Networks:
    """The fork server's network namespaces: a fresh one for each jailed student process, made
    ahead while the fork server has nothing else to do (`stock`), closed once that process has
    exited (see `join_network`)."""

    def __init__(self, spare=1):
        self.spare = spare  # namespaces made ahead
        self.free, self.lent = [], {}  # descriptors never lent; pid -> descriptor

    def take(self):
        return self.free.pop() if self.free else new_network()

    def short(self):
        """Whether `stock` has a namespace to make."""
        return len(self.free) < self.spare

    def stock(self):
        """Make one namespace ahead (off the path of a student process's start)."""
        if self.short():
            try:
                self.free.append(new_network())
            except OSError:
                self.spare = 0  # made when a student process needs one, which reports the failure

    def lend(self, pid, fd):
        """`fd` goes to process `pid` (no process: `fd` was never entered, it stays free)."""
        if pid > 0:
            self.lent[pid] = fd
        else:
            self.free.append(fd)

    def exited(self, pid):
        if pid in self.lent:
            os.close(self.lent.pop(pid))


def plan(library, hidden):
    """What a root holds from the machine: (the system folders that are links, the folders bound
    read-only: system folders and the Python installation's at the paths Python knows them by,
    the hidden folders inside those, each covered by an empty one)."""
    links, bound, covers = [], [], []
    for path in SYSTEM:
        if os.path.islink(path):
            links.append(path)
        elif os.path.isdir(path):
            bound.append(path)
    for path in sorted({os.path.normpath(p) for p in library if os.path.isabs(p)}, key=len):
        if os.path.isdir(path) and not _under(path, bound):
            bound.append(path)
    for path in sorted({os.path.normpath(p) for p in hidden} | {os.path.realpath(p) for p in hidden}, key=len):
        if _under(path, bound) and not _under(path, covers) and os.path.isdir(path) and not os.path.islink(path):
            covers.append(path)
    return tuple(links), tuple(bound), tuple(covers)


def _kept(plan, parent):
    """The bound folders that each student process's own /tmp (or the folder its session folder
    is made in) would hide (a virtualenv in /tmp...): (path, where the root keeps it meanwhile)."""
    shadowed = TMP if _under(parent, TMP) else (*TMP, parent)
    return tuple((path, f"/.kept/{i}") for i, path in enumerate(p for p in plan[1] if _under(p, shadowed)))


def _build(new, plan, parent):
    """Fill the tmpfs mounted on `new` with the student's root (see the module's docstring)."""
    links, bound, covers = plan
    where = dict(_kept(plan, parent))
    for path in links:
        os.symlink(os.readlink(path), new + path)
    for path in bound:
        _makedirs(new + where.get(path, path))
        _bind(path, new + where.get(path, path))
    for path in covers:
        top = next(b for b in bound if _under(path, [b]))
        at = new + where.get(top, top) + path[len(top):]
        _mount("tmpfs", at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0,size=4k")
    for path in ("/tmp", "/proc", "/dev", "/var") + (() if _under(parent, TMP) else (parent,)):
        _makedirs(new + path)
    for path in TMP[1:]:
        os.symlink("/tmp", new + path)
    for name in DEVICES:
        target = f"{new}/dev/{name}"
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/dev/{name}", target, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")


def make_root(session, plan):
    """A descriptor of a new mount namespace whose root is the student's file system, read-only
    (see the module's docstring), holding what `plan` says, for session folders made where
    `session` is. Built by a child of the calling process (whose own namespace stays as it is)
    on an empty folder made in `session` for the time it takes; the child waits until the
    namespace is held here, then exits."""
    parent = os.path.dirname(session)
    if SYS_PIVOT_ROOT is None:
        raise OSError(f"pivot_root: unknown system call number on {platform.machine()}")
    if parent == "/":
        raise OSError("session folders made in / cannot be given their own file system")
    mount_point = os.path.join(session, ".root")
    os.mkdir(mount_point, 0o700)
    said, done = os.pipe()
    hold, held = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(said)
            os.close(held)
            unshare(CLONE_NEWNS)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the machine's mounts
            new = mount_point
            _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
            _build(new, plan, parent)
            os.mkdir(new + "/.old")
            _check(_libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT), new.encode(), (new + "/.old").encode()),
                   "pivot_root")
            os.chdir("/")
            _check(_libc.umount2(b"/.old", ctypes.c_int(MNT_DETACH)), "umount /.old")
            os.rmdir("/.old")
            _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.write(done, b"built")
            os.read(hold, 1)  # until the namespace is held (or the caller is gone)
            os._exit(0)
        except BaseException as exc:
            os.write(done, str(exc).encode()[:500])
        os._exit(1)
    os.close(done)
    os.close(hold)
    try:
        message = os.read(said, 512)
        if message != b"built":
            raise OSError(message.decode("utf-8", "replace") or "the process building the root died")
        return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    finally:
        os.close(said)
        os.close(held)
        os.waitpid(pid, 0)
        try:
            os.rmdir(mount_point)  # a mount point only in the child's namespace: free here
        except OSError:
            pass  # deleted with the session folder


class Roots:
    """The fork server's read-only roots (`make_root`), one per folder the session folders are
    made in and `plan`; the last few are kept. Each as `enter` takes it: (the descriptor of its
    mount namespace, the folders it keeps aside, see `_kept`)."""

    def __init__(self, library):
        self.library, self.made = library, {}

    def get(self, session, hidden):
        """The root for the session folder `session` and the folders `hidden`."""
        key = (os.path.dirname(session), plan(self.library, hidden))
        if key not in self.made:
            if len(self.made) >= KEPT_ROOTS:
                os.close(self.made.pop(next(iter(self.made)))[0])
            self.made[key] = (make_root(session, key[1]), _kept(key[1], key[0]))
        return self.made[key]


def enter(root, session, tmp_bytes):
    """In the student process (as root, in its own process-id space): move into a copy of the
    root `root` (from `Roots`) with a fresh IPC namespace, a fresh /tmp of `tmp_bytes`, the
    session folder `session` (writable, at its own path) and /proc."""
    root, kept = root
    tree = _check(_libc.syscall(ctypes.c_long(SYS_OPEN_TREE), ctypes.c_int(AT_FDCWD), session.encode(),
                                ctypes.c_uint(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)), "open_tree")
    try:
        _setns(root, CLONE_NEWNS)
        unshare(CLONE_NEWNS | CLONE_NEWIPC)  # a copy: nothing done below reaches the root or a classmate
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(tmp_bytes)},nr_inodes=16384")
        parent = os.path.dirname(session)
        if not _under(parent, TMP):
            _mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=64")
        for path, where in kept:  # back at their own paths, read-only, covers included
            _makedirs(path)
            _mount(where, path, None, MS_BIND | MS_REC)
        _makedirs(session)
        _check(_libc.syscall(ctypes.c_long(SYS_MOVE_MOUNT), ctypes.c_int(tree), b"", ctypes.c_int(AT_FDCWD),
                             session.encode(), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)), "move_mount")
        _mount(None, session, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    finally:
        os.close(tree)


def probe(roots, session, hidden, tmp_bytes, own_pid_space):
    """Whether a student process can be confined in namespaces here: the root is built (kept in
    `roots`) and a throwaway child of the zygote enters it all (a process-id space, a network
    namespace of its own, a copy of the root) and exits. Returns (True, "") or (False, why)."""
    if own_pid_space < 0:
        return False, "/proc/self/ns/pid cannot be opened"
    try:
        root = roots.get(session, hidden)
        network = new_network()
    except OSError as exc:
        return False, str(exc)
    try:
        return _probe(root, network, session, tmp_bytes, own_pid_space)
    finally:
        os.close(network)  # its child has exited (or was never made)


def _probe(root, network, session, tmp_bytes, own_pid_space):
    try:
        enter_new_pid_space()
    except OSError as exc:
        return False, str(exc)
    read, write = os.pipe()
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            leave_pid_space(own_pid_space)
    if pid == 0:
        try:
            os.close(read)
            join_network(network)
            enter(root, session, tmp_bytes)
            os._exit(0)
        except BaseException as exc:
            os.write(write, str(exc).encode()[:500])
        os._exit(1)
    os.close(write)
    said = b""
    while True:
        chunk = os.read(read, 512)
        if not chunk:
            break
        said += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if status == 0:
        return True, ""
    return False, said.decode("utf-8", "replace") or f"the test process ended with status {status}"


__all__ = ["Networks", "Roots", "enter", "enter_new_pid_space", "join_network", "leave_pid_space", "make_root",
           "new_network", "plan", "probe", "unshare"]
