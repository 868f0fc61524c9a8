"""Errors the grader raises, each carrying the exit code the CLI turns it into."""
from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of every ``mha`` command (documented in README)."""

    OK = 0          # a report was written (whatever the score) / all checks passed
    FAILED = 1      # `check`: some case failed; `grade`: score below --fail-under
    USAGE = 2       # bad command line or unreadable submission path
    INVALID_SPEC = 3  # problem or course YAML is invalid
    INTERNAL = 4    # the grader itself failed


class GraderError(Exception):
    """Base class of every error the grader reports to a user."""

    exit_code: ExitCode = ExitCode.INTERNAL


class SpecError(GraderError, ValueError):
    """A problem, course or answers file is invalid; knows its file and line."""

    exit_code = ExitCode.INVALID_SPEC

    def __init__(self, path: str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class SpecErrors(GraderError, ValueError):
    """Several SpecErrors found in one pass; printed one per line, sorted by file and then line."""

    exit_code = ExitCode.INVALID_SPEC

    def __init__(self, errors: Iterable[SpecError]):
        self.errors = sorted_errors(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def sorted_errors(errors: Iterable[SpecError]) -> list[SpecError]:
    """`errors` by file and then line, an error without a line after those with one in its file
    (found order kept among equals), each told once."""
    unique = list({str(e): e for e in errors}.values())  # dicts keep the first-found order
    return sorted(unique, key=lambda e: (e.path, e.line is None, e.line or 0))


class SubmissionError(GraderError, ValueError):
    """The submission path cannot be used (missing, not Python, no attention.py)."""

    exit_code = ExitCode.USAGE


class ScoresError(GraderError, ValueError):
    """A file of hand scores (`grade-all --written-scores`) is invalid: one `file:line: message` per fault."""

    exit_code = ExitCode.USAGE

    def __init__(self, errors: Iterable[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


class OutputError(GraderError, ValueError):
    """A result cannot go where it was asked to (a link, a FIFO, a device that is not a character device)."""

    exit_code = ExitCode.USAGE


class InternalError(GraderError, RuntimeError):
    """The grader failed for a reason that is not the submission's fault."""

    exit_code = ExitCode.INTERNAL
