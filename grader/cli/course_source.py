"""The installed `mha`'s source of cases: a course folder, loaded as `mha validate` accepts it.

`--course`, `MHA_COURSE`, found from the working folder, or the packaged one; its seed cases are
prepared with the reference and cached (grading/seed_cache.py). The student bundle's `mha` reads
its released seed cases instead (source.py's `BundleSource`) and never ships this module.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InternalError
from ..paths import ASSIGNMENT_FILE, PACKAGE, SUBMISSION_NAME
from .source import ItemRow, Listing, ProblemRow


class CourseSource:
    """A course folder: `--course`, `MHA_COURSE`, found from the working folder, or the packaged one."""

    def __init__(self, course: Path | str | None):
        self._course = course
        self._located: tuple[Path, str] | None = None
        self.gradescope_metadata: Path | None = None  # `mha grade --gradescope-metadata`: whose seed, without --student

    @property
    def located(self) -> tuple[Path, str]:
        """(course folder, why it was chosen): `--course`, `MHA_COURSE`, found from
        the working folder, or the packaged one (grader/paths.py, README "Installing")."""
        if self._located is None:
            from ..paths import locate_course
            self._located = locate_course(self._course)
        return self._located

    @property
    def root(self) -> Path:
        """The course folder; SpecError (exit 3) naming both ways to choose it when it has none."""
        from ..errors import SpecError
        root, reason = self.located
        if not (root / ASSIGNMENT_FILE).is_file():
            raise SpecError(str(root / ASSIGNMENT_FILE), None,
                            f"assignment file not found (folder chosen by {reason}); give the course folder "
                            "(the one holding assignment.yaml) with --course DIR or MHA_COURSE=DIR")
        return root

    @property
    def packaged(self) -> bool:
        """Whether the course is the one packaged with mha (inside the installed package)."""
        return self.located[1] == "packaged"

    def where(self) -> str | None:
        root, reason = self.located
        return f"course: {root} ({reason})"

    def default_submission(self) -> Path:
        """attention.py in the course folder; with the packaged one, in the working folder."""
        return Path(SUBMISSION_NAME) if self.packaged else self.root / SUBMISSION_NAME

    def private(self) -> tuple[Path, ...]:
        from ..sandbox.isolation import private_paths
        return private_paths(self.root)

    def course(self):
        from ..grading.validation import load_valid
        return load_valid(self.root)  # as `mha validate` accepts it: no command uses a course it rejects

    def seed_cases(self, seed: int):
        """The course's cases and quiz items prepared for seed `seed` (seed_cache.py): read from the
        cache when current, else loaded as `mha validate` accepts it, prepared and stored."""
        from ..grading.seed_cache import cached_seed_cases
        from ..grading.validation import valid_then
        return cached_seed_cases(self.root, seed, valid_then=valid_then)

    def cases(self, student: str | None):
        """The seed cases `mha check` grades on: `student`'s, else the default ones."""
        return self.seed_cases(self.seed(student))

    def settings(self):
        """course.yaml and MHA_COURSE_SECRET: the secret and the seed key (course/seeds.py)."""
        from ..course.seeds import course_settings
        return course_settings(self.root, os.environ)

    def secret_place(self) -> str:
        """Where the course secret is set, as an instructor can act on it: never a path inside the
        installed package (the packaged course is read only, and replaced by every upgrade)."""
        from ..course.seeds import SECRET_ENV
        if self.packaged or self.located[0].resolve().is_relative_to(PACKAGE):
            return (f"{SECRET_ENV}, or 'secret' in course.yaml of your own course folder (`mha new course DIR` "
                    "makes one; choose it with --course DIR)")
        return f"{SECRET_ENV} or 'secret' in {self.root / 'course.yaml'}"

    def seed(self, student: str | None) -> int:
        """The seed of `student`: a keyed hash with the course secret (0 without a student).
        Without --student, Gradescope's metadata names the student, when given and the course has a
        secret (without one there are no per-student seeds: everyone gets the default); metadata
        that names no student is then an InternalError, never the default seed."""
        from ..course.seeds import gradescope_student, student_seed
        if student is None and self.gradescope_metadata is not None:
            settings = self.settings()
            if settings.secret:
                student = gradescope_student(self.gradescope_metadata, settings)
                if student is None:  # the default seed would grade this student on someone else's numbers
                    raise InternalError(
                        f"{self.gradescope_metadata}: no student named there (a missing or unreadable file, or "
                        "an empty 'users' list); with a course secret each student is graded on their own "
                        "numbers, so this submission was not graded")
        if student is None:
            return student_seed(None, None)
        return student_seed(self.settings().secret, student)

    def text(self, item: str, student: str | None) -> str:
        """A problem's prompt, signature and public cases, or a quiz item with its choices."""
        from ..course.quiz import render_item
        from ..course.render import render_problem
        from ..grading.grade import check_known
        course = self.course()
        check_known([p.id for p in course.problems] + [i.id for i in (course.quiz.items if course.quiz else ())],
                    (item,))
        seed = self.seed(student)
        problem = course.problem(item)
        return render_problem(problem, seed) if problem is not None else render_item(course.quiz.item(item), seed)

    def listing(self) -> Listing:
        course = self.course()
        items = course.quiz.items if course.quiz else ()
        return Listing(
            course.title,
            tuple(ProblemRow(p.id, p.points, sum(not c.hidden for c in p.cases), sum(c.hidden for c in p.cases),
                             p.title) for p in course.problems),
            course.quiz.title if course.quiz else None,
            tuple(ItemRow(i.id, i.points, i.visibility.value, i.kind.value, i.title) for i in items),
            course.max_score,
            tuple(p.id for p in course.optional) + tuple(i.id for i in (course.quiz.optional if course.quiz else ())))

    def starter_files(self) -> dict[str, str]:
        from ..starter import starter_files
        return starter_files(self.course())
