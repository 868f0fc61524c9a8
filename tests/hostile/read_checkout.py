# Looks for complete solutions outside the protected folders: the grader's source checkout (found
# from this process's own command line, and by its path), with its tests/submissions. Reports.
import os

CHECKOUT = "@CHECKOUT@"  # the checkout the grader runs from


def _look(label, path):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read(1)
        return f"{label}=OPEN"
    except OSError:
        return f"{label}=closed"


def count_routing_distributions(*layer):
    with open("/proc/self/cmdline", "rb") as handle:
        words = handle.read().decode(errors="replace").split("\0")
    worker = next((w for w in words if w.endswith("worker.py")), "")
    found = os.path.dirname(os.path.dirname(os.path.dirname(worker))) if worker else CHECKOUT
    probes = [_look("from_cmdline", os.path.join(found, "tests", "submissions")),
              _look("checkout", os.path.join(CHECKOUT, "tests")),  # its own files (a venv inside it may be seen)
              _look("submissions", os.path.join(CHECKOUT, "tests", "submissions", "correct_einsum.py")),
              _look("solutions", os.path.join(CHECKOUT, "solutions", "attention.py"))]
    raise PermissionError("probes: " + " ".join(probes))
