"""Grade a whole class: find every student's submission, grade them in parallel, and write one
result and one feedback file per student, resumable, deterministic, never stopped by one bad file.

Layouts understood:
- a folder with one sub-folder per student (its name is the student id) holding attention.py
  and optionally answers.yaml, or one `<student>.py` file per student;
- Gradescope's "export submissions" download: `submission_metadata.yml` beside one folder per
  submission; the student id is the first submitter's sid (else email, else name).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .analysis import StudentRow
from .answers import ANSWERS_NAME
from .errors import GraderError, SubmissionError
from .limits import Limits
from .model import Assignment
from .paths import SUBMISSION_NAME, write_atomically
from .results import GradeResult
from .yamlio import load_yaml

RESULTS_DIR, FEEDBACK_DIR = "results", "feedback"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Submission:
    student: str
    folder: Path
    source: Path | None      # attention.py (None: nothing to run)
    answers: Path | None     # answers.yaml, if any

    @property
    def key(self) -> str:
        """A file-name-safe name for this student's output files."""
        return re.sub(r"[^A-Za-z0-9._@-]+", "_", self.student).strip("._")[:80] or "student"


def _in_folder(student: str, folder: Path) -> Submission:
    sources = [folder / SUBMISSION_NAME] + sorted(folder.glob(f"*/{SUBMISSION_NAME}"))
    source = next((s for s in sources if s.is_file()), None)
    answers = (source.parent if source else folder) / ANSWERS_NAME
    return Submission(student, folder, source, answers if answers.is_file() else None)


def _gradescope_student(entry: object, folder_name: str) -> str:
    submitters = entry.get(":submitters") if isinstance(entry, dict) else None
    if isinstance(submitters, list) and submitters and isinstance(submitters[0], dict):
        for key in (":sid", ":email", ":name"):
            value = submitters[0].get(key)
            if value is not None and str(value).strip():
                return str(value).strip()
    return folder_name


def discover(root: Path, exclude: Path | None = None) -> list[Submission]:
    """Every student's submission under `root`, sorted by student id."""
    root = Path(root)
    if not root.is_dir():
        raise SubmissionError(f"{root}: not a folder of submissions")
    found: list[Submission] = []
    metadata = root / "submission_metadata.yml"
    if metadata.is_file():
        data = load_yaml(metadata)
        if not isinstance(data, dict):
            raise SubmissionError(f"{metadata}: expected a mapping of submission folders")
        for folder_name, entry in data.items():
            folder = root / str(folder_name)
            found.append(_in_folder(_gradescope_student(entry, str(folder_name)), folder) if folder.is_dir()
                         else Submission(_gradescope_student(entry, str(folder_name)), folder, None, None))
    else:
        skip = exclude.resolve() if exclude else None
        for entry in sorted(root.iterdir()):
            if entry.name.startswith((".", "_")) or (skip and entry.resolve() == skip):
                continue
            if entry.is_dir():
                found.append(_in_folder(entry.name, entry))
            elif entry.suffix == ".py":
                found.append(Submission(entry.stem, root, entry, None))
    students = [s.student for s in found]
    duplicates = sorted({s for s in students if students.count(s) > 1})
    if duplicates:
        raise SubmissionError(f"{root}: more than one submission for student {duplicates[0]!r}")
    return sorted(found, key=lambda s: s.student)


def digest(submission: Submission, seed: int, assignment_id: str) -> str:
    """What a stored result depends on: the files, the variant and the assignment."""
    h = hashlib.sha256(f"{FORMAT_VERSION}\0{assignment_id}\0{seed}\0".encode())
    for path in (submission.source, submission.answers):
        h.update(path.read_bytes() if path else b"<none>")
        h.update(b"\0")
    return h.hexdigest()


def assignment_fingerprint(assignment: Assignment) -> str:
    """Changes whenever a problem or quiz file changes, so --force is not needed after edits."""
    h = hashlib.sha256()
    files = sorted((assignment.root / "problems").glob("*.yaml")) + [assignment.root / "assignment.yaml"]
    files += [assignment.quiz.path] if assignment.quiz is not None and getattr(assignment.quiz, "path", None) else []
    for file in files:
        h.update(file.name.encode() + b"\0" + file.read_bytes())
    return h.hexdigest()[:16]


def result_record(submission: Submission, result: GradeResult, status: str, key: str) -> dict:
    """The stored, deterministic result of one student (no timings, no temporary paths)."""
    from .reports.json_report import as_dict
    data = as_dict(result)
    data.pop("execution_time", None)
    data["submission"] = submission.student
    return {"student": submission.student, "status": status, "digest": key, "result": data}


def row_of(record: dict) -> StudentRow:
    problems = record["result"]["problems"]
    return StudentRow(student=record["student"], status=record["status"],
                      scores={p["id"]: float(p["score"]) for p in problems},
                      mistakes={p["id"]: tuple(p["mistakes"]) for p in problems if p["mistakes"]})


@dataclass(frozen=True)
class Outcome:
    submission: Submission
    status: str          # graded | empty | error | skipped (already graded)
    record: dict


Grader = Callable[[Assignment, Path, int], GradeResult]


def _grade_one(assignment: Assignment, submission: Submission, seed: int, key: str, grader: Grader) -> tuple[GradeResult, str]:
    if submission.source is not None:
        return grader(assignment, submission.source, seed), "graded"
    # nothing to run: grade an empty file beside a copy of the answers, so the quiz still counts
    with tempfile.TemporaryDirectory(prefix="mha-empty-") as tmp:
        placeholder = Path(tmp) / SUBMISSION_NAME
        placeholder.write_text("# no attention.py was submitted\n")
        if submission.answers is not None:
            shutil.copyfile(submission.answers, Path(tmp) / ANSWERS_NAME)
        return grader(assignment, placeholder, seed), "empty"


def grade_all(assignment: Assignment, submissions: list[Submission], out: Path, *, seed_of: Callable[[str], int],
              grader: Grader, jobs: int = 2, force: bool = False,
              on_done: Callable[[Outcome], None] | None = None) -> Iterator[Outcome]:
    """Grade every submission (skipping unchanged ones unless `force`), writing results/ and feedback/."""
    from .reports.text import render as render_text
    out = Path(out)
    (out / RESULTS_DIR).mkdir(parents=True, exist_ok=True)
    (out / FEEDBACK_DIR).mkdir(parents=True, exist_ok=True)
    fingerprint = assignment_fingerprint(assignment)

    def work(submission: Submission) -> Outcome:
        stored = out / RESULTS_DIR / f"{submission.key}.json"
        try:
            seed = seed_of(submission.student)
            key = digest(submission, seed, fingerprint)
        except (OSError, GraderError) as exc:
            record = {"student": submission.student, "status": "error", "digest": "", "error": str(exc),
                      "result": {"problems": []}}
            write_atomically(stored, json.dumps(record, indent=2) + "\n")
            return Outcome(submission, "error", record)
        if not force and stored.is_file():
            try:
                record = json.loads(stored.read_text())
                if record.get("digest") == key:
                    return Outcome(submission, "skipped", record)
            except ValueError:
                pass  # a damaged result is graded again
        try:
            result, status = _grade_one(assignment, submission, seed, key, grader)
            record = result_record(submission, result, status, key)
            write_atomically(out / FEEDBACK_DIR / f"{submission.key}.txt", render_text(result))
        except Exception as exc:  # a grader failure on one submission never stops the batch
            status = "error"
            record = {"student": submission.student, "status": status, "digest": "",
                      "error": f"{type(exc).__name__}: {exc}", "result": {"problems": []}}
        write_atomically(stored, json.dumps(record, indent=2) + "\n")
        return Outcome(submission, status, record)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for outcome in pool.map(work, submissions):
            if on_done is not None:
                on_done(outcome)
            yield outcome


def write_gradebook(path: Path, item_ids: list[str], rows: list[StudentRow]) -> None:
    """gradebook.csv: student, status, each item's score, total; one row per student."""
    import csv
    import io
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "status", *item_ids, "total"])
    for row in sorted(rows, key=lambda r: r.student):
        writer.writerow([row.student, row.status, *(f"{row.scores.get(i, 0.0):g}" for i in item_ids),
                         f"{sum(row.scores.get(i, 0.0) for i in item_ids):g}"])
    write_atomically(path, buffer.getvalue())
