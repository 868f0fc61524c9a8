"""pytest in a student's folder: every check of `mha check` as a test of its own.

In a folder `mha init` made (it holds the marker file `.mha`), `pytest` collects one test per
public case of each problem from attention.py (`test_softmax[rows far apart]`) and one per public
quiz item from answers.yaml, so an editor's test panel lists them and `-k`, `--lf`, `-x` and
pytest-xdist work as for any test. The first test that runs grades the submission once, in the
sandbox as `mha check` does, on the problems and items of every test selected; each test then
reports its own case, failing with the words of `mha check` (grader/reports/text.py). Hidden
cases, hidden quiz items and written answers are graded later by `mha grade`: they are no tests here.

Anywhere else (no marker beside the file, as in this project's own checkout) nothing is
collected. The plugin is the `mha` entry point of the `pytest11` group: `-p no:mha` turns it off.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Loaded by every pytest run where the package is installed (this project's suite too): only the
# base layer is imported up front, the grader itself once a student folder is found.
from .errors import GraderError
from .paths import STUDENT_MARKER, SUBMISSION_NAME

if TYPE_CHECKING:
    from .grading.results import GradeResult, ProblemResult
    from .grading.seed_cases import SeedCases

__all__ = ["pytest_collect_file", "CaseItem", "QuizItemTest"]


@dataclass
class _Folder:
    """One student folder in one pytest session: its course's seed cases, and the submission's
    result, filled in by the first test that runs (each pytest-xdist worker grades on its own)."""

    folder: Path
    root: Path
    seed_cases: SeedCases
    result: GradeResult | None = None
    error: GraderError | None = None
    results: dict[str, ProblemResult] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> _Folder:
        """The course `mha check` run in `folder` would use, with the default seed's cases prepared
        (from the seed cache when current)."""
        from .course.seeds import student_seed
        from .errors import SpecError
        from .grading.seed_cache import cached_seed_cases
        from .grading.validation import valid_then
        from .paths import ASSIGNMENT_FILE, locate_course
        root, reason = locate_course(start=folder)
        if not (root / ASSIGNMENT_FILE).is_file():
            raise SpecError(str(root / ASSIGNMENT_FILE), None,
                            f"assignment file not found (folder chosen by {reason}); name the course folder "
                            "(the one holding assignment.yaml) with MHA_COURSE=DIR")
        return cls(folder, root, cached_seed_cases(root, student_seed(None, None), valid_then=valid_then))

    def outcome(self, session: pytest.Session, graded_id: str) -> tuple[GradeResult, ProblemResult]:
        """(the grade result, the ProblemResult of `graded_id`): the first call grades every problem
        and quiz item that a selected test of this folder checks, in one sandbox run."""
        if self.result is None and self.error is None:
            from .grading.grade import grade_seed_cases
            from .sandbox.isolation import private_paths
            wanted = sorted({item.graded_id for item in session.items
                             if isinstance(item, _Check) and item.checks is self})
            try:
                self.result = grade_seed_cases(self.seed_cases, self.folder / SUBMISSION_NAME, include_hidden=False,
                                               problem_ids=wanted or [graded_id], private=private_paths(self.root))
            except GraderError as exc:  # told by every test, as `mha check` tells it once
                self.error = exc
            else:
                self.results = {p.id: p for p in self.result.problems}
        if self.result is None:
            raise _Failed([f"`mha check` could not grade {self.folder}: {self.error}"])
        return self.result, self.results[graded_id]


_FOLDERS = pytest.StashKey[dict[Path, "_Folder | GraderError"]]()


def _checks(config: pytest.Config, folder: Path) -> _Folder:
    """The folder's course and cases, loaded once per session (both of its files share them)."""
    folders = config.stash.setdefault(_FOLDERS, {})
    if folder not in folders:
        try:
            folders[folder] = _Folder.load(folder)
        except GraderError as exc:
            folders[folder] = exc
    found = folders[folder]
    if isinstance(found, GraderError):
        raise _NotCollected(f"{folder}: `mha check` cannot run here: {found}")
    return found


class _NotCollected(Exception):
    """The course behind a student folder cannot be loaded (the message says why)."""


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """attention.py and answers.yaml in a folder `mha init` made; nothing anywhere else."""
    if not (file_path.parent / STUDENT_MARKER).is_file():
        return None
    from .grading.answers import ANSWERS_NAME
    if file_path.name == SUBMISSION_NAME:
        return ProblemsFile.from_parent(parent, path=file_path)
    if file_path.name == ANSWERS_NAME:
        return AnswersFile.from_parent(parent, path=file_path)
    return None


class _StudentFile(pytest.File):
    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, _NotCollected):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)


def _definitions(path: Path) -> dict[str, int]:
    """Each top-level function of attention.py and its line (read, never run); {} if it does not parse."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    return {node.name: node.lineno for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _safe(name: str) -> str:
    """A case's name as part of a test id: "::" would split the id, so it is spaced out."""
    return name.replace("::", ": :")


class ProblemsFile(_StudentFile):
    """attention.py: a test per public case of each problem."""

    def collect(self):
        checks = _checks(self.config, self.path.parent)
        lines = _definitions(self.path)
        for problem, prepared in checks.seed_cases.problems:
            for case in (p.case for p in prepared if not p.case.hidden):
                name = f"test_{problem.id}[{_safe(case.name)}]"
                # the id as a string, which pytest parses as it parses the ids `--lf` stored (with
                # the part in brackets as parameters); built from the name alone, they would differ
                yield CaseItem.from_parent(self, name=name, nodeid=f"{self.nodeid}::{name}", checks=checks,
                                           graded_id=problem.id, case_name=case.name,
                                           line=lines.get(problem.function.name))


class AnswersFile(_StudentFile):
    """answers.yaml: a test per public quiz item that `mha check` scores (not the written ones)."""

    def collect(self):
        from .course.model import QuizKind
        checks = _checks(self.config, self.path.parent)
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for draw in checks.seed_cases.quiz:
            item = draw.item
            if not item.hidden and item.kind is not QuizKind.WRITTEN:
                found = re.search(rf"^{re.escape(item.id)}\s*:", text, re.MULTILINE)
                line = text.count("\n", 0, found.start()) + 1 if found else None
                yield QuizItemTest.from_parent(self, name=item.id, checks=checks, graded_id=item.id, line=line)


class _Failed(Exception):
    """A check that did not pass; its lines are what `mha check` says of it."""

    def __init__(self, lines: list[str]):
        super().__init__(textwrap.dedent("\n".join(lines)))  # the report's indent, without its heading


class _Check(pytest.Item):
    """One check of `mha check`, reported where it is answered (the function's or the item's line)."""

    def __init__(self, *, checks: _Folder, graded_id: str, line: int | None, **kwargs):
        super().__init__(**kwargs)
        self.checks, self.graded_id, self.line = checks, graded_id, line

    def _lines(self, result: GradeResult, problem: ProblemResult) -> list[str] | None:
        """What `mha check` says of this check when it failed; None when it passed."""
        raise NotImplementedError

    def runtest(self) -> None:
        result, problem = self.checks.outcome(self.session, self.graded_id)
        lines = self._lines(result, problem)
        if lines is not None:
            raise _Failed(lines)

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, _Failed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None if self.line is None else self.line - 1, self.name


class CaseItem(_Check):
    """One public case of a problem: fails with the case's lines of `mha check`."""

    def __init__(self, *, case_name: str, **kwargs):
        super().__init__(**kwargs)
        self.case_name = case_name

    def _lines(self, result: GradeResult, problem: ProblemResult) -> list[str] | None:
        from .reports.text import one_case_lines
        case = next(c for c in problem.cases if c.name == self.case_name)
        return None if case.passed else one_case_lines(result, problem, case)


class QuizItemTest(_Check):
    """One public quiz item: fails with its block of `mha check`."""

    def _lines(self, result: GradeResult, problem: ProblemResult) -> list[str] | None:
        from .reports.text import one_case_lines
        return None if problem.passed else one_case_lines(result, problem, problem.cases[0])
