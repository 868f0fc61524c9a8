"""Gradescope: an autograder zip with setup.sh and run_autograder at its root.

The zip holds `wheels/` (this grader as a wheel, built from the running package by `wheel.py`,
and its dependencies and pip, pinned to the versions installed here, for one Python version on
Linux x86_64: `wheelhouse.py`), `exercises/` (the course with its hidden cases, and
course.yaml when a course secret is known), setup.sh and run_autograder. setup.sh builds the
image with no network: a virtual environment made without ensurepip, then pip (run from its
wheel) installs everything from `wheels/` with `--no-index`; it stops with a clear message when
the image's python3 is not the version the wheels are for. Both scripts honour
$AUTOGRADER_ROOT (default /autograder). run_autograder grades $AUTOGRADER_ROOT/submission with
the student's seed taken from submission_metadata.json and writes results/results.json, the
hidden cases and hidden quiz items in tests of their own that students see only after the due
date (or never: `hidden`). As
root, student code runs as an unprivileged user that cannot read the source, the hidden cases
or the secret (docs/security.md).
"""
from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..course.model import Course
from .archive import zip_bytes

__all__ = ["HIDDEN_CHOICES", "SETUP", "RUN", "build", "written_rubric"]

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu, x86_64).
# No network: everything installed comes from wheels/ in this zip, for Python {python}.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
PYTHON="${{MHA_PYTHON:-python3}}"
WANT="{python}"
if ! command -v "$PYTHON" >/dev/null; then
  echo "setup.sh: no $PYTHON on this image; this autograder needs Python $WANT (x86_64)" >&2
  exit 1
fi
HAVE=$("$PYTHON" -I -c 'import sys, platform; print("%d.%d %s" % (sys.version_info[0], sys.version_info[1], platform.machine()))')
if [ "$HAVE" != "$WANT x86_64" ]; then
  echo "setup.sh: the wheels in this autograder are for Python $WANT on x86_64, but this image has $HAVE." >&2
  echo "Export it again for the image's Python: mha export gradescope --python ${{HAVE%% *}} --out autograder.zip" >&2
  exit 1
fi
"$PYTHON" -I -m venv --without-pip "$ROOT/venv"
"$ROOT/venv/bin/python" -I "$SOURCE/wheels/{pip}/pip" install --quiet --disable-pip-version-check --no-cache-dir \\
  --no-index --find-links "$SOURCE/wheels" {requirements}
# Every case of the default seed prepared now, in the image: each cold grade reads it.
"$ROOT/venv/bin/mha" --course "$SOURCE/exercises" prepare
# The source holds the reference, the hidden cases and the course secret: root only.
chmod -R go-rwx "$SOURCE"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission. Every outcome leaves a results.json:
# mha writes one itself for scores and for its own failures; this script covers the rest.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
MHA="${MHA_BIN:-$ROOT/venv/bin/mha}"
RESULTS="$ROOT/results/results.json"
METADATA="$ROOT/submission_metadata.json"
mkdir -p "$ROOT/results"
# The metadata holds earlier submissions' results, hidden feedback included: root's alone before any
# student code runs (mha reads it as root; student code runs as another user).
if [ "$(id -u)" = 0 ] && [ -e "$METADATA" ]; then
  chown 0:0 "$METADATA" && chmod 0600 "$METADATA"
fi
"$MHA" --course "$ROOT/source/exercises" grade "$ROOT/submission" \\
  --format gradescope --output "$RESULTS" --gradescope-metadata "$METADATA" \\
  --hidden-visibility HIDDEN_VISIBILITY
status=$?
if [ ! -s "$RESULTS" ]; then
  cat > "$RESULTS" <<'JSON'
{"score": 0, "execution_time": 0, "output": "The autograder could not run; this is not a grade. Please tell your instructor.",
 "output_format": "text", "stdout_visibility": "hidden",
 "tests": [{"name": "autograder failed", "score": 0, "max_score": 0, "status": "failed", "visibility": "visible",
            "output": "mha exited without writing results.json", "output_format": "text"}]}
JSON
fi
exit 0
"""


HIDDEN_CHOICES = ("after_due_date", "hidden")


def build(course: Course, secret: str | None, wheels: Mapping[str, bytes], python: str,
          hidden: str = "after_due_date") -> bytes:
    """The autograder zip, byte-identical for the same course, secret and wheels.

    `wheels`: {file name: bytes} of the dependencies and pip for CPython `python` ("3.11") on
    Linux x86_64 (`wheelhouse.download`); this grader's own wheel is added here. `hidden`: the
    Gradescope visibility of the tests holding hidden cases and hidden quiz items
    (reports/gradescope.py)."""
    if hidden not in HIDDEN_CHOICES:
        raise ValueError(f"hidden must be one of {', '.join(HIDDEN_CHOICES)} (got {hidden!r})")
    from ..classroom.bundles import write_autograder
    from . import wheel
    from .wheelhouse import offline_requirements, pip_wheel
    pip = pip_wheel(wheels)
    with tempfile.TemporaryDirectory(prefix="mha-gradescope-") as tmp:
        bundle = Path(tmp) / "autograder"
        write_autograder(course, bundle, secret)
        exercises = bundle / "exercises"
        files: dict[str, str | bytes] = {str(p.relative_to(bundle)): p.read_bytes()
                                         for p in sorted(exercises.rglob("*")) if p.is_file()}
    own, data = wheel.build(course)
    all_wheels = {**wheels, own: data}
    files.update({f"wheels/{name}": content for name, content in all_wheels.items()})
    requirements = offline_requirements(wheels, own)
    files["setup.sh"] = SETUP.format(python=python, pip=pip, requirements=requirements)
    files["run_autograder"] = RUN.replace("HIDDEN_VISIBILITY", hidden)
    return zip_bytes(files, executable=("setup.sh", "run_autograder"), stored=[f"wheels/{n}" for n in all_wheels])


def written_rubric(course: Course) -> str:
    """Markdown for the instructor: each written item's prompt and rubric, to grade by hand in
    Gradescope (a manually graded question per item); "" when the quiz has none."""
    items = [i for i in course.quiz.items if i.manual] if course.quiz else []
    if not items:
        return ""
    lines = [f"# {course.title}: written answers, graded by hand", "",
             "The autograder records each student's text in the test named after the item, a test with no",
             "score (pending, never a zero) that the autograder total leaves out. In Gradescope, enable manual",
             "grading and add one manually graded question per item below, with its points and rubric: its",
             "points are added to the autograder's.", ""]
    for item in items:
        lines += [f"## {item.id}: {item.title} ({item.points:g} points)", "", item.prompt.strip(), "", "Rubric:", ""]
        lines += [f"- {r.points:g} point{'' if r.points == 1 else 's'}: {r.text}" for r in item.rubric]
        lines.append("")
    return "\n".join(lines)
