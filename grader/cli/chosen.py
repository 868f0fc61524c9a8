"""What a command line chooses, told with `os` alone (the launcher reads it before anything else
loads): an option's values, the packaged course's folder, and whether the IDs chosen are quiz
items only, so that grading them runs no student code."""
from __future__ import annotations

import os

__all__ = ["PROBLEM_OPTION", "option_values", "packaged_course", "quiz_only"]

PROBLEM_OPTION = frozenset({"--problem"})  # grade's: a problem or quiz item to grade (repeatable)
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the grader package's folder


def option_values(argv: list[str], names: frozenset[str]) -> list[str]:
    """The values of the options `names` (each taking one value) in `argv`, written `--name VALUE`
    or `--name=VALUE`, before any `--`."""
    values: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--":
            break
        name, equals, value = arg.partition("=")
        if name in names:
            given = value if equals else next(args, None)
            if given is None:
                break
            values.append(given)
    return values


def packaged_course() -> str:
    """The packaged course's folder, as grader.paths.packaged_course finds it (without its imports)."""
    inside = os.path.join(PACKAGE, "_course")
    return inside if os.path.isfile(os.path.join(inside, "assignment.yaml")) else \
        os.path.join(os.path.dirname(PACKAGE), "exercises")


def quiz_only(course: str | os.PathLike | None, problem_ids) -> bool:
    """Whether grading `problem_ids` of the course folder `course` runs no student code: IDs are
    given, and none of them names a problem file of the course. A problem's ID is its file's name,
    problems/<id>.yaml (the loader refuses any other), so each is a quiz item, or an unknown ID
    (a usage error). False whenever that cannot be told so (no IDs, no course, an ID that is
    not a plain name): the zygote then starts as for any grade."""
    if course is None or not problem_ids or not os.path.isfile(os.path.join(course, "assignment.yaml")):
        return False
    for problem_id in problem_ids:
        if not problem_id or problem_id.startswith(".") or "/" in problem_id or os.sep in problem_id \
                or "\0" in problem_id:
            return False
        if os.path.lexists(os.path.join(course, "problems", f"{problem_id}.yaml")):
            return False
    return True
