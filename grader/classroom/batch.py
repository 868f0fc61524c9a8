"""Grade a whole class: find every student's submission, grade them in parallel, and write one
result and one feedback file per student, resumable, deterministic, never stopped by one bad file.

Layouts understood:
- a folder with one sub-folder per student (its name is the student id) holding attention.py (or
  one folder deeper) and optionally answers.yaml beside it, or one `<student>.py` per student;
- Gradescope's "export submissions" download: `submission_metadata.yml` beside one folder per
  submission; the student id is the first submitter's email, or sid with `seed_key: sid`
  in course.yaml (a submitter without it is an error: another id would give other numbers).

Every file is read as `mha grade` reads it (grader.grading.student_files): a link, a FIFO or a device
is never read, nor is a student folder that is a link; a student's files are read once, when their
turn comes, and what is graded is what is hashed. Only small per-student rows stay in memory.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from .. import __version__
from ..course.model import Course
from ..course.seeds import CourseSettings
from ..errors import SubmissionError
from ..grading.answers import ANSWERS_NAME, MAX_BYTES as ANSWERS_BYTES
from ..grading.results import GradeResult, Status
from ..grading.student_files import StudentFile, entry_kind, open_folder, read_student_file, refusal
from ..grading.submission import SOURCE_BYTES, SubmissionFiles
from ..paths import SUBMISSION_NAME, remove_tree, write_atomically
from ..records import record
from ..sandbox.limits import Limits
from ..sandbox.spawn import adopt_spare, reap_spares, use_spare
from ..sandbox.student_text import one_line
from .analysis import StudentRow
from .submission_metadata import GRADESCOPE_METADATA, first_submitter, read_metadata

__all__ = ["Submission", "Outcome", "discover", "grade_all", "write_gradebook", "STATUSES", "GRADED", "EMPTY",
           "ERROR", "GRADER_ERROR", "FAILED"]

RESULTS_DIR, FEEDBACK_DIR = "results", "feedback"
FORMAT_VERSION = 3  # 3: a status per submission (syntax error, import failure, timeout...)
# a student's status in the gradebook: graded, syntax error, import failure, timeout, empty, error, and
# grader-error: the grader failed on these very files twice (two runs), so they are not graded again
# until they change or --force
GRADED, EMPTY, ERROR = Status.GRADED.value, Status.EMPTY.value, Status.ERROR.value
GRADER_ERROR = "grader-error"
STATUSES = (*(s.value for s in Status), GRADER_ERROR)
FAILED = (ERROR, GRADER_ERROR)  # the grader failed: no score (blank in the gradebook), a note says why
Grader = Callable[[Course, Path, int], GradeResult]


@record
class _GradeFiles:
    """The default grader: the files as read (no copy), each seed's cases prepared once for the class."""

    limits: Limits
    cache: Any  # grading.grade.PreparedCases (imported with grading, on first use)

    def __call__(self, course: Course, files: SubmissionFiles, seed: int) -> GradeResult:
        from ..grading.grade import grade
        return grade(course, files, limits=self.limits, seed=seed, cache=self.cache)


@record
class Submission:
    """One student's files, as found on disk."""

    student: str
    folder: Path
    source: Path | None      # attention.py (None: nothing to run)
    answers: Path | None     # answers.yaml, if any
    note: str = ""           # why there is nothing to run, shown in the feedback
    root: Path | None = None  # the folder of the class (the user's); below it, nothing is followed

    @property
    def key(self) -> str:
        """A file-name-safe name for this student's files: the id if safe, else made safe plus a hash of it."""
        safe = re.sub(r"[^A-Za-z0-9._@-]+", "_", self.student).strip("._")[:80] or "student"
        digest = hashlib.sha256(self.student.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return safe if safe == self.student else f"{safe[:71]}-{digest}"


@record
class Outcome:
    """What happened to one submission in this run."""

    submission: Submission
    row: StudentRow
    resumed: bool = False    # graded before and unchanged since: read back, not graded again
    error: str = ""          # why grading failed (status ERROR)
    traceback: str = ""      # and where: the grader's traceback (never in the stored record)

    @property
    def status(self) -> str:
        return self.row.status


# ---------------------------------------------------------------- finding submissions

def _kind(path: Path) -> str | None:
    """None for a regular file; 'missing', 'a link', 'a folder'... (never followed)."""
    return entry_kind(None, path)


def _in_folder(student: str, folder: Path, root: Path) -> Submission:
    """The files in a student's folder: attention.py in it or in one real sub-folder (no link)."""
    entries = sorted(folder.iterdir())
    places = [folder] + [e for e in entries if _kind(e) == "a folder"]
    where = next((p for p in places if _kind(p / SUBMISSION_NAME) != "missing"), None)
    found = (where or folder) / ANSWERS_NAME
    answers = None if _kind(found) == "missing" else found  # any other kind: refused when read
    if where is None:
        seen = [one_line(e.name, 80) for e in entries][:8]  # file names the student chose
        note = f"no {SUBMISSION_NAME} was submitted (found: {', '.join(seen) or 'nothing'})"
        return Submission(student, folder, None, answers, note, root)
    source, kind = where / SUBMISSION_NAME, _kind(where / SUBMISSION_NAME)
    if kind is not None:
        note = refusal(source.relative_to(folder).as_posix(), kind)
        return Submission(student, folder, None, answers, note, root)
    return Submission(student, folder, source, answers, "", root)


def read_files(submission: Submission) -> SubmissionFiles:
    """The student's attention.py and answers.yaml, read once (grader.grading.student_files):
    the class folder is the user's; below it no link is followed, so nothing outside the
    student's folder is read."""
    none = StudentFile(SUBMISSION_NAME), StudentFile(ANSWERS_NAME)
    place = submission.source or submission.answers
    if place is None:
        return SubmissionFiles(*none, submission.student)
    root = submission.root or submission.folder
    fd = open_folder(root, follow=True)
    try:
        for part in place.parent.relative_to(root).parts:
            inner = open_folder(part, fd)
            os.close(fd)
            fd = inner
        source = read_student_file(fd, place.name, SOURCE_BYTES) if submission.source else none[0]
        answers = read_student_file(fd, ANSWERS_NAME, ANSWERS_BYTES) if submission.answers else none[1]
    finally:
        os.close(fd)
    return SubmissionFiles(source, answers, submission.student)


def _gradescope(root: Path, metadata: Path, settings: CourseSettings) -> list[Submission]:
    found = []
    for name, entry in read_metadata(metadata).items():
        folder, student = root / str(name), first_submitter(entry, str(name), settings)
        if Path(str(name)).name == str(name) and str(name) not in (".", "..") and _kind(folder) == "a folder":
            found.append(_in_folder(student, folder, root))
        else:
            found.append(Submission(student, root, None, None, f"the export has no folder {str(name)!r}"))
    return found


def _folders(root: Path, exclude: Path | None) -> list[Submission]:
    skip = exclude.resolve() if exclude else None
    found = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith((".", "_")) or (skip and entry.resolve() == skip):
            continue
        kind = _kind(entry)
        if kind == "a folder":
            found.append(_in_folder(entry.name, entry, root))
        elif entry.suffix == ".py" or (kind == "a link" and entry.is_dir()):
            student = entry.stem if entry.suffix == ".py" else entry.name
            found.append(Submission(student, root, entry if kind is None else None, None,
                                    "" if kind is None else refusal(entry.name, kind), root))
    return found


def discover(root: Path, exclude: Path | None = None, settings: CourseSettings | None = None) -> list[Submission]:
    """Every student's submission under `root` (skipping the folder `exclude`), sorted by student id.
    `course`: whose id names a Gradescope export's students (its seed_key; default email)."""
    root = Path(root)
    if not root.is_dir():
        raise SubmissionError(f"{root}: not a folder of submissions")
    metadata = root / GRADESCOPE_METADATA
    found = _gradescope(root, metadata, settings or CourseSettings()) if metadata.is_file() else _folders(root, exclude)
    for attribute, what in (("student", "more than one submission for student"),
                            ("key", "more than one student would write the files named")):
        values = [getattr(s, attribute) for s in found]
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            raise SubmissionError(f"{root}: {what} {duplicates[0]!r}")
    return sorted(found, key=lambda s: s.student)


# ---------------------------------------------------------------- grading and storing

def fingerprint(course: Course, limits: Limits) -> str:
    """What every stored result depends on besides the student's files: the grader's version, the
    limits and the course's files; any change grades everybody again."""
    h = hashlib.sha256(f"{FORMAT_VERSION}\0{__version__}\0{limits!r}\0".encode())
    files = [course.root / "assignment.yaml", *(p.path for p in course.problems if p.path)]
    files += [course.quiz.path] if course.quiz is not None and course.quiz.path else []
    for file in files:
        h.update(Path(file).name.encode() + b"\0" + Path(file).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def digest(submission: Submission, files: SubmissionFiles, seed: int, stamp: str) -> str:
    """What a stored result depends on: the student's files as read, their seed, and `fingerprint`."""
    h = hashlib.sha256(f"{stamp}\0{seed}\0".encode())
    for file in (files.source, files.answers):
        h.update(file.data if file.data is not None else f"<{file.problem or 'none'}>".encode())
        h.update(b"\0")
    h.update(submission.note.encode())
    return h.hexdigest()


def result_record(submission: Submission, result: GradeResult, status: str, seed: int, key: str) -> dict:
    """The stored, deterministic result of one student (no timings, no temporary paths)."""
    from ..reports.json_report import as_dict
    data = as_dict(result)
    data["submission"] = submission.student
    return {"student": submission.student, "status": status, "seed": seed, "digest": key, "result": data}


def row_of(record: dict) -> StudentRow:
    """The small per-student row the gradebook and the item analysis need."""
    problems = record["result"]["problems"]
    # a written item's score is null (pending: graded by hand), never a zero in the gradebook
    return StudentRow(record["student"], {p["id"]: float(p["score"]) for p in problems if p["score"] is not None},
                      status=record["status"],
                      note=record.get("error", "") if record["status"] in FAILED else "",
                      mistakes={p["id"]: tuple(p["mistakes"]) for p in problems if p["mistakes"]},
                      written={p["id"]: p["written"] for p in problems if isinstance(p.get("written"), str)})


def _grade_one(course: Course, submission: Submission, files: SubmissionFiles, seed: int,
               grader: Grader | _GradeFiles, scratch: Path) -> GradeResult:
    """Grade the files read: handed over as they are, or (a grader that takes a path) as a private
    copy, attention.py (or an empty placeholder) and only this student's answers, in a folder
    under the batch's `scratch` folder (which the batch deletes, even if this process dies)."""
    if isinstance(grader, _GradeFiles):
        result = grader(course, files, seed)
    else:
        with tempfile.TemporaryDirectory(prefix="submission-", dir=scratch) as tmp:
            staged = Path(tmp) / SUBMISSION_NAME
            staged.write_bytes(files.source.data if files.source.data is not None
                               else b"# no attention.py was submitted\n")
            if files.answers.data is not None:
                (Path(tmp) / ANSWERS_NAME).write_bytes(files.answers.data)
            result = grader(course, staged, seed)
    return replace(result, messages=(submission.note, *result.messages)) if submission.note else result


def _stored(path: Path, key: str) -> dict | None:
    """The stored record at `path` if it is for exactly these files, seed and course."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # none yet, or damaged: graded again
    ok = isinstance(record, dict) and record.get("digest") == key and record.get("status") in STATUSES \
        and record.get("status") != ERROR  # graded again; a GRADER_ERROR is read back like a result
    return record if ok else None


def _failures(path: Path, key: str) -> int:
    """How many runs in a row the grader failed on exactly these files (the stored record's count)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if not isinstance(record, dict) or record.get("digest") != key or record.get("status") not in FAILED:
        return 0
    count = record.get("failures")
    return count if isinstance(count, int) and not isinstance(count, bool) and 0 < count < 1000 else 1


def grade_all(course: Course, submissions: Sequence[Submission], out: Path, *,
              seed_of: Callable[[str], int], limits: Limits | None = None, jobs: int = 2, force: bool = False,
              grader: Grader | None = None, keep_prepared: bool = True) -> Iterator[Outcome]:
    """Grade every submission, `jobs` at a time, writing out/results/<key>.json and
    out/feedback/<key>.txt; yields each Outcome as it completes. Unless `force`, a submission
    whose stored result has the same digest is read back instead of graded again. A failure
    while grading or storing one submission (everything done for it is inside its guard) is
    recorded as status ERROR and never stops the others; the grader failing on the same files
    in a second run is recorded as GRADER_ERROR, read back from then on like a result.

    With `jobs` > 1 (on Linux) the submissions are shared out among `jobs` grader processes
    forked from this one (see `_in_processes`); otherwise they are graded in threads here.

    `keep_prepared` (not a user's option; False in tests that compare with the path without it):
    each seed's prepared cases are read from the prepared-cases store, or prepared and kept there
    (grading/prepared_store.py)."""
    from ..reports.text import render as render_text
    out, limits = Path(out), limits or Limits()
    chosen: Grader | _GradeFiles = grader or _default_grader(limits, course, submissions, seed_of, keep_prepared)
    stamp = fingerprint(course, limits)
    owner = os.getpid()

    def store(submission: Submission, record: dict, text: str) -> None:
        # any text a student's files or folder names hold, even a lone surrogate, is written as an
        # escape (as write_atomically does)
        data = text.encode("utf-8", "backslashreplace")
        # Each file is whole or absent (a rename); neither is synced to disk here (the batch syncs the
        # folder's file system every SYNC_EVERY submissions and at the end). The record, written last,
        # holds the feedback's hash: a rerun reads it back only with that very feedback beside it, so
        # after a crash of the machine a file left empty or stale is graded again, never shown.
        write_atomically(out / FEEDBACK_DIR / f"{submission.key}.txt", data, durable=False)
        # one compact line: json's C encoder (indent= would select its pure-Python one, ~10x slower)
        write_atomically(out / RESULTS_DIR / f"{submission.key}.json",
                         json.dumps({**record, FEEDBACK_HASH: _hash(data)}, ensure_ascii=False,
                                    separators=(",", ":")) + "\n", durable=False)

    def work(submission: Submission) -> tuple[dict, bool]:
        """Grade (or read back) one submission and store its files; its record, and whether it was read
        back. Everything done for the submission, storing included, is inside its guard."""
        seed, key, trace = None, "", {}
        try:
            seed = seed_of(submission.student)
            files = read_files(submission)  # once: what is graded is what is hashed
            key = digest(submission, files, seed, stamp)
            feedback = out / FEEDBACK_DIR / f"{submission.key}.txt"
            record = None if force or not feedback.is_file() else _stored(out / RESULTS_DIR / f"{submission.key}.json", key)
            if record is not None and not _with_feedback(record, feedback):
                record = None  # its feedback is not the one it was stored with (a crash of the machine)
            if record is not None:
                return record, True
            result = _grade_one(course, submission, files, seed, chosen, scratch)
            record = result_record(submission, result, result.status.value if files.source.data is not None else EMPTY,
                                   seed, key)
            store(submission, record, render_text(result))
            return record, False
        except Exception as exc:  # this submission only: never stop the batch
            failures = 0 if force or not key else _failures(out / RESULTS_DIR / f"{submission.key}.json", key)
            record, text = _error_record(submission, seed, one_line(f"{type(exc).__name__}: {exc}", 500), key,
                                         failures + 1)
            trace = {"traceback": traceback.format_exc()}  # handed back for the log, never stored
        try:
            store(submission, record, text)
        except Exception:  # nothing can be stored for it (the disk is full...): its row still counts
            trace["traceback"] += "and its record could not be stored:\n" + traceback.format_exc()
        return {**record, **trace}, False

    def lost(submission: Submission, error: str, held: bool = True) -> dict:
        """A submission whose grader process died while it `held` it (else: one never graded, as no
        grader process was left): stored as the grader's failure, its files read again here for
        their digest, so that killing the grader process on the same files twice is GRADER_ERROR too."""
        seed, key, failures = None, "", 0
        try:
            seed = seed_of(submission.student)
            key = digest(submission, read_files(submission), seed, stamp)
            failures = 0 if force else _failures(out / RESULTS_DIR / f"{submission.key}.json", key)
        except Exception:  # told by its own failure when graded again
            pass
        record, text = _error_record(submission, seed, error, key if held else "", failures + 1)
        try:
            store(submission, record, text)
        except Exception:  # its row still counts
            pass
        return record

    scratch = Path(tempfile.mkdtemp(prefix="mha-batch-"))  # private (0700), removed by this process only
    try:
        if jobs > 1 and len(submissions) > 1 and FORK:
            results = _in_processes(work, lost, submissions, jobs)
        else:
            use_spare(0)  # a zygote started ahead (spawn.prestart_spares), if any
            results = _in_threads(work, submissions, jobs)
        for done, (index, record, resumed) in enumerate(results, 1):
            if done % SYNC_EVERY == 0:
                _sync(out)
            yield Outcome(submissions[index], row_of(record), resumed, record.get("error", ""), record.get("traceback", ""))
    finally:
        if os.getpid() == owner:  # not in a forked grader process
            _sync(out)
            remove_tree(scratch)
            reap_spares()


FEEDBACK_HASH = "feedback_sha256"  # a stored record's: the hash of the feedback file written with it
SYNC_EVERY = 64  # submissions stored between two syncs of the output folder's file system


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _with_feedback(record: dict, feedback: Path) -> bool:
    """Whether `feedback` holds exactly the feedback `record` was stored with."""
    try:
        return record.get(FEEDBACK_HASH) == _hash(feedback.read_bytes())
    except OSError:
        return False


def _sync(out: Path) -> None:
    """Write what the batch stored under `out` to disk: one syncfs of its file system (os.sync where
    there is no syncfs), in place of one fsync per file. Durability only: a record is read back
    only beside the very feedback it was stored with, synced or not."""
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    except (OSError, AttributeError):
        os.sync()
    finally:
        os.close(fd)


def _error_record(submission: Submission, seed: int | None, error: str, key: str = "",
                  failures: int = 1) -> tuple[dict, str]:
    """The stored record and the feedback of a submission the grader failed on: ERROR, graded again
    in the next run; GRADER_ERROR once it failed on the same files (`key`) in two runs."""
    status = GRADER_ERROR if key and failures >= 2 else ERROR
    record: dict[str, Any] = {"student": submission.student, "status": status, "seed": seed, "digest": key,
                              "error": error, "failures": failures, "result": {"problems": []}}
    return record, f"Your submission could not be graded (the grader failed: {error}).\n"


def _default_grader(limits: Limits, course: Course, submissions: Sequence[Submission],
                    seed_of: Callable[[str], int], keep_prepared: bool = True) -> _GradeFiles:
    """The default grader; for a class on one seed (no course secret) its cases are prepared before
    grading starts, so grader processes forked afterwards share them instead of each computing them.
    With `keep_prepared`, each seed's cases come from the prepared-cases store (or go there)."""
    from ..grading.prepared import PreparedCases
    store = None
    if keep_prepared:
        from ..grading.prepared_store import PreparedStore
        try:
            store = PreparedStore(course)
        except OSError:  # a course file that cannot be read: each case is prepared when asked, and says why
            store = None
    grader = _GradeFiles(limits, PreparedCases(store=store))
    try:
        seeds = {seed_of(s.student) for s in submissions}
    except Exception:  # reported per submission when graded
        return grader
    if len(seeds) != 1:
        return grader
    seed = seeds.pop()
    try:
        for problem in course.problems:
            for case in problem.visible_cases(include_hidden=True):
                grader.cache.get(problem, case, seed)
        for item in course.quiz.items if course.quiz else ():
            grader.cache.quiz_item(item, seed)
    except Exception:  # the submission that needs it reports it
        pass
    return grader


Work = Callable[[Submission], tuple[dict, bool]]
FORK = sys.platform == "linux"  # fork after imports: other systems start a fresh Python (no shared memory)


def _in_threads(work: Work, submissions: Sequence[Submission], jobs: int) -> Iterator[tuple[int, dict, bool]]:
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mha-grade")
    try:
        futures = {pool.submit(work, s): i for i, s in enumerate(submissions)}
        for future in as_completed(futures):
            yield (futures[future], *future.result())
    finally:  # interrupted: drop the waiting submissions; the running ones finish and are stored
        pool.shutdown(wait=True, cancel_futures=True)


def _serve(conn, others: list, work: Work, submissions: Sequence[Submission]) -> None:
    """A grader process: grade the submission whose index comes in, answer with its record, until
    the batch closes the pipe. It finishes the submission at hand when the user presses Ctrl-C
    (the batch stops sending more); its own zygote stops with it. `others`: the batch's ends of
    this pipe and of those to the grader processes forked before this one (closed here: a grader
    process sees the end of its work only when no process holds the other end any more)."""
    from ..sandbox.spawn import stop_fork_server
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in others:
        other.close()
    try:
        while True:
            try:
                index = int(conn.recv_bytes())
            except (EOFError, OSError, ValueError):
                return
            record, resumed = work(submissions[index])
            try:
                conn.send_bytes(json.dumps({"index": index, "record": record, "resumed": resumed}).encode())
            except OSError:
                return
    finally:
        stop_fork_server()  # a forked process runs no atexit handlers


def _in_processes(work: Work, lost: Callable[..., dict], submissions: Sequence[Submission],
                  jobs: int) -> Iterator[tuple[int, dict, bool]]:
    """Grade in `jobs` grader processes forked from this one (so they share the loaded problems and
    the prepared cases), each with its own zygote and student processes, one submission at a time
    each, the next one sent to whichever is free. Python runs one thread at a time per process,
    and a grader spends most of its time in Python, so threads could not use a second core.

    Messages are plain JSON over pipes (indices out, records back). A grader process that dies
    costs the submission it held (stored by `lost` as the grader's failure); one found dead
    when it is sent a submission costs nothing; the others carry on with the rest."""
    import multiprocessing
    from collections import deque
    from multiprocessing.connection import Connection, wait
    context = multiprocessing.get_context("fork")
    pending = deque(range(len(submissions)))
    busy: dict = {}  # our end of a grader process's pipe -> (process, index being graded)
    idle: list = []  # grader processes sent away, joined once every result is in

    def send_next(conn, proc) -> None:
        if not pending:
            conn.close()  # no more work: it exits; joining it now would hold back the others' results
            idle.append(proc)
            return
        index = pending.popleft()
        try:
            conn.send_bytes(str(index).encode())
        except OSError:  # it died between two submissions: another process grades this one
            pending.appendleft(index)
            conn.close()
            idle.append(proc)
            return
        busy[conn] = (proc, index)

    try:
        for number in range(min(jobs, len(submissions))):
            ours, theirs = context.Pipe()
            proc = context.Process(target=_serve, args=(theirs, [ours, *busy], work, submissions), name="mha-grader",
                                   daemon=True)
            adopt_spare(number)  # its zygote, started ahead (spawn.prestart_spares), if there is one
            try:
                proc.start()
            finally:
                adopt_spare(None)
            theirs.close()
            send_next(ours, proc)
        while busy:
            for conn in cast(list[Connection], wait(list(busy))):  # the connections it was given
                proc, index = busy.pop(conn)
                try:
                    message = json.loads(conn.recv_bytes())
                except (EOFError, OSError, ValueError):  # the grader process died with this submission
                    conn.close()
                    proc.join()
                    yield index, lost(submissions[index], f"the grading process stopped (exit code {proc.exitcode})"), \
                        False
                    continue
                send_next(conn, proc)  # its next submission first: it grades while this result is reported
                yield message["index"], message["record"], message["resumed"]
        while pending:  # every grader process died
            index = pending.popleft()
            yield index, lost(submissions[index], "no grading process left", held=False), False
    finally:  # done or interrupted: the submissions being graded finish and are stored, no more start
        for conn, (proc, _) in list(busy.items()):
            conn.close()
            proc.join()
        for proc in idle:
            proc.join()


TOTAL_WITH_WRITTEN = "total_with_written"  # the gradebook's column of the total with the hand scores


def write_gradebook(path: Path, item_ids: Sequence[str], rows: Sequence[StudentRow],
                    written: Sequence[str] = (), hand: Mapping[str, Mapping[str, float]] | None = None) -> None:
    """gradebook.csv: student, status, each item's score, total, note; one row per student, by id.

    A student whose grading failed (status error or grader-error) has blank scores, not zeros, and
    a note saying how the grader failed. With `hand` (the hand scores of the written items
    `written`, by student: `--written-scores`), each written item has a column of its own after the
    total, blank where no score was given, and total_with_written adds them to the total once every
    one of a student's is given (blank until then: a total without some of them would read as a
    grade); the note comes last."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    extra = [*written, TOTAL_WITH_WRITTEN] if hand is not None else []
    writer.writerow(["student", "status", *item_ids, "total", *extra, "note"])
    for row in sorted(rows, key=lambda r: r.student):
        scores = [row.scores.get(i, 0.0) for i in item_ids]
        shown = [""] * (len(scores) + 1) if row.status in FAILED else \
            [f"{s:g}" for s in scores] + [f"{round(sum(scores), 4):g}"]
        if hand is not None:
            given = hand.get(row.student, {})
            by_hand = [given.get(i) for i in written]
            complete = row.status not in FAILED and all(s is not None for s in by_hand)
            shown += ["" if s is None else f"{s:g}" for s in by_hand]
            shown.append(f"{round(sum(scores) + sum(s or 0.0 for s in by_hand), 4):g}" if complete else "")
        writer.writerow([row.student, row.status, *shown, one_line(row.note, 300) if row.status in FAILED else ""])
    write_atomically(path, buffer.getvalue())
