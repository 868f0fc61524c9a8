"""How often a buggy submission's failures carry a named mistake.

    python benchmarks/named_mistakes.py            # every buggy submission of tests/
    python benchmarks/named_mistakes.py -v         # and one line per failing problem

Grades every buggy submission the test suite holds (the catalogue of tests/test_mistakes.py,
the buggy sources of tests/test_diagnosis.py and the `bug_*.py` files of tests/submissions,
each laid over the model answers) on every problem, and sorts each failing problem into:

- **named**: a case carries a named mistake;
- **helper**: no mistake, but the problem is shown right once a failing function of the
  student's own that it calls is replaced by the reference;
- **unnamed**: neither.

Prints the counts and the share named (named / failing problems), and the share of
submissions whose own buggy function is named. Run it on another checkout of the grader by
putting that checkout first on PYTHONPATH: the submissions are read from this one's tests/.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import textwrap
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str):
    """A test module of this checkout, loaded by its path (it imports its package's conftest)."""
    package = "tests"
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(package, HERE / "tests" / "__init__.py",
                                                      submodule_search_locations=[str(HERE / "tests")])
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{name}")


def submissions() -> list[tuple[str, str, str]]:
    """(label, the problem the bug is in, the function source laid over the model answers)."""
    found = []
    mistakes = _load(HERE / "tests" / "test_mistakes.py", "test_mistakes")
    for bug in mistakes.BUGS:
        found.append((bug.mistake, bug.problem, textwrap.dedent(bug.source)))
    # read, not imported: its imports follow the grader it was written for
    tree = ast.parse((HERE / "tests" / "test_diagnosis.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["SQRT_QUERIES"]:
            found.append(("sqrt_queries", "scaled_dot_product_attention", textwrap.dedent(node.value.value)))
    for path in sorted((HERE / "tests" / "submissions").glob("bug_*.py")):
        first = path.read_text().splitlines()[0]  # "# <problem>: what the student did"
        found.append((path.stem, first.lstrip("# ").split(":")[0], path.read_text()))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per failing problem")
    options = parser.parse_args()
    import tempfile

    import grader
    from grader.course.loader import load_course
    from grader.grading.grade import grade
    from grader.grading.prepared import PreparedCases

    exercises = Path(grader.__file__).resolve().parent.parent / "exercises"
    model = (Path(grader.__file__).resolve().parent.parent / "solutions" / "attention.py").read_text()
    course = load_course(exercises)
    cache = PreparedCases()
    counts: Counter[str] = Counter()
    own = Counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "attention.py"
        for label, problem_id, source in submissions():
            path.write_text(model + "\n\n" + source)
            result = grade(course, path, problem_ids=[p.id for p in course.problems], cache=cache)
            for problem in result.problems:
                if problem.score >= problem.max_score:
                    continue
                kind = "named" if problem.mistakes else \
                    "helper" if "passes every case" in problem.message else "unnamed"
                counts[kind] += 1
                if problem.id == problem_id:
                    own[kind] += 1
                if options.verbose:
                    print(f"{label:40} {problem.id:30} {kind:8} {','.join(problem.mistakes) or problem.message[:60]}")
    failing = sum(counts.values())
    total = sum(own.values())
    print(f"grader: {Path(grader.__file__).resolve().parent}")
    print(f"failing problems: {failing}; named {counts['named']}, right once the helper is fixed "
          f"{counts['helper']}, unnamed {counts['unnamed']}; share named {counts['named'] / failing:.1%}")
    print(f"the buggy function's own problem: {total}; named {own['named']} ({own['named'] / total:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
