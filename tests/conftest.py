"""Shared fixtures: the repository's assignment, a CLI runner, and submission writers."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.loader import load_assignment

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs external tools (a Jupyter kernel, otter); still in the default run")


@pytest.fixture(scope="session")
def assignment():
    return load_assignment(EXERCISES)


@pytest.fixture
def cli():
    """Invoke `mha ...` in-process; returns the click Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, ["--exercises", str(EXERCISES), *args], catch_exceptions=False)

    return invoke


@pytest.fixture
def write_submission(tmp_path):
    """Write a submission file from source text; returns its path."""
    def write(source: str, name: str = "attention.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return path
    return write


def solution_source() -> str:
    return (SOLUTIONS / "attention.py").read_text()
