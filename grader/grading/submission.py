"""Finding and reading a submission: a .py file, a folder holding one, or a notebook.

Every file is read once, before anything else happens, by `student_files` (no link, a regular
file, a size bound, inside the submission's folder); grading then works on those bytes. A file
that cannot be read costs what it holds (attention.py: the problems; answers.yaml: the quiz),
with a message saying why; only a submission that is not there at all is a usage error.
"""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import SubmissionError
from ..paths import SUBMISSION_NAME
from ..records import record
from .answers import ANSWERS_NAME, MAX_BYTES as ANSWERS_BYTES
from .notebook_submission import MAX_BYTES as NOTEBOOK_BYTES, BrokenCell, notebook_parts
from .student_files import SOURCE_BYTES, StudentFile, entry_kind, open_folder, read_student_file, shown_name

__all__ = ["SOURCE_BYTES", "SubmissionFiles", "read_submission", "read_folder", "read_files"]


@record
class SubmissionFiles:
    """A submission as read: the code to run (a notebook's definitions already extracted) and the
    quiz answers beside it, each as bytes or with the reason it was not read."""

    source: StudentFile
    answers: StudentFile
    label: str  # the submission as named on the command line, for reports
    broken: tuple[BrokenCell, ...] = ()  # a notebook's code cells left out for not being Python

    @property
    def notes(self) -> tuple[str, ...]:
        """What the reports say about files that were not read, and notebook cells left out."""
        return tuple(f.problem for f in (self.source, self.answers) if f.problem) + tuple(b.note() for b in self.broken)

    def not_valid(self, function: str) -> BrokenCell | None:
        """The left-out cell that defines `function`, if it is one (the last, as the kernel would run)."""
        return next((b for b in reversed(self.broken) if function in b.functions), None)


def read_submission(path: Path) -> SubmissionFiles:
    """SUBMISSION is a .py file, a folder holding attention.py, or a Jupyter notebook (.ipynb, or
    a folder holding exactly one and no attention.py), whose definitions are extracted (see
    grader.grading.notebook_submission). The folder named, or holding the file named, is the user's own
    path (links allowed); everything in it is a student file."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        try:
            mode = os.lstat(path).st_mode  # a link to nowhere: refused below as a link
        except OSError:
            raise SubmissionError(f"{path}: no such file or folder") from None
    if stat.S_ISDIR(mode):
        with _folder(path) as folder:
            return read_folder(folder, str(path))
    if path.suffix not in (".py", ".ipynb"):
        raise SubmissionError(f"{path}: expected a .py file, a .ipynb notebook or a folder holding "
                              f"{SUBMISSION_NAME} (got {path.suffix or 'no'} extension)")
    with _folder(path.parent) as folder:
        return read_files(folder, path.name, str(path))


@contextlib.contextmanager
def _folder(path: Path) -> Iterator[int]:
    try:
        fd = open_folder(path, follow=True)
    except OSError as exc:
        raise SubmissionError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        yield fd
    finally:
        os.close(fd)


def read_folder(folder: int, label: str) -> SubmissionFiles:
    """The submission in the open folder `folder`: its attention.py, else its only notebook."""
    if entry_kind(folder, SUBMISSION_NAME) == "missing":
        notebooks = sorted(name for name in os.listdir(folder) if name.endswith(".ipynb"))
        if len(notebooks) == 1:  # e.g. a Gradescope upload of the notebook
            return read_files(folder, notebooks[0], label)
        more = f" (and {len(notebooks)} notebooks: upload one)" if notebooks else ""
        raise SubmissionError(f"{label}: no {SUBMISSION_NAME} in this folder{more}")
    return read_files(folder, SUBMISSION_NAME, label)


def read_files(folder: int, name: str, label: str) -> SubmissionFiles:
    """The code file `name` (.py, or .ipynb whose definitions become the code and whose answer
    cells, if it has any, the answers) and answers.yaml of the open folder `folder`."""
    if not name.endswith(".ipynb"):
        return SubmissionFiles(read_student_file(folder, name, SOURCE_BYTES),
                               read_student_file(folder, ANSWERS_NAME, ANSWERS_BYTES), label)
    notebook = read_student_file(folder, name, NOTEBOOK_BYTES)
    shown = shown_name(name)  # a notebook's file name is the student's: only inert, after the grader's words
    answers = None
    broken: tuple[BrokenCell, ...] = ()
    if notebook.data is None:
        source = StudentFile(SUBMISSION_NAME, problem=notebook.problem or f"{shown} is missing")
    else:
        try:
            code, answers, broken = notebook_parts(notebook.data, shown)
            source = StudentFile(SUBMISSION_NAME, data=code.encode("utf-8"))
        except SubmissionError as exc:  # not a notebook: it costs the problems, the quiz still counts
            source = StudentFile(SUBMISSION_NAME, problem=str(exc))
    if answers is not None and len(answers.encode("utf-8")) > ANSWERS_BYTES:
        return SubmissionFiles(source, StudentFile(ANSWERS_NAME, problem=f"the answer cells of {shown} are too large "
                                                                         f"(more than {ANSWERS_BYTES} bytes)"), label,
                               broken)
    if answers is not None:  # the notebook's own answer cells
        return SubmissionFiles(source, StudentFile(ANSWERS_NAME, data=answers.encode("utf-8")), label, broken)
    return SubmissionFiles(source, read_student_file(folder, ANSWERS_NAME, ANSWERS_BYTES), label, broken)


