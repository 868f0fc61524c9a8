"""`mha merge`: join the output folders of `mha grade-all --shard K/N` into one class's outputs.

The students' stored results and feedback are copied as they are; the gradebook, written
answers, item analysis and report are built from them by grade-all's own code (`write_reports`),
so a merge is what grading the class in one run writes.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from ..errors import GraderError, InternalError
from .commands import CONTEXT, Ctx, fail


@click.command("merge", context_settings=CONTEXT)
@click.argument("shard_outs", nargs=-1, required=True, metavar="SHARD_OUT...",
                type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for the whole class's gradebook.csv, feedback/, results/, item analysis and report.html "
                   "(not one of the SHARD_OUT folders).")
@click.pass_obj
def merge(obj: Ctx, shard_outs: tuple[Path, ...], out: Path) -> None:
    """Join the --out folders of `mha grade-all --shard K/N` into one class's gradebook, feedback and report.

    Each SHARD_OUT is the --out of one slice; the outputs are those of grading the class in one
    run (report.html's time aside). Slices graded with another course, other limits or another
    course secret, or sharing a student, are refused (exit 2); so is a slice missing (when its
    shard.json says K/N, every K of N must be given). Exit 1 when the grader failed on some
    submission, as grade-all does.

    \b
    Example:
      mha merge graded-1/ graded-2/ graded-3/ --out graded/
    """
    from ..classroom import batch, shards
    from ..sandbox.limits import Limits
    from .grade_all import ERROR_LOG, summary, write_reports
    try:
        course = obj.course()
        folders = list(shard_outs)
        if any(out.resolve() == f.resolve() for f in folders):
            raise shards.ShardError(f"{out}: --out must be another folder than each SHARD_OUT")
        manifests = shards.read_manifests(folders, batch.fingerprint(course, Limits()))
        counts = {m["shard"][1] for m in manifests}
        given = sorted(m["shard"][0] for m in manifests)
        if len(counts) != 1 or given != list(range(1, next(iter(counts)) + 1)):
            raise shards.ShardError(f"the shards given are {', '.join(f'{k}/{n}' for k, n in (m['shard'] for m in manifests))}: "
                                    "give every slice K/N of one N, once each")
        rows, logs = [], []
        try:
            for folder in (out / batch.RESULTS_DIR, out / batch.FEEDBACK_DIR):
                folder.mkdir(parents=True, exist_ok=True)
            for folder, manifest in zip(folders, manifests):
                for student, key in manifest["students"].items():
                    for sub, suffix in ((batch.RESULTS_DIR, ".json"), (batch.FEEDBACK_DIR, ".txt")):
                        shutil.copyfile(folder / sub / f"{key}{suffix}", out / sub / f"{key}{suffix}")
                    record = json.loads((out / batch.RESULTS_DIR / f"{key}.json").read_text(encoding="utf-8"))
                    if not isinstance(record, dict) or record.get("student") != student:
                        raise shards.ShardError(f"{folder / batch.RESULTS_DIR / (key + '.json')}: not {student!r}'s result")
                    rows.append(batch.row_of(record))
                if (folder / ERROR_LOG).is_file():
                    logs.append((folder / ERROR_LOG).read_text(encoding="utf-8", errors="surrogateescape"))
            from ..paths import write_atomically
            if logs:
                write_atomically(out / ERROR_LOG, "".join(logs))
            else:
                (out / ERROR_LOG).unlink(missing_ok=True)
            rows.sort(key=lambda r: r.student)  # as grade-all sorts them
            report = write_reports(course, rows, out)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, GraderError):
                raise
            raise InternalError(f"cannot merge into {out}: {exc}") from exc
    except GraderError as exc:
        fail(exc)
    summary(rows, 0, report, out)
