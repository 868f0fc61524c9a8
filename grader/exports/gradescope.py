"""Gradescope: an autograder zip with setup.sh and run_autograder at its root.

The zip holds the autograder bundle (the grader package, the assignment with its hidden cases,
and course.yaml when a course secret is known). setup.sh installs the package into a virtual
environment and makes the source readable by root only; run_autograder grades
$AUTOGRADER_ROOT/submission (default /autograder) with the student's variant taken from
submission_metadata.json and writes results/results.json. As root, student code runs as an
unprivileged user that cannot read the source, the hidden cases or the secret (README,
"Security model").
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..assignment.model import Assignment
from .archive import zip_bytes

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu).
set -euo pipefail
cd /autograder/source
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip
fi
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet --upgrade pip
/autograder/venv/bin/pip install --quiet /autograder/source
# Every case of the default variant prepared now, in the image: each cold grade reads it.
/autograder/venv/bin/mha --exercises /autograder/source/exercises compile
# The source holds the reference, the hidden cases and the course secret: root only.
chmod -R go-rwx /autograder/source
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission. Every outcome leaves a results.json:
# mha writes one itself for scores and for its own failures; this script covers the rest.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
MHA="${MHA_BIN:-$ROOT/venv/bin/mha}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
"$MHA" --exercises "$ROOT/source/exercises" grade "$ROOT/submission" \\
  --format gradescope --output "$RESULTS" --gradescope-metadata "$ROOT/submission_metadata.json"
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


def build(assignment: Assignment, secret: str | None) -> bytes:
    """The autograder zip, byte-identical for the same assignment and secret."""
    from ..classroom.release import write_autograder
    with tempfile.TemporaryDirectory(prefix="mha-gradescope-") as tmp:
        bundle = Path(tmp) / "autograder"
        write_autograder(assignment, bundle, secret)
        files = {str(p.relative_to(bundle)): p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()}
    files["setup.sh"] = SETUP
    files["run_autograder"] = RUN
    return zip_bytes(files, executable=("setup.sh", "run_autograder"))
