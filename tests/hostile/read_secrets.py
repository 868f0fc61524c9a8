# Tries to read the reference, the hidden cases (in the course, and as the trees of its files the
# grader keeps in its cache), the solutions and their git history, to import the grader, and to
# write into the grader's folders. Reports what happened as its error.
import importlib.util
import os
import sys

COURSE = "@COURSE@"    # the test's course folder: exercises/, solutions/, .git/
PACKAGE = "@PACKAGE@"  # the installed grader package
KEPT = "@KEPT@"        # the grader's kept trees of the course's files (yamlio.KEPT_FOLDER in its cache)


def _try(label, action):
    try:
        action()
        return f"{label}=OPEN"
    except ImportError:
        return f"{label}=ImportError"
    except (PermissionError, FileNotFoundError):  # unreadable, or not there at all (in namespaces)
        return f"{label}=closed"
    except OSError as exc:
        return f"{label}={type(exc).__name__}"


def _read(path):
    with open(path, "rb") as handle:
        handle.read(1)


def _write(folder):
    with open(os.path.join(folder, TAG + "-planted.py"), "w") as handle:
        handle.write("x = 1\n")


def _import_reference_by_path():
    spec = importlib.util.spec_from_file_location("ref", os.path.join(PACKAGE, "reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _import_grader_without_the_guard():
    kept = list(sys.meta_path)
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "NoGrader"]
    try:
        import grader.course.code  # noqa: F401
    finally:
        sys.meta_path[:] = kept  # the other problem tries the guard itself


def attention_reading(weights, values):
    import grader  # noqa: F401  (refused by the worker's guard)


def count_routing_distributions(*layer):
    probes = [
        _try("reference", lambda: _read(os.path.join(PACKAGE, "reference.py"))),
        _try("package_list", lambda: os.listdir(PACKAGE)),
        _try("problems", lambda: _read(os.path.join(COURSE, "exercises", "problems", "predict_shapes.yaml"))),
        _try("problems_list", lambda: os.listdir(os.path.join(COURSE, "exercises", "problems"))),
        _try("solutions", lambda: _read(os.path.join(COURSE, "solutions", "attention.py"))),
        _try("git", lambda: _read(os.path.join(COURSE, ".git", "HEAD"))),
        _try("kept_trees", lambda: os.listdir(KEPT)),
        _try("write_course", lambda: _write(COURSE)),
        _try("write_exercises", lambda: _write(os.path.join(COURSE, "exercises"))),
        _try("reference_by_path", _import_reference_by_path),
        _try("import_grader", _import_grader_without_the_guard),
    ]
    raise PermissionError("probes: " + " ".join(probes))
