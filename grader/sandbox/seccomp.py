"""The system-call filter of a student process (seccomp-BPF with no_new_privs), as container
runtimes install one (Docker's default profile, nsjail, bubblewrap).

Installed by `worker.py` as the last step of a student process's set-up, after the namespaces,
limits and uid switch that need some of the calls it denies, and before any student code runs;
every process student code starts inherits it, and nothing undoes it. It needs no privilege, so
it holds in every mode: as root with namespaces, as root without them, and as a normal user.

Every call is allowed except these, which fail with EPERM (student code sees a PermissionError):
- kernel keyrings (`add_key`, `keyctl`, `request_key`): keys outlive the process, per uid, and a
  key or keyring whose permissions the student changed can outlast the clean-up;
- anonymous and secret memory files (`memfd_create`, `memfd_secret`), System V IPC (shared memory,
  semaphores, message queues) and POSIX message queues: memory held outside the process's
  address-space limit, or kept by the kernel after the process ends;
- sockets of any family but AF_UNIX (`socket`, `socketpair` with another domain): no network,
  no AF_VSOCK (not namespaced), no AF_NETLINK, no IPv6 flow labels shared across a namespace;
- reaching into other processes (`ptrace`, `process_vm_readv`/`writev`, `pidfd_getfd`) and kernel
  facilities that widen the kernel's attack surface (`perf_event_open`, `userfaultfd`, `bpf`,
  `io_uring_*`);
- changing the view of the system (`mount`, `umount2`, `pivot_root`, the new mount API,
  `setns`, `unshare`, and `clone` with any CLONE_NEW* flag): the jail stays as it was built;
- what only an administrator does (`kexec_*`, `init_module`, `finit_module`, `delete_module`,
  `acct`, `swapon`, `swapoff`, `reboot`, `open_by_handle_at`): refused without privilege
  anyway, denied all the same.
`clone3` fails with ENOSYS instead: its flags are behind a pointer the filter cannot read, and
on ENOSYS the C library falls back to `clone`, whose flags the filter checks. Calls made through
another ABI than the process's own (i386's `int 0x80`, x86_64's x32) fail with EPERM: they
would otherwise bypass the table.

Only x86_64 and aarch64 have a table here. On any other system no filter is installed and
`mha doctor` says so (see `status`). Loaded by path from `worker.py`: standard library only.
"""
import ctypes
import errno
import os
import platform
import struct

__all__ = ["DENIED", "install", "status", "supported"]

DENIED = (  # each fails with EPERM (see the docstring for why)
    "add_key", "keyctl", "request_key",
    "memfd_create", "memfd_secret",
    "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl",
    "msgget", "msgsnd", "msgrcv", "msgctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "perf_event_open", "userfaultfd", "bpf", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "setns", "unshare",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "acct", "swapon", "swapoff", "reboot", "open_by_handle_at",
)

# The system-call numbers of each supported ABI (linux/audit.h AUDIT_ARCH_*: the value the kernel
# puts in seccomp_data.arch), in the order of DENIED, then the calls checked by their arguments.
_CHECKED = ("socket", "socketpair", "clone", "clone3", "seccomp")
_TABLES = {
    "x86_64": (0xC000003E, (
        248, 250, 249, 319, 447, 29, 30, 31, 67, 64, 65, 220, 66, 68, 69, 70, 71, 240, 241, 242, 243, 244, 245,
        101, 310, 311, 438, 298, 323, 321, 425, 426, 427, 165, 166, 155, 428, 429, 430, 431, 432, 433, 442,
        308, 272, 246, 320, 175, 313, 176, 163, 167, 168, 169, 304,
        41, 53, 56, 435, 317)),
    "aarch64": (0xC00000B7, (
        217, 219, 218, 279, 447, 194, 196, 195, 197, 190, 193, 192, 191, 186, 189, 188, 187, 180, 181, 182, 183,
        184, 185, 117, 270, 271, 438, 241, 282, 280, 425, 426, 427, 40, 39, 41, 428, 429, 430, 431, 432, 433,
        442, 268, 97, 104, 294, 105, 273, 106, 89, 224, 225, 142, 265,
        198, 199, 220, 435, 277)),
}
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same arch value, numbers with this bit set
AF_UNIX = 1
CLONE_NEW = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC
             | 0x10000000 | 0x20000000 | 0x40000000)             # NEWUSER, NEWPID, NEWNET

# classic BPF (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low half: little-endian)
PR_SET_NO_NEW_PRIVS, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1


def _abi():
    """This process's ABI name ("x86_64", "aarch64"), or None where there is no table for it
    (a 32-bit Python on a 64-bit kernel included), or where it is not little-endian."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in _TABLES or struct.calcsize("P") != 8 or struct.pack("=H", 1) != b"\x01\x00":
        return None
    return machine if os.uname().sysname == "Linux" else None


def supported():
    """Whether a filter can be installed here (Linux on x86_64 or aarch64)."""
    return _abi() is not None


def program(abi):
    """The filter for `abi` as a list of (code, jump if true, jump if false, k), jumps by label.

    Read top to bottom: the ABI check, one comparison per denied number, then the calls
    checked by their arguments; every comparison jumps to one of the returns at the end."""
    arch, numbers = _TABLES[abi]
    nr = dict(zip(DENIED + _CHECKED, numbers))
    code = [(_LD_W_ABS, 0, 0, _ARCH),
            (_JEQ, None, "deny", arch),
            (_LD_W_ABS, 0, 0, _NR)]
    if abi == "x86_64":
        code.append((_JGE, "deny", None, X32_BIT))
    code += [(_JEQ, "deny", None, nr[name]) for name in DENIED]
    code += [(_JEQ, "enosys", None, nr["clone3"]),
             (_JEQ, "socket", None, nr["socket"]),
             (_JEQ, "socket", None, nr["socketpair"]),
             (_JEQ, "clone", None, nr["clone"]),
             (_RET, 0, 0, _RET_ALLOW),
             "socket", (_LD_W_ABS, 0, 0, _ARG0),       # the domain
             (_JEQ, "allow", "deny", AF_UNIX),
             "clone", (_LD_W_ABS, 0, 0, _ARG0),        # the flags (both ABIs: the first argument)
             (_JSET, "deny", "allow", CLONE_NEW),
             "allow", (_RET, 0, 0, _RET_ALLOW),
             "deny", (_RET, 0, 0, _RET_ERRNO | errno.EPERM),
             "enosys", (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    return code


def assemble(code):
    """The bytes of a sock_filter array: labels resolved to forward jumps (None: the next one)."""
    where, count = {}, 0
    for item in code:
        if isinstance(item, str):
            where[item] = count
        else:
            count += 1
    out, i = [], 0
    for item in code:
        if isinstance(item, str):
            continue
        op, jt, jf, k = item

        def jump(target, i=i):
            if target is None or isinstance(target, int):
                return target or 0
            distance = where[target] - i - 1
            if not 0 <= distance <= 255:
                raise ValueError(f"seccomp: jump to {target!r} out of range ({distance})")
            return distance
        out.append(struct.pack("=HBBI", op, jump(jt), jump(jf), k))
        i += 1
    return b"".join(out), count


class _Program(ctypes.Structure):
    """struct sock_fprog: the filter as the kernel takes it."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _prepare():
    """Everything `install` needs, made once when the module loads (in the fork server, before
    any student process is forked, so a child only makes the two calls): (prctl, syscall, the
    seccomp call's number, sock_fprog, its buffer), or None where there is no table."""
    abi = _abi()
    if abi is None:
        return None
    data, count = assemble(program(abi))
    buffer = ctypes.create_string_buffer(data, len(data))
    number = ctypes.c_long(_TABLES[abi][1][len(DENIED) + _CHECKED.index("seccomp")])
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl, libc.syscall, number, _Program(count, ctypes.cast(buffer, ctypes.c_void_p)), buffer


_PREPARED = _prepare()


def install():
    """Set no_new_privs and install the filter on this process (all its threads), for good.
    Returns False, changing nothing, where there is no table for this system or the kernel has
    no seccomp filters; raises OSError if the kernel refuses it otherwise."""
    if _PREPARED is None or _abi() is None:
        return False
    prctl, syscall, number, fprog, _ = _PREPARED
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if syscall(number, ctypes.c_long(SECCOMP_SET_MODE_FILTER), ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC),
               ctypes.byref(fprog)) != 0:
        failure = ctypes.get_errno()
        if failure in (errno.EINVAL, errno.ENOSYS):  # a kernel built without seccomp filters
            return False
        raise OSError(failure, f"seccomp: {os.strerror(failure)}")
    return True


def status():
    """What /proc/self/status says of this process's filter: "filter" when one is in force,
    "none" without, "unknown" where the system does not say."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Seccomp:"):
                    return {b"2": "filter", b"0": "none", b"1": "strict"}.get(line.split()[1], "unknown")
    except (OSError, IndexError):
        pass
    return "unknown"
