"""Linux namespaces for a student process, through the kernel interface (ctypes): no network, no
System V IPC shared with anyone, its own process-id space, and a file system of its own that
holds only the system folders, the Python installation, and its session folder.

Loaded by path from `worker.py` (like `confine.py`), so it imports nothing but the standard
library. Everything here runs as root in the forked student process (or in the zygote, for the
process-id namespace), before the switch to the student's uid; any failure is the grader's.

The file system is built on a fresh tmpfs and entered with pivot_root(2):
- read-only binds of the system folders (SYSTEM) and of the Python installation (the folders
  the zygote imports from), at their own paths; the parents of those paths are tmpfs folders
  anyone may enter, so an installation under a private home folder (/root/.pyenv...) is
  readable here while it is not outside;
- an empty tmpfs over every private folder that lies under one of those binds (the grader
  package, when it is installed in site-packages);
- the session folder (the submission and the student's home), at its own path;
- fresh /tmp, /var/tmp and /dev/shm (mode 1777, in the tmpfs, bounded by its size), a few
  device files (null, zero, full, random, urandom), and a /proc of its own process-id space.
Nothing else exists there: not the course, not the checkout, not classmates' files.
"""
import ctypes
import os
import platform

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "i686": 217, "armv7l": 218}.get(platform.machine())

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare(flags):
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _mount(source, target, fstype, flags, data=None):
    enc = (lambda s: None if s is None else s.encode())
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _bind(source, target, writable=False):
    _mount(source, target, None, MS_BIND)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (0 if writable else MS_RDONLY)
    _mount(None, target, None, flags)


def _makedirs(path, mode=0o755):
    """Folders of the new root, owned by root, that anyone may enter (whatever the umask)."""
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
    _check(_libc.setns(ctypes.c_int(own), ctypes.c_int(CLONE_NEWPID)), "setns")


def new_network():
    """A descriptor of a fresh network namespace (only a loopback interface, down), made by this
    process, which stays in its own. See `join_network`."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        unshare(CLONE_NEWNET)
        try:
            return os.open("/proc/self/ns/net", os.O_RDONLY)
        finally:
            _check(_libc.setns(ctypes.c_int(own), ctypes.c_int(CLONE_NEWNET)), "setns")
    finally:
        os.close(own)


def join_network(fd):
    """Enter the network namespace of descriptor `fd` (as root, before the uid switch).

    Making a network namespace and tearing it down is the dearest part of a jail, so the fork
    server keeps one per student process running at a time and hands it to the next one once
    that process is gone. Nothing of one student can be left there for the next: the process
    that joined it was process 1 of its own process-id space, so when the fork server sees it
    exit, every process that was ever inside has exited and closed its sockets (abstract unix
    socket names included); the loopback interface is down and only root could raise it or
    change anything else in the namespace (a student process has no capabilities); and files,
    System V IPC and mounts live in namespaces made fresh for every process."""
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(CLONE_NEWNET)), "setns")


class Networks:
    """The fork server's network namespaces: each lent to one jailed student process at a time,
    and free again once that process has exited (see `join_network`)."""

    def __init__(self):
        self.free, self.lent = [], {}  # descriptors; pid -> descriptor

    def take(self):
        return self.free.pop() if self.free else new_network()

    def lend(self, pid, fd):
        """`fd` goes to process `pid` (no process: back to the free ones)."""
        if pid > 0:
            self.lent[pid] = fd
        else:
            self.free.append(fd)

    def exited(self, pid):
        if pid in self.lent:
            self.free.append(self.lent.pop(pid))


def confine(mount_point, session, library, hidden, tmp_bytes, network=False):
    """Enter new mount and IPC namespaces (and a new network namespace unless `network`: one was
    joined already, see `join_network`) and a root made of only what the student process needs
    (see the module's docstring). `mount_point`: an empty folder (the new root is mounted on
    it); `session`: the session folder; `library`: the Python installation's folders; `hidden`:
    folders that must stay out of sight; `tmp_bytes`: the size of the tmpfs."""
    if SYS_PIVOT_ROOT is None:
        raise OSError(f"pivot_root: unknown system call number on {platform.machine()}")
    unshare(CLONE_NEWNS | CLONE_NEWIPC | (0 if network else CLONE_NEWNET))
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the machine's mounts
    new = mount_point.rstrip("/")
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={int(tmp_bytes)},nr_inodes=16384")
    bound = []
    for path in SYSTEM:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isdir(path):
            _makedirs(new + path)
            _bind(path, new + path)
            bound.append(path)
    for path in sorted({os.path.normpath(p) for p in library if os.path.isabs(p)}, key=len):
        if os.path.isdir(path) and not _under(path, bound):  # at the path Python knows it by
            _makedirs(new + path)
            _bind(path, new + path)
            bound.append(path)
    for path in {os.path.normpath(p) for p in hidden} | {os.path.realpath(p) for p in hidden}:
        if _under(path, bound) and os.path.isdir(new + path) and not os.path.islink(new + path):
            _mount("tmpfs", new + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0,size=4k")
    _makedirs(new + session)
    _bind(session, new + session, writable=True)
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        _makedirs(new + path)
        os.chmod(new + path, 0o1777)
    for name in DEVICES:
        target = f"{new}/dev/{name}"
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/dev/{name}", target, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    _makedirs(new + "/proc")
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(new + "/.old")
    _check(_libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT), new.encode(), (new + "/.old").encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", ctypes.c_int(MNT_DETACH)), "umount /.old")
    os.rmdir("/.old")


def probe(mount_point, session, library, hidden, tmp_bytes, own_pid_space):
    """Whether a student process can be confined in namespaces here: a throwaway child of the
    zygote does it all (the process-id space, the mounts, the new root) and exits. Returns
    (True, "") or (False, why)."""
    if own_pid_space < 0:
        return False, "/proc/self/ns/pid cannot be opened"
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
            confine(mount_point, session, library, hidden, tmp_bytes)
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


__all__ = ["Networks", "confine", "enter_new_pid_space", "join_network", "leave_pid_space", "new_network",
           "probe", "unshare"]
