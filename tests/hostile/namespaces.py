# What a student process shares with the machine when it runs in namespaces (as root, where the
# kernel allows them): no network, no other process in sight, a /tmp of its own, its own System V
# IPC. Reports what it saw.
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
    interfaces = ",".join(name for _, name in socket.if_nameindex())
    raise PermissionError(f"shared: network={_probe_network()} interfaces={interfaces} "
                          f"processes={len(others)} tmp={len(tmp)} shm={segments}")
