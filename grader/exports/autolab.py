"""Autolab: `autograde.tar` and `autograde-Makefile` as Tango runs them, and the assessment's problems.

For each submission Tango copies the tar, the Makefile and the student's file (renamed to the
assessment's handin name, attention.py) into an empty job folder and runs `make` there, offline.
The Makefile unpacks the tar and runs `autograde/grade.sh`, which makes a virtual environment
from the wheels in the tar (this grader and its dependencies, for one Python version on Linux
x86_64, as the Gradescope export carries them), then grades the handin with `--format autolab`:
the text report, then the scores line Tango reads (reports/autolab.py). The handin is one file,
so the coding problems are graded here and the quiz is left to a quiz platform (`mha export qti`
or `moodle`). Tango gives the job no student identity, so everyone is graded on the default
seed: the course secret is never put in. `assessment.yml` lists the problems and their points
for the assessment's configuration.
"""
from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..course.model import Course
from ..errors import SpecError
from .archive import tar_bytes

__all__ = ["HANDIN", "MAKEFILE", "GRADE", "assessment", "build"]

HANDIN = "attention.py"
FOLDER = "autograde"  # what the tar unpacks into, beside the handin

MAKEFILE = f"""# Autolab's Tango runs this as the job's Makefile, in a folder holding autograde.tar and the
# student's {HANDIN}. The last line printed is the result: {{"scores": {{...}}}}.
all:
\t@tar xf autograde.tar
\t@sh {FOLDER}/grade.sh {HANDIN}
"""

GRADE = """#!/bin/sh
# Grades the handin ($1) with this folder's course: a virtual environment from wheels/ (no network),
# then `mha grade --format autolab`, whose last line is the scores. Any failure before that says so
# and prints no scores line, so Autolab records no grade rather than a wrong one.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
HANDIN="$1"
PYTHON="${{MHA_PYTHON:-python3}}"
WANT="{python}"
failed() {{
  echo "The autograder could not run ($1); this is not a grade. Please tell your instructor."
  exit 1
}}
command -v "$PYTHON" >/dev/null 2>&1 || failed "no $PYTHON on this image"
HAVE=$("$PYTHON" -I -c 'import sys, platform; print("%d.%d %s" % (sys.version_info[0], sys.version_info[1], platform.machine()))')
[ "$HAVE" = "$WANT x86_64" ] || failed "the wheels are for Python $WANT on x86_64, this image has $HAVE"
if [ ! -x "$HERE/venv/bin/mha" ]; then
  "$PYTHON" -I -m venv --without-pip "$HERE/venv" || failed "python3 -m venv failed"
  "$HERE/venv/bin/python" -I "$HERE/wheels/{pip}/pip" install --quiet --disable-pip-version-check --no-cache-dir \\
    --no-index --find-links "$HERE/wheels" {requirements} >&2 || failed "installing the grader failed"
fi
"$HERE/venv/bin/mha" --course "$HERE/exercises" grade "$HANDIN" --format autolab {problems}
status=$?
[ "$status" -le 1 ] || failed "mha exited with status $status"
exit 0
"""


def _name(course: Course) -> str:
    """An assessment name Autolab accepts: lower-case letters and digits."""
    return re.sub(r"[^a-z0-9]", "", course.title.lower())[:30] or "mha"


def assessment(course: Course, timeout: int = 300) -> str:
    """The assessment's configuration (Autolab's YAML): handin name, the coding problems with their
    points, the timeout."""
    problems = [(p.id, float(p.points), p.title) for p in course.problems]
    lines = ["---", "general:", f"  name: {_name(course)}", f"  display_name: {_quote(course.title)}",
             f"  handin_filename: {HANDIN}", "  handin_directory: handin", "  max_grace_days: 0",
             "  max_submissions: -1", "  category_name: Assignments", "problems:"]
    for name, points, description in problems:
        lines += [f"- name: {name}", f"  description: {_quote(description)}", f"  max_score: {points:g}",
                  "  optional: false"]
    lines += ["autograder:", f"  autograde_timeout: {timeout}", "  autograde_image: autograding_image",
              "  release_score: true", ""]
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build(course: Course, wheels: Mapping[str, bytes], python: str) -> tuple[bytes, str, str]:
    """(autograde.tar, autograde-Makefile, assessment.yml), the tar byte-identical for the same course
    and wheels. `wheels`: the dependencies and pip for CPython `python` on Linux x86_64
    (`wheelhouse.download`); this grader's own wheel is added here."""
    if not course.problems:
        raise SpecError(str(course.root / "assignment.yaml"), None, "this course has no problems to grade on Autolab")
    from ..classroom.bundles import write_autograder
    from . import wheel
    from .wheelhouse import offline_requirements, pip_wheel
    with tempfile.TemporaryDirectory(prefix="mha-autolab-") as tmp:
        bundle = Path(tmp) / "bundle"
        write_autograder(course, bundle, None)  # no secret: Tango names no student
        exercises = bundle / "exercises"
        files: dict[str, str | bytes] = {f"{FOLDER}/{p.relative_to(bundle)}": p.read_bytes()
                                         for p in sorted(exercises.rglob("*")) if p.is_file()}
    own, data = wheel.build(course)
    files.update({f"{FOLDER}/wheels/{name}": content for name, content in {**wheels, own: data}.items()})
    files[f"{FOLDER}/grade.sh"] = GRADE.format(python=python, pip=pip_wheel(wheels),
                                               requirements=offline_requirements(wheels, own),
                                               problems=" ".join(f"--problem {shlex.quote(p.id)}" for p in course.problems))
    return tar_bytes(files, executable=[f"{FOLDER}/grade.sh"]), MAKEFILE, assessment(course)
