"""`mha release`: the student bundle (nothing secret) and the autograder bundle (everything to grade).

student/     attention.py stubs, answers.yaml template, ASSIGNMENT.md, fixtures/<variant>.json
             (public cases with expected answers precomputed by the reference), and a pruned
             grader package whose `mha check` needs no reference, solutions or hidden cases.
autograder/  the full grader package, the assignment (hidden cases, quiz key) and, when a course
             secret is known, course.yaml (mode 0600) so per-student variants can be graded.
"""
from __future__ import annotations

import fnmatch
import json
import os
import shutil
from pathlib import Path
from typing import Iterable

from ..errors import SubmissionError
from ..grading.fixtures import build
from ..assignment.model import Assignment
from ..paths import PACKAGE, write_atomically
from ..assignment.variants import DEFAULT_SEED, student_seed, student_token

# Grader modules a student bundle never carries: whatever answers (the reference, the wrong
# variants, the quiz's answer functions), reads the hidden cases (the loader), or serves only
# instructors. Everything else (running, comparing, reporting) goes in; a test scans the bundle.
STUDENT_EXCLUDE = ("attention/reference.py", "attention/mistakes.py", "assignment/quiz.py",
                   "assignment/loader.py", "assignment/render.py", "assignment/*.schema.json",
                   "grading/validation.py", "grading/compiled.py", "classroom", "exports",
                   "reports/class_report.py", "cli/commands.py", "cli/batch.py", "cli/export.py",
                   "cli/release.py", "__main__.py",
                   "_assignment")  # the assignment an installed wheel carries (hidden cases, quiz key)
STUDENT_PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "mha-exercises-student"
version = "{version}"
description = "Student bundle: {title}"
requires-python = ">=3.10"
dependencies = ["numpy>=1.23", "pyyaml>=6.0", "click>=8.1"]

[project.scripts]
mha = "grader.cli.launch:student"

[tool.setuptools.packages.find]
include = ["grader*"]
"""
STUDENT_README = """# {title}

Install once (Python >= 3.10), then work in this folder:

```sh
pip install .
mha list                      # problems and quiz items
mha show softmax              # one problem's prompt
mha check                     # check attention.py and answers.yaml (public cases)
mha check --student YOUR_ID   # if your instructor gave you personal numbers
```

Write your code in `attention.py` and your quiz answers in `answers.yaml`; submit both.
`ASSIGNMENT.md` has every prompt in one file.
"""


def read_roster(path: Path) -> list[str]:
    """Student ids: the first comma-separated field of each non-blank, non-# line (a 'student' header is skipped)."""
    ids = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        field = line.split(",")[0].strip()
        if field and not field.startswith("#") and field.lower() not in ("student", "id", "sid"):
            ids.append(field)
    return ids


def _assignment_markdown(fixtures: dict) -> str:
    parts = [f"# {fixtures['title']}\n"]
    parts += [p["text"] for p in fixtures["problems"]]
    for item in (fixtures["quiz"] or {"items": []})["items"]:
        lines = [f"## Quiz: {item['item']['title']} (`{item['item']['id']}`, {item['item']['points']:g} points)",
                 "", item["prompt"].strip(), ""]
        lines += [f"- {c['letter']}) {c['text']}" for c in item["choices"]]
        parts.append("\n".join(lines) + "\n")
    return "\n\n".join(parts)


def _copy_package(out: Path, exclude: Iterable[str] = ()) -> None:
    """Copy the grader package, less caches and the `exclude` patterns (paths inside the package)."""
    exclude = tuple(exclude)

    def ignore(folder: str, names: list[str]) -> set[str]:
        inside = Path(folder).relative_to(PACKAGE)
        return {name for name in names if name == "__pycache__" or name.endswith(".pyc")
                or any(fnmatch.fnmatchcase((inside / name).as_posix(), pattern) for pattern in exclude)}

    shutil.copytree(PACKAGE, out, ignore=ignore)


def write_student(assignment: Assignment, out: Path, roster: list[str], secret: str | None) -> list[str]:
    """The student bundle; returns the fixture files written (default first)."""
    from .. import __version__
    out.mkdir(parents=True)
    _copy_package(out / "grader", STUDENT_EXCLUDE)
    (out / "grader" / "__main__.py").write_text("from .cli.launch import student\n\nstudent()\n")
    default = build(assignment, DEFAULT_SEED, "default")
    written = [_write_json(out / "fixtures" / "default.json", default)]
    for student in roster:
        seed = student_seed(secret, student)
        written.append(_write_json(out / "fixtures" / f"{student_token(student)}.json",
                                   build(assignment, seed, student_token(student))))
    shutil.copyfile(assignment.root / "attention.py", out / "attention.py")
    if (assignment.root / "answers.yaml").is_file():
        shutil.copyfile(assignment.root / "answers.yaml", out / "answers.yaml")
    write_atomically(out / "ASSIGNMENT.md", _assignment_markdown(default))
    write_atomically(out / "README.md", STUDENT_README.format(title=assignment.title))
    write_atomically(out / "pyproject.toml", STUDENT_PYPROJECT.format(version=__version__, title=assignment.title))
    return written


def _write_json(path: Path, data: dict) -> str:
    write_atomically(path, json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    return path.name


def write_autograder(assignment: Assignment, out: Path, secret: str | None) -> None:
    """The autograder bundle: the whole package, the assignment with its hidden cases, the secret."""
    out.mkdir(parents=True)
    _copy_package(out / "grader")
    repo_pyproject = PACKAGE.parent / "pyproject.toml"
    if repo_pyproject.is_file():
        shutil.copyfile(repo_pyproject, out / "pyproject.toml")
    shutil.copyfile(PACKAGE.parent / "README.md", out / "README.md") if (PACKAGE.parent / "README.md").is_file() \
        else (out / "README.md").write_text("# mha-exercises autograder\n")
    exercises = out / "exercises"
    shutil.copytree(assignment.root, exercises,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "course.yaml"))
    if secret:
        config = exercises / "course.yaml"
        config.write_text(f"secret: {json.dumps(secret)}\n")
        os.chmod(config, 0o600)


def release(assignment: Assignment, out: Path, roster: list[str], secret: str | None) -> dict:
    """Write out/student and out/autograder; refuses to overwrite an existing folder."""
    out = Path(out)
    for part in ("student", "autograder"):
        if (out / part).exists():
            raise SubmissionError(f"{out / part} already exists; remove it or choose another --out")
    if roster and not secret:
        raise SubmissionError("a roster needs the course secret (course.yaml 'secret' or MHA_COURSE_SECRET)")
    fixtures = write_student(assignment, out / "student", roster, secret)
    write_autograder(assignment, out / "autograder", secret)
    return {"student": out / "student", "autograder": out / "autograder", "fixtures": fixtures}
