"""A complete correct submission in a modern style grades to full marks through the real `mha`.

tests/submissions/correct_future_float32.py answers every problem with `from __future__ import
annotations`, type hints, float32 arrays, `raise ValueError` instead of `assert`, and ordinary
standard-library imports (logging, pathlib, json) used inside its functions. As root, the student
uid must still import from a Python installation that other users cannot read, else such a file
scores 0. Here it is graded with solutions/answers.yaml, as `mha grade` in a subprocess,
in every mode this machine has: as root with namespaces where they work (default) and without them
(MHA_NAMESPACES=off); not as root, both runs are in mode "same user" and must score the same.
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.sandbox.isolation import NAMESPACES_ENV, Isolation

from .conftest import EXERCISES, ROOT, SOLUTIONS, installation_hidden_from_others, run_as_uid

SUBMISSION = ROOT / "tests" / "submissions" / "correct_future_float32.py"
GRADE_SECONDS = 300


def mha_command() -> list[str]:
    """The installed `mha` script beside this Python (pip install -e puts it there), else the same
    entry point run as a module."""
    script = Path(sys.executable).with_name("mha")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "grader"]


@pytest.mark.parametrize("namespaces", ["default", "off"])
def test_modern_complete_submission_gets_full_marks_through_the_cli(tmp_path, namespaces):
    """Exit 0, every test passed, and the score is the assignment's whole max score (problems and quiz)."""
    folder = tmp_path / "submission"
    folder.mkdir()
    shutil.copyfile(SUBMISSION, folder / "attention.py")
    shutil.copyfile(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
    out = tmp_path / "results.json"
    env = dict(os.environ)
    env.pop(NAMESPACES_ENV, None)
    if namespaces == "off":
        env[NAMESPACES_ENV] = "off"
    done = subprocess.run([*mha_command(), "--course", str(EXERCISES), "grade", str(folder),
                           "--format", "gradescope", "--output", str(out)],
                          capture_output=True, text=True, timeout=GRADE_SECONDS, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    # a written item's test has no status and no score: pending, graded by hand
    failed = [f"{t['name']}: {t['output']}" for t in data["tests"] if t.get("status", "passed") != "passed"]
    assert failed == []
    max_score = load_course(EXERCISES).max_score
    assert data["score"] == sum(t.get("max_score", 0) for t in data["tests"]) == max_score > 0


@pytest.mark.root  # only root grades as another uid; not as root the installation is the grader's own user's
def test_the_installation_is_unreadable_to_others_here():
    """What the full marks above prove as root: a fresh student uid cannot reach the folders that hold
    the standard modules the submission imports (json, logging, pathlib), yet they imported."""
    if not installation_hidden_from_others():
        pytest.skip(f"{sys.base_prefix} is readable by other users here: the grading above proves less")
    folders = [os.path.dirname(module.__file__).encode() for module in (json, logging, pathlib)]
    jail = Isolation()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        readable = [run_as_uid(jail.uid, lambda f=f: 0 if libc.access(f, os.R_OK | os.X_OK) == 0 else 1)
                    for f in folders]
    finally:
        jail.close()
    assert readable == [1, 1, 1]
