"""Where `mha`'s student commands (check, show, init, list) take their cases from.

The installed `mha` reads a course folder (course_source.py's `CourseSource`): it loads the
course, prepares a seed's cases with the reference and caches them. The student bundle's `mha`
reads the seed cases its instructor's `mha release` prepared and installed with it
(`BundleSource`, here): no reference, no bugs, no hidden cases and no quiz answer key. Both give
the same few things (`Source`), which the commands (student_commands.py) use the same way; each
source is the click context object of its command line. The student bundle ships this module,
never course_source.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..errors import SubmissionError
from ..paths import PACKAGE, SUBMISSION_NAME
from ..records import record

STUDENT_ENV = "MHA_STUDENT"  # the student's id, as --student


@record
class ProblemRow:
    """A problem as `mha list` shows it."""

    id: str
    points: float
    public: int
    hidden: int | None  # None: not known (a student bundle from before it was recorded)
    title: str


@record
class ItemRow:
    """A quiz item as `mha list` shows it."""

    id: str
    points: float
    visibility: str
    kind: str
    title: str


@record
class Listing:
    """What `mha list` shows: the problems and quiz items with their points."""

    title: str
    problems: tuple[ProblemRow, ...]
    quiz_title: str | None
    items: tuple[ItemRow, ...]
    total: float  # the automatic points (written items are graded by hand)
    optional: tuple[str, ...] = ()  # problem and quiz item ids the course switches off (a course folder's)


class Source(Protocol):
    """What the student commands need from where the cases come from."""

    def where(self) -> str | None:
        """Which course, and why (`mha list` says it on stderr), or None."""

    def cases(self, student: str | None):
        """The seed cases `mha check` grades on: `student`'s, else the default ones."""

    def default_submission(self) -> Path:
        """The attention.py `mha check` grades without --path."""

    def private(self) -> tuple[Path, ...]:
        """Folders student code must not read."""

    def text(self, item: str, student: str | None) -> str:
        """What `mha show ITEM` prints; SubmissionError for an unknown id."""

    def listing(self) -> Listing:
        """What `mha list` shows."""

    def starter_files(self) -> dict[str, str]:
        """What `mha init` writes: {file name: text}."""


def missing_submission(path: Path) -> SubmissionError:
    """What to do when there is no attention.py: `mha init` writes one."""
    where = path.parent if str(path.parent) not in ("", ".") else Path.cwd()
    return SubmissionError(f"no {path.name} in {where}: run `mha init` to write your starter files there "
                           "(then `mha check`), or give your file with --path FILE")


class BundleSource:
    """The student bundle: the seed cases `mha release` prepared, in its grader package's
    _seed_cases/ (installed with it, so found from any folder); index.json says whether every
    student has their own numbers and which id names them."""

    def __init__(self, package: Path = PACKAGE):
        from ..grading.seed_cases import BUNDLE_FOLDER
        self.folder = package / BUNDLE_FOLDER

    def where(self) -> str | None:
        return None

    def _index(self) -> dict:
        import json

        from ..grading.seed_cases import INDEX
        try:
            data = json.loads((self.folder / INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def cases(self, student: str | None, own_numbers: bool = True):
        """The seed cases of `student` (the default numbers without one). `own_numbers`: when every
        student has their own numbers, a command that shows or checks them needs the id."""
        from ..course.seeds import student_token
        from ..grading.seed_cases import SeedCases
        student = student if student and student.strip() else None
        index = self._index()
        key = index.get("seed_key") or index.get("variant_key") or "id"  # variant_key: the key's older name
        if student is None and index.get("personal") and own_numbers:
            raise SubmissionError(f"every student has their own numbers in this assignment: add --student "
                                  f"YOUR_{key.upper()} (your {key}, as your instructor has it), or set {STUDENT_ENV}")
        path = self.folder / f"{'default' if student is None else student_token(student)}.json"
        if not path.is_file():
            if student is None:
                raise SubmissionError(f"{path} is missing: this grader package was not installed from a student "
                                      "bundle (`pip install .` in the folder your instructor gave you)")
            raise SubmissionError(f"no numbers for {key} {student!r} in this bundle: check the spelling, "
                                  "or ask your instructor")
        return SeedCases.load(path)

    def default_submission(self) -> Path:
        """attention.py in the working folder, as for the installed `mha` with the packaged course."""
        return Path(SUBMISSION_NAME)

    def private(self) -> tuple[Path, ...]:
        from ..sandbox.isolation import private_paths
        return private_paths(self.folder)

    def text(self, item: str, student: str | None) -> str:
        from ..grading.grade import check_known
        from ..starter import item_text
        seed_cases = self.cases(student)
        check_known([p.id for p, _ in seed_cases.problems] + list(seed_cases.quiz_ids), (item,))
        if item in seed_cases.texts:
            return seed_cases.texts[item]
        return item_text(next(v for v in seed_cases.quiz if v.item.id == item))

    def listing(self) -> Listing:
        seed_cases = self.cases(None, own_numbers=False)  # titles and points: the same for everyone
        return Listing(
            seed_cases.title,
            tuple(ProblemRow(p.id, p.points, len(prepared), seed_cases.hidden_cases.get(p.id), p.title)
                  for p, prepared in seed_cases.problems),
            seed_cases.quiz_title,
            tuple(ItemRow(v.item.id, v.item.points, v.item.visibility.value, v.item.kind.value, v.item.title)
                  for v in seed_cases.quiz),
            float(sum(p.points for p, _ in seed_cases.problems)
                  + sum(v.item.points for v in seed_cases.quiz if not v.item.manual)))

    def starter_files(self) -> dict[str, str]:
        """The starter files `mha release` made from the course (index.json); for a bundle that
        predates them, made again from the seed cases (without the instructor's docstrings)."""
        from types import SimpleNamespace

        from ..starter import starter_files
        kept = self._index().get("starter")  # [[file name, text], ...] in the order they are written
        try:
            files = {name: text for name, text in kept} if isinstance(kept, list) else {}
        except (TypeError, ValueError):
            files = {}
        if files and set(files) <= {SUBMISSION_NAME, "answers.yaml"} and all(isinstance(t, str) for t in files.values()):
            return files
        seed_cases = self.cases(None, own_numbers=False)
        course = SimpleNamespace(title=seed_cases.title, problems=[p for p, _ in seed_cases.problems], root=None)
        return starter_files(course, seed_cases.quiz_title, [v.item for v in seed_cases.quiz])
