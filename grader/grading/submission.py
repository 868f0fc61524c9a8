"""Finding the submission file: a .py file, a folder holding one, or a notebook."""
from __future__ import annotations

from pathlib import Path

from ..errors import SubmissionError
from ..paths import SUBMISSION_NAME
from .notebook import materialize

__all__ = ["resolve_submission"]


def resolve_submission(path: Path) -> Path:
    """SUBMISSION is a .py file, a folder holding attention.py, or a Jupyter notebook (.ipynb),
    whose definitions are extracted to a temporary attention.py (see grader.grading.notebook)."""
    path = Path(path)
    if path.is_dir():
        candidate = path / SUBMISSION_NAME
        notebooks = sorted(path.glob("*.ipynb"))
        if not candidate.is_file() and len(notebooks) == 1:  # e.g. a Gradescope upload of the notebook
            candidate = notebooks[0]
        elif not candidate.is_file():
            more = f" (and {len(notebooks)} notebooks: upload one)" if notebooks else ""
            raise SubmissionError(f"{path}: no {SUBMISSION_NAME} in this folder{more}")
        return resolve_submission(candidate) if candidate.suffix == ".ipynb" else candidate
    if not path.exists():
        raise SubmissionError(f"{path}: no such file or folder")
    if path.suffix == ".ipynb":
        return materialize(path)
    if path.suffix != ".py":
        raise SubmissionError(f"{path}: expected a .py file, a .ipynb notebook or a folder holding "
                              f"{SUBMISSION_NAME} (got {path.suffix or 'no'} extension)")
    return path
