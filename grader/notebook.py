"""`from grader.notebook import check`: what the check cells of an exported notebook call.

A stable public name: notebooks already handed out keep working whatever the package's layout.
The work is done in `grader.grading.notebook`.
"""
from .grading.notebook import check

__all__ = ["check"]
