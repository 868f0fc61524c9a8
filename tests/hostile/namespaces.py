# What a student process shares with the machine when it runs in namespaces (as root, where the
# kernel allows them): no network (not even an AF_INET socket: the system-call filter), no other
# process in sight, a /tmp of its own, its own System V IPC. Reports what it saw.
import os
import socket


def _probe_network():
    try:
        socket.create_connection(("10.0.0.1", 80), timeout=1).close()
        return "OPEN"
    except OSError as exc:
        return type(exc).__name__


def count_routing_distributions(*layer):
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    python = @PYTHON@  # a virtualenv under /tmp: read-only at its own path
    tmp = [n for n in os.listdir("/tmp") if not n.startswith("mha-run-") and n not in python]
    with open("/proc/sysvipc/shm") as handle:
        segments = len(handle.read().splitlines()) - 1
    with open("/proc/net/dev") as handle:  # the network namespace's interfaces (no socket needed)
        interfaces = ",".join(line.split(":")[0].strip() for line in handle.read().splitlines()[2:])
    raise PermissionError(f"shared: network={_probe_network()} interfaces={interfaces} "
                          f"processes={len(others)} tmp={len(tmp)} shm={segments}")
