"""The trained models as a student loads them: `grader.trained.load_model` run in the student's folder.

Every export that gives students work ships the course's models/*.npz (never models/index.json,
which records each head's role and answers quiz items, nor models/pool.json, the course's runs of
the seeds students train); `load_model` looks in ./models first.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import EXERCISES

PROBE = ("import grader, grader.trained as t; m = t.load_model('d8_h2_s0'); "
         "print(grader.__file__); print(t.models_folder()); print(m.num_heads, m.d_model)")


def load_in(folder: Path, python: Path | str = sys.executable) -> tuple[Path, Path, str]:
    """(the grader package imported, the models folder used, "heads d_model") of `load_model("d8_h2_s0")`
    run by `python` with `folder` as the working folder, as a student's script or notebook runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MHA_COURSE")}
    done = subprocess.run([str(python), "-c", PROBE], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    package, models, shape = done.stdout.splitlines()
    return Path(package), Path(models), shape


def assert_models_shipped(folder: Path) -> None:
    """`folder`/models holds every .npz of the course, byte for byte, and nothing else; the models'
    index.json and pool.json are in no file of `folder`."""
    course = {p.name: p.read_bytes() for p in (EXERCISES / "models").glob("*.npz")}
    shipped = {p.name: p.read_bytes() for p in (folder / "models").iterdir()}
    assert course and shipped == course
    keys = {(EXERCISES / "models" / name).read_bytes() for name in ("index.json", "pool.json")}
    assert not [p for p in folder.rglob("*") if p.is_file() and p.read_bytes() in keys]
