"""What a course is made of: the files a release or an export copies, and nothing else.

A course folder also holds what an instructor keeps beside it: submissions, graded reports,
earlier releases, a solved attention.py, notes. Copying the folder whole would ship them (and
copy an output folder inside it into itself), so every release and export copies the files
`course_files` lists instead: the ones assignment.yaml declares and the ones its code uses.

- assignment.yaml, each problem file it lists and the quiz file it names;
- the course module named by `code:` and the course's Python files it imports, followed
  recursively (`import x`, `from x import y`, `from .x import y`, `from . import x`, a package's
  __init__.py on the way), read with `ast`, never imported;
- the trained models' data, models/*.npz and models/*.json, which the course code reads.

Never listed: course.yaml (the autograder writes its own, with the secret, where one is meant to
go), the instructor's attention.py and answers.yaml (students get stubs made from the course),
and anything else in the folder.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

from ..paths import ASSIGNMENT_FILE, SUBMISSION_NAME
from .model import Course

__all__ = ["MODEL_DATA", "course_files", "imported_files"]

MODEL_DATA = ("models/*.npz", "models/*.json")  # the trained models' weights and their index
_NEVER = {SUBMISSION_NAME, "answers.yaml", "course.yaml"}  # the student files and the secret, at the top


def _module_file(root: Path, parts: list[str]) -> list[Path]:
    """The files of module `parts` under `root` (each package's __init__.py on the way, then the
    module itself); [] when it is not a file of the course."""
    found: list[Path] = []
    folder = root
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if last and (folder / f"{part}.py").is_file():
            return [*found, folder / f"{part}.py"]
        folder = folder / part
        if not (folder / "__init__.py").is_file():
            return []
        found.append(folder / "__init__.py")
    return found


def _imports(path: Path, root: Path) -> set[Path]:
    """The course files that the Python file at `path` imports (anywhere in it, as written)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return set()  # loading the course reports a broken file; the manifest only lists what it can read
    found: set[Path] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(_module_file(root, alias.name.split(".")))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                if not base.is_relative_to(root):
                    continue
            else:
                base = root
            parts = node.module.split(".") if node.module else []
            module = _module_file(base, parts) if parts else []
            found.update(module)
            if parts and not module:
                continue
            for alias in node.names:  # `from . import x` / `from pkg import submodule`
                found.update(_module_file(base, [*parts, alias.name])[len(parts):])
    return {p for p in found if p.resolve().is_relative_to(root.resolve())}


def imported_files(code: Path, root: Path) -> set[Path]:
    """The course module at `code` and every course file it imports, followed recursively."""
    root = Path(root)
    seen: set[Path] = set()
    todo = [Path(code)]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        todo.extend(_imports(path, root) - seen)
    return seen


def course_files(course: Course) -> list[Path]:
    """The files of `course` that a release or an export copies, relative to its folder and sorted."""
    root = Path(course.root)
    files = {root / ASSIGNMENT_FILE}
    files.update(p.path for p in (*course.problems, *course.optional) if p.path is not None)
    if course.quiz is not None and course.quiz.path is not None:
        files.add(Path(course.quiz.path))
    if course.code is not None:
        files.update(imported_files(Path(course.code), root))
    for pattern in MODEL_DATA:
        files.update(p for p in root.glob(pattern) if p.is_file())
    base = Path(os.path.abspath(root))  # as written, links not followed: a linked file stays the course's
    relative = {Path(os.path.abspath(p)).relative_to(base) for p in files}
    return sorted(p for p in relative if not (len(p.parts) == 1 and p.name in _NEVER))
