# Graded in a class (`mha grade-all`): tries to read a classmate's submission and to list the class
# folder and the output folder (other students' results). Reports what it could do.
import os

CLASS = "@CLASS@"  # the class folder: one folder per student
OUT = "@OUT@"      # grade-all's --out folder


def _look(label, action):
    try:
        action()
        return f"{label}=OPEN"
    except OSError:
        return f"{label}=closed"


def _read(path):
    with open(path, "rb") as handle:
        handle.read(1)


def count_routing_distributions(*layer):
    probes = [_look("classmate", lambda: _read(os.path.join(CLASS, "alice", "attention.py"))),
              _look("class", lambda: os.listdir(CLASS)),
              _look("out", lambda: os.listdir(OUT))]
    raise PermissionError("probes: " + " ".join(probes))
