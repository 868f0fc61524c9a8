"""`mha release`: the student bundle (nothing secret) and the autograder bundle (everything to grade).

student/     attention.py stubs, answers.yaml template, ASSIGNMENT.md, and the grader modules
             listed in STUDENT_MODULES (an allow-list), whose `mha check` needs no reference,
             solutions or hidden cases, with its seed cases in grader/_seed_cases/<seed>.json
             (public cases with expected answers precomputed by the reference, but a withheld
             case, whose value the grader never shows, with the form of its answer only;
             installed with the package, so `mha` finds them from any folder); models/, the
             course's trained model files (*.npz) if it has any. docs/instructors.md lists it
             file by file.
autograder/  the full grader package, the course's own files (`course.manifest.course_files`:
             what assignment.yaml declares and its code uses, hidden cases and quiz key
             included, never the rest of the folder) and, when a course secret is known,
             course.yaml (mode 0600) so per-student seeds can be graded.

With a course secret every student is graded on their own numbers, so a release then needs the
roster: one seed cases file per student (`mha check --student ID` picks it, and refuses to check
without an id); a bundle with only the default numbers would have students answer numbers that
grading does not use.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from ..course.model import Course
from ..course.seeds import (
    DEFAULT_KEY,
    DEFAULT_SEED,
    course_settings,
    normalize_student,
    student_seed,
    student_token,
)
from ..errors import SubmissionError
from ..grading.seed_cases import BUNDLE_FOLDER, INDEX, build
from ..paths import PACKAGE, write_atomically

# The grader modules a student bundle carries, and nothing else: what the student `mha`
# (cli/launch.py's `student`, with cli/chosen.py: cli/student_commands.py over cli/source.py) imports to check, show,
# list and init from the precomputed seed cases, the sandbox's worker with the siblings it loads by path (confine, jail,
# seccomp), `grader.notebook` (what an exported notebook's check cells call),
# `grader.distribution` (`grader.__version__`) and `grader.trained` (loads the course's model
# files) and `grader.training` (`mha train`: the course's trainer, run on a student's seed).
# A module not listed here is never shipped: the
# course's code (reference, bugs, detectors, quiz answers), the loader of hidden cases,
# and whatever serves only instructors. tests/test_student_bundle.py checks the list.
STUDENT_MODULES = (
    "__init__.py", "distribution.py", "errors.py", "notebook.py", "paths.py", "records.py", "starter.py", "trained.py",
    "training.py",
    "course/__init__.py", "course/model.py", "course/seeds.py", "course/yamlio.py",
    "course/functions.py", "grading/head_pattern.py",
    "cli/__init__.py", "cli/base.py", "cli/chosen.py", "cli/launch.py", "cli/source.py", "cli/student_commands.py",
    "grading/__init__.py", "grading/answers.py", "grading/cascade.py", "grading/checks.py", "grading/diagnosis.py",
    "grading/seed_cases.py", "grading/grade.py", "grading/grids.py", "grading/notebook_submission.py", "grading/prepared.py",
    "grading/results.py",
    "grading/scoring.py", "grading/student_files.py", "grading/submission.py",
    "reports/__init__.py", "reports/html.py", "reports/terminal.py", "reports/text.py",
    "sandbox/__init__.py", "sandbox/codec.py", "sandbox/confine.py", "sandbox/isolation.py", "sandbox/jail.py",
    "sandbox/limits.py", "sandbox/proctable.py", "sandbox/runs.py", "sandbox/seccomp.py", "sandbox/session.py",
    "sandbox/spawn.py", "sandbox/student_text.py", "sandbox/sweep.py", "sandbox/worker.py", "sandbox/zygote_start.py",
)
STUDENT_PYPROJECT = """[build-system]
requires = ["{build_requires}"]
build-backend = "setuptools.build_meta"

[project]
name = "{distribution}"
version = "{version}"
description = "Student bundle: {title}"
requires-python = "{python}"
dependencies = [{dependencies}]

[project.scripts]
mha = "grader.cli.launch:student"

[tool.setuptools.packages.find]
include = ["grader*"]

[tool.setuptools.package-data]
grader = ["{seed_cases}/*.json"]
"""
STUDENT_README = """# {title}

Install once (Python >= 3.10), then work in this folder:

```sh
pip install .
{commands}
```
{personal}
Write your code in `attention.py` and your quiz answers in `answers.yaml`; submit both.
`ASSIGNMENT.md` has every prompt in one file{numbers}. `mha check` checks the `attention.py` of
the folder you run it in (or `--path FILE`) and the `answers.yaml` beside it.
"""
PERSONAL_README = """
Every student has their own numbers and their own order of each quiz item's choices, and you
are graded on yours: answer with the letters that `mha show ITEM --student` gives you. Give your
{key} (as your instructor has it) to every command, or set it once in `MHA_STUDENT`:

```sh
mha show {example} --student YOUR_{KEY}
mha check --student YOUR_{KEY}          # or: export MHA_STUDENT=YOUR_{KEY}; mha check
```
"""
PERSONAL_MARKDOWN = ("> Every student has their own numbers and their own order of the choices: the numbers "
                     "and letters below are an example. `mha show ITEM --student YOUR_{KEY}` shows yours.\n\n")


_LOOKS_LIKE = {"email": re.compile(r"^[^@\s,;]+@[^@\s,;]+\.[^@\s,;]+$"),
               "sid": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")}


def _roster_error(path: Path, line: int, message: str) -> SubmissionError:
    return SubmissionError(f"{path}:{line}: {message}")


def read_roster(path: Path, key: str = DEFAULT_KEY) -> list[str]:
    """Student ids (of the course's seed_key: email or sid), checked: either a CSV whose header
    names the `key` column (a Gradescope roster export), or one id per line, each looking like
    one. Blank and # lines are skipped. An empty id, an id that does not look like one, and an id
    listed twice (or two ids that become one, as Ann@x.edu and ann@x.edu) are refused
    (SubmissionError naming the line)."""
    import csv
    looks = _LOOKS_LIKE.get(key, _LOOKS_LIKE["sid"])
    rows = [(number, row) for number, line in enumerate(Path(path).read_text(encoding="utf-8-sig").splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") for row in csv.reader([line])]
    if not rows:
        raise SubmissionError(f"{path}: the roster lists no student")
    number, first = rows[0]
    header = [cell.strip().lower() for cell in first]
    if key in header:
        column, rows = header.index(key), rows[1:]
    elif len(first) == 1 and looks.match(first[0].strip()):
        column = 0
    else:
        raise _roster_error(path, number, f"the header names no {key!r} column (got {','.join(first)!r}): "
                            f"name the column of each student's {key}, or list one {key} per line")
    ids: list[str] = []
    seen: dict[str, tuple[str, int]] = {}
    for number, row in rows:
        if column == 0 and len(rows[0][1]) == 1 and len(row) != 1 and key not in header:
            raise _roster_error(path, number, f"expected one {key} per line (got {','.join(row)!r})")
        student = row[column].strip() if len(row) > column else ""
        if not student:
            raise _roster_error(path, number, f"no {key} on this line")
        if not looks.match(student):
            raise _roster_error(path, number, f"{student!r} does not look like a{'n' if key == 'email' else ''} {key}")
        same = seen.get(normalize_student(student))
        if same is not None:
            twice = "is listed twice" if same[0] == student else f"and {same[0]!r} become one id"
            raise _roster_error(path, number, f"{student!r} {twice} (line {same[1]})")
        seen[normalize_student(student)] = (student, number)
        ids.append(student)
    if not ids:
        raise SubmissionError(f"{path}: the roster lists no student")
    return ids


def _commands(rows: list[tuple[str, str]]) -> str:
    """Shell lines with their comments lined up."""
    width = max(len(command) for command, _ in rows) + 2
    return "\n".join(f"{command:<{width}}# {comment}" for command, comment in rows)


def student_readme(course: Course, personal: bool, seed_key: str = DEFAULT_KEY) -> str:
    """The student bundle's README.md; its examples name the course's own first problem and quiz item."""
    problem = course.problems[0].id
    items = list(course.quiz.items) if course.quiz else []
    # the personal example: an item whose numbers are the student's own, when the quiz has one
    item = next((i.id for i in items if i.params), items[0].id if items else problem)
    commands = _commands([("mha list", "problems and quiz items" if course.quiz else "the problems"),
                          (f"mha show {problem}", "one problem's prompt"),
                          ("mha check", "check attention.py and answers.yaml (public cases)" if course.quiz
                           else "check attention.py (public cases)")])
    words = {"key": seed_key, "KEY": seed_key.upper(), "example": item}
    return STUDENT_README.format(
        title=course.title, commands=commands, personal=PERSONAL_README.format(**words) if personal else "",
        numbers=" (with example numbers: see above for yours)" if personal else "")


def _assignment_markdown(seed_cases: dict, note: str = "") -> str:
    parts = [f"# {seed_cases['title']}\n\n{note}".rstrip() + "\n"]
    parts += [p["text"] for p in seed_cases["problems"]]
    for item in (seed_cases["quiz"] or {"items": []})["items"]:
        lines = [f"## Quiz: {item['item']['title']} (`{item['item']['id']}`, {item['item']['points']:g} points)",
                 "", item["prompt"].strip(), ""]
        lines += [f"- {c['letter']}) {c['text']}" for c in item["choices"]]
        parts.append("\n".join(lines) + "\n")
    return "\n\n".join(parts)


def _copy_package(out: Path) -> None:
    """Copy the whole grader package, less caches (the autograder bundle)."""
    shutil.copytree(PACKAGE, out, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def student_package(extra: Iterable[str] = ()) -> dict[str, bytes]:
    """{path inside the package: bytes} of STUDENT_MODULES and the `extra` modules, read from this
    grader; an InternalError names a listed module this installation lacks."""
    from ..errors import InternalError
    files = {}
    for name in (*STUDENT_MODULES, *extra):
        try:
            files[name] = (PACKAGE / name).read_bytes()
        except OSError as exc:
            raise InternalError(f"the student bundle lists grader/{name}, which cannot be read: {exc}") from exc
    return files


def write_student(course: Course, out: Path, roster: list[str], secret: str | None,
                  seed_key: str = DEFAULT_KEY) -> list[str]:
    """The student bundle; returns the seed cases file(s) written (default first). With a roster, each
    listed student's numbers too, and the bundle's `mha check` asks for the student's id."""
    from .. import distribution as installed
    out.mkdir(parents=True)
    for name, data in student_package().items():
        (out / "grader" / name).parent.mkdir(parents=True, exist_ok=True)
        (out / "grader" / name).write_bytes(data)
    (out / "grader" / "__main__.py").write_text("from .cli.launch import student\n\nstudent()\n")
    seed_cases = out / "grader" / BUNDLE_FOLDER
    default = build(course, DEFAULT_SEED, "default")
    written = [_write_json(seed_cases / "default.json", default)]
    for student in roster:
        seed = student_seed(secret, student)
        written.append(_write_json(seed_cases / f"{student_token(student)}.json",
                                   build(course, seed, student_token(student))))
    personal = bool(roster)
    from ..exports.pysource import starter_files
    starters = starter_files(course)  # made from the course, never copied
    # the starter files again, for the bundle's `mha init`: the same files the course's `mha init` writes
    _write_json(seed_cases / INDEX, {"personal": personal, "seed_key": seed_key,
                                     "starter": [[name, text] for name, text in starters.items()]})
    for name, text in starters.items():
        write_atomically(out / name, text)
    copy_models(course.root, out)
    words = {"key": seed_key, "KEY": seed_key.upper()}
    write_atomically(out / "ASSIGNMENT.md",
                     _assignment_markdown(default, PERSONAL_MARKDOWN.format(**words) if personal else ""))
    write_atomically(out / "README.md", student_readme(course, personal, seed_key))
    write_atomically(out / "pyproject.toml", STUDENT_PYPROJECT.format(
        distribution=installed.DISTRIBUTION, version=installed.student_version(), title=course.title,
        seed_cases=BUNDLE_FOLDER,
        build_requires=installed.BUILD_REQUIRES, python=installed.requires_python(),
        dependencies=", ".join(json.dumps(d) for d in installed.dependencies())))
    return written


def copy_models(root: Path, out: Path) -> list[Path]:
    """The course's trained models (models/*.npz: weights as plain arrays, read without pickle) into
    out/models, where `grader.trained.load_model` finds them when run from `out`; returns the files
    written. Only the weight files: the models' code and their index (which records every head's
    role and ablation, answers to quiz items) stay with the course. Every export that gives students
    work calls this; when out/models is the course's own folder, the files are already there."""
    source = Path(root) / "models"
    files = sorted(source.glob("*.npz"))
    target = Path(out) / "models"
    if not files or (target.is_dir() and target.resolve() == source.resolve()):
        return []
    for path in files:
        write_atomically(target / path.name, path.read_bytes())
    return [target / path.name for path in files]


def _write_json(path: Path, data: dict) -> str:
    write_atomically(path, json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    return path.name


def write_autograder(course: Course, out: Path, secret: str | None) -> None:
    """The autograder bundle: the whole package, the course's own files (its manifest, with the hidden
    cases), and the secret where one is given."""
    from ..course.manifest import course_files
    out.mkdir(parents=True)
    _copy_package(out / "grader")
    repo_pyproject = PACKAGE.parent / "pyproject.toml"
    if repo_pyproject.is_file():
        shutil.copyfile(repo_pyproject, out / "pyproject.toml")
    shutil.copyfile(PACKAGE.parent / "README.md", out / "README.md") if (PACKAGE.parent / "README.md").is_file() \
        else (out / "README.md").write_text("# mha-exercises autograder\n")
    exercises = out / "exercises"
    for relative in course_files(course):  # never the folder whole: what else lies there is not the course's
        (exercises / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(course.root / relative, exercises / relative)
    if secret:  # the secret, and which id of a student picks their numbers (as the instructor chose)
        key = course_settings(course.root, {}).seed_key
        config = exercises / "course.yaml"
        config.write_text(f"secret: {json.dumps(secret)}\nseed_key: {key}\n")
        os.chmod(config, 0o600)


def release(course: Course, out: Path, roster: list[str], secret: str | None,
            seed_key: str = DEFAULT_KEY) -> dict:
    """Write out/student and out/autograder, both or neither (built beside `out`, then moved in); refuses
    to overwrite an existing folder, and refuses a course secret without a roster (the students would
    see numbers that grading does not use)."""
    from ..outputs import refuse_reading
    out = Path(out)
    refuse_reading(course, [out / "student", out / "autograder"], into=out)
    for part in ("student", "autograder"):
        if (out / part).exists():
            raise SubmissionError(f"{out / part} already exists; remove it or choose another --out")
    if roster and not secret:
        raise SubmissionError("a roster needs the course secret (course.yaml 'secret' or MHA_COURSE_SECRET)")
    if secret and not roster:
        raise SubmissionError(f"with a course secret each student is graded on their own numbers: give --roster "
                              f"FILE (each student's {seed_key}, one per line) so the student bundle holds them; "
                              "without per-student numbers, release with no secret")
    from ..outputs import staged_folder
    with staged_folder(out, merge=True) as staged:  # both bundles, or nothing
        seed_cases = write_student(course, staged / "student", roster, secret, seed_key)
        write_autograder(course, staged / "autograder", secret)
    return {"student": out / "student", "autograder": out / "autograder", "seed_cases": seed_cases}
