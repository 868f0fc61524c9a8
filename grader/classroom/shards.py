"""A class graded in slices: which students `grade-all --shard K/N` grades, and what `mha merge` checks.

A student's slice depends on their id alone (sha256 of it, mod N), so the same student is
always in the same slice, whatever else is in the submissions folder. Each slice's output
folder holds shard.json: the slice, its students (with the file names of their stored results),
and what their results depend on besides their files (the course, the limits, the seeds), so
that `mha merge` refuses slices that were not graded alike.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ExitCode, GraderError
from ..paths import write_atomically
from .batch import FEEDBACK_DIR, RESULTS_DIR

MANIFEST = "shard.json"  # in a slice's --out
MANIFEST_VERSION = 1
SEED_PROBE = "\0mha-shard-check"  # no student's id: its seed tells whether two slices share their seeds
COUNT_ENV = "MHA_SHARD_COUNT"  # the number of slices, for Kubernetes Indexed Jobs (which give only the index)


class ShardError(GraderError, ValueError):
    """A slice that cannot be told (--shard auto without a batch runner's variables) or merged."""

    exit_code = ExitCode.USAGE


def parse(text: str) -> tuple[int, int] | None:
    """K/N with 1 <= K <= N, as (K, N); None when `text` is not one."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if match is None:
        return None
    k, n = int(match[1]), int(match[2])
    return (k, n) if 1 <= k <= n else None


def _number(environ: Mapping[str, str], name: str) -> int:
    value = environ[name].strip()
    if not re.fullmatch(r"\d{1,6}", value):
        raise ShardError(f"--shard auto: {name}={environ[name]!r} is not a whole number")
    return int(value)


def from_environment(environ: Mapping[str, str]) -> tuple[int, int]:
    """--shard auto: (K, N) from a Slurm job array or a Kubernetes Indexed Job.

    Slurm: K = SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1 (MIN 0 when unset), N =
    SLURM_ARRAY_TASK_COUNT, so `--array=0-2` and `--array=1-3` are both slices 1/3 to 3/3 (the
    array's ids must be consecutive). Kubernetes: K = JOB_COMPLETION_INDEX + 1 (it counts from 0),
    N = MHA_SHARD_COUNT (set it to the Job's completions)."""
    if "SLURM_ARRAY_TASK_ID" in environ:
        if "SLURM_ARRAY_TASK_COUNT" not in environ:
            raise ShardError("--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not")
        low = _number(environ, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in environ else 0
        k = _number(environ, "SLURM_ARRAY_TASK_ID") - low + 1
        n = _number(environ, "SLURM_ARRAY_TASK_COUNT")
        source = "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1 of SLURM_ARRAY_TASK_COUNT"
    elif "JOB_COMPLETION_INDEX" in environ:
        if COUNT_ENV not in environ:
            raise ShardError(f"--shard auto: JOB_COMPLETION_INDEX is set but {COUNT_ENV} is not (set it to the "
                             "Job's completions)")
        k, n = _number(environ, "JOB_COMPLETION_INDEX") + 1, _number(environ, COUNT_ENV)
        source = f"JOB_COMPLETION_INDEX + 1 of {COUNT_ENV}"
    else:
        raise ShardError("--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX "
                         "(a Kubernetes Indexed Job) is set; give the slice as --shard K/N")
    if not 1 <= k <= n:
        raise ShardError(f"--shard auto: slice {k} of {n} ({source}) is not between 1 and {max(n, 1)}; a Slurm "
                         "array's task ids must be consecutive")
    return k, n


def slice_of(student: str, count: int) -> int:
    """The slice (1 to `count`) of `student`: from their id alone, never from who else is in the class."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def write_manifest(out: Path, shard: tuple[int, int], students: Mapping[str, str], course: str, grading: str,
                   seeds: int) -> None:
    """OUT/shard.json: the slice, its students (id -> file name of their stored results) and what
    their results depend on besides their files."""
    write_atomically(out / MANIFEST, json.dumps(
        {"version": MANIFEST_VERSION, "shard": list(shard), "course": course, "grading": grading, "seeds": seeds,
         "students": dict(sorted(students.items()))}, ensure_ascii=False, indent=1) + "\n")


def read_manifests(folders: Sequence[Path], course: str) -> list[dict[str, Any]]:
    """Every slice's shard.json, checked: one course (the one merged with), the same limits and
    seeds, no student in two slices, every student's stored result present."""
    manifests: list[dict[str, Any]] = []
    owner: dict[str, Path] = {}
    for folder in folders:
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ShardError(f"{folder}: no {MANIFEST} (not the output of `mha grade-all --shard`)") from None
        except (OSError, ValueError) as exc:
            raise ShardError(f"{path}: cannot be read ({exc})") from None
        if not (isinstance(data, dict) and data.get("version") == MANIFEST_VERSION
                and isinstance(data.get("students"), dict) and isinstance(data.get("shard"), list)
                and len(data["shard"]) == 2 and all(type(x) is int for x in data["shard"])
                and all(isinstance(k, str) and isinstance(v, str) and "/" not in v and v not in ("", ".", "..")
                        for k, v in data["students"].items())):
            raise ShardError(f"{path}: not a shard manifest of this version of mha")
        first = manifests[0] if manifests else None
        if data.get("course") != course:
            raise ShardError(f"{folder}: graded with another course (or version of mha) than the one merged with")
        if first is not None and data.get("grading") != first.get("grading"):
            raise ShardError(f"{folder}: graded with other limits than {folders[0]} (--timeout, --memory-mb...)")
        if first is not None and data.get("seeds") != first.get("seeds"):
            raise ShardError(f"{folder}: graded with another course secret than {folders[0]} (the students' seeds "
                             "differ)")
        for student, key in data["students"].items():
            if student in owner:
                raise ShardError(f"{folder}: student {student!r} is also in {owner[student]}: a student may be in "
                                 "one shard only")
            owner[student] = folder
            for place in (folder / RESULTS_DIR / f"{key}.json", folder / FEEDBACK_DIR / f"{key}.txt"):
                if not place.is_file():
                    raise ShardError(f"{place}: missing (student {student!r}); grade that shard again")
        manifests.append(data)
    return manifests
