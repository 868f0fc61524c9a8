"""The resource limits of student code, with their defaults (documented in docs/security.md).

Import-light on purpose: the CLI reads the defaults for its help text without loading numpy.
"""
from __future__ import annotations

import math

from ..records import record

__all__ = ["Limits"]


@record
class Limits:
    """Resource limits for student code."""

    problem_seconds: float = 10.0       # all cases of one problem (a problem file's `timeout` wins)
    submission_seconds: float = 120.0   # the whole submission, imports included
    load_seconds: float = 10.0          # importing the submission
    start_seconds: float = 60.0         # the grader starting a student process, before any student code
    memory_bytes: int = 1536 << 20      # address space of each student process
    output_bytes: int = 64 << 10        # stdout/stderr kept for feedback, per stream
    processes: int = 32                 # processes and threads of the student user
    file_bytes: int = 64 << 20          # largest file a student process may write

    def rlimits(self, processes: int) -> str:
        """The worker's resource limits, in the form `worker.py` reads (soft = hard)."""
        cpu = math.ceil(self.submission_seconds) + 5  # a backstop: the wall-clock limits come first
        return f"as={self.memory_bytes},nproc={processes},cpu={cpu},fsize={self.file_bytes},core=0"
