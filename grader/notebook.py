"""`from grader.notebook import check`: what the check cells of an exported notebook call.

A stable public name: notebooks already handed out keep working whatever the package's layout.
The work is done in `grader.grading.notebook_submission`.
"""
from .grading.notebook_submission import check

__all__ = ["check"]
