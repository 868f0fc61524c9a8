"""Where results are written: never renamed over anything but a regular file, modes per the umask.

`--output` pointing at a link or a FIFO is refused (exit 2, nothing changed, no hang); a
character device (a pseudo-terminal made here, or /dev/stdout of this run) is written in place.
Result files (the report, the gradebook, feedback, results, report.html) get 0666 & ~umask, so
teaching assistants can read them; the seed cache and a zip holding the course secret stay
private. Every test makes its own links, FIFOs and terminals: no system path is ever a target.
"""
from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from grader.course.yamlio import KEPT_FOLDER
from grader.errors import ExitCode, OutputError
from grader.paths import check_output, write_atomically

from ._edges import (
    edge_course,  # noqa: F401 (a fixture of these tests)
    grade,
    new_folder,
    run_grader,
    write_submission,
)


@pytest.fixture(scope="module")
def submission(edge_course) -> Path:
    return write_submission(new_folder(edge_course, "honest"), answers=edge_course.key)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


class TestRefused:
    def test_link_is_refused_and_left_alone(self, edge_course, submission):
        """--output naming a link: exit 2 before grading, the link and its target unchanged, and
        (--format gradescope) no results file written through it."""
        folder = new_folder(edge_course, "link")
        target = folder / "precious.txt"
        target.write_text("keep me\n")
        (folder / "results.json").symlink_to(target)
        run = grade(edge_course, submission, output=folder / "results.json")
        assert run.code == ExitCode.USAGE
        assert f"{folder / 'results.json'} is a link: results are written only to a regular file" in run.stderr
        assert os.path.islink(folder / "results.json") and target.read_text() == "keep me\n"
        assert sorted(os.listdir(folder)) == ["precious.txt", "results.json"]

    def test_fifo_is_refused_without_waiting(self, edge_course, submission):
        """--output naming a FIFO nobody reads: exit 2 at once, still a FIFO."""
        folder = new_folder(edge_course, "fifo")
        os.mkfifo(folder / "results.json")
        run = grade(edge_course, submission, output=folder / "results.json")
        assert run.code == ExitCode.USAGE
        assert "is a FIFO: results are written only to a regular file" in run.stderr
        assert stat.S_ISFIFO(os.lstat(folder / "results.json").st_mode)
        assert sorted(os.listdir(folder)) == ["results.json"]

    def test_write_atomically_refuses_a_link_made_after_the_check(self, tmp_path):
        """The library call refuses too (what grade-all and exports use), leaving no temporary file."""
        (tmp_path / "elsewhere").write_text("x")
        (tmp_path / "out.csv").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(OutputError, match="is a link"):
            write_atomically(tmp_path / "out.csv", "a,b\n")
        assert sorted(os.listdir(tmp_path)) == ["elsewhere", "out.csv"] and (tmp_path / "elsewhere").read_text() == "x"

    def test_folder_is_refused(self, tmp_path):
        with pytest.raises(OutputError, match="is a folder"):
            write_atomically(tmp_path, "x")


class TestCharacterDevices:
    def test_dev_stdout_is_written_in_place(self, edge_course, submission):
        """`--output /dev/stdout` with the output captured (a pipe): the report arrives on stdout."""
        run = grade(edge_course, submission, output=Path("/dev/stdout"), fmt="json")
        assert run.code == 0, run.stderr
        assert json.loads(run.stdout)["score"] == edge_course.total

    def test_a_terminal_is_written_in_place(self, edge_course, submission):
        """A pseudo-terminal of this test's own (a character device) gets the report written into it."""
        primary, secondary = os.openpty()
        reader = None
        try:
            name = os.ttyname(secondary)
            assert check_output(Path(name)) == -1
            chunks: list[bytes] = []

            def drain() -> None:
                while True:
                    try:
                        chunk = os.read(primary, 1 << 16)
                    except OSError:
                        return
                    if not chunk:
                        return
                    chunks.append(chunk)
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            run = run_grader(edge_course, "grade", str(submission), "--format", "json", "--output", name, cwd=submission)
            assert run.code == 0, run.stderr
        finally:
            # the terminal's last end closed: the reader gets every byte still buffered, then EIO, and
            # stops; closing the primary end first could drop what it had not read yet (a busy machine)
            os.close(secondary)
            if reader is not None:
                reader.join(timeout=60)
            os.close(primary)
        assert reader is not None and not reader.is_alive()
        text = b"".join(chunks).decode().replace("\r\n", "\n")
        assert json.loads(text)["score"] == edge_course.total


class TestModes:
    @pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
    def test_report_follows_the_umask(self, edge_course, submission, umask, expected):
        """A new --output file and a replaced one both get 0666 & ~umask."""
        out = new_folder(edge_course, "modes") / "results.json"
        assert grade(edge_course, submission, output=out, umask=umask).code == 0
        assert mode(out) == expected
        os.chmod(out, 0o600)
        assert grade(edge_course, submission, output=out, umask=umask).code == 0
        assert mode(out) == expected and json.loads(out.read_text())["score"] == edge_course.total

    def test_grade_all_files_follow_the_umask_and_its_cache_stays_private(self, edge_course, submission):
        """Gradebook, feedback, results and report.html: 0644 under umask 022. grade-all prepares
        its cases in memory (no seed cache); whatever it keeps in the cache folder (a walk
        of the shared folders, when it sweeps them) is in a 0700 folder of 0600 files."""
        root = new_folder(edge_course, "class")
        (root / "ann").mkdir()
        for name in ("attention.py", "answers.yaml"):
            (root / "ann" / name).write_bytes((submission / name).read_bytes())
        out, cache = new_folder(edge_course, "graded"), new_folder(edge_course, "cache")
        run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", cwd=root, umask=0o022,
                         env={"MHA_CACHE_DIR": str(cache / "mha")})
        assert run.code == 0, run.stderr
        written = [p for p in out.rglob("*") if p.is_file()]
        assert {p.name for p in written} >= {"gradebook.csv", "ann.txt", "ann.json", "report.html",
                                             "item_analysis.json"}
        assert {p.name: mode(p) for p in written} == {p.name: 0o644 for p in written}
        if (cache / "mha").exists():
            assert mode(cache / "mha") == 0o700
            assert {p.name: mode(p) for p in (cache / "mha").rglob("*")} == {  # the prepared-cases store's folders too
                p.name: 0o700 if p.is_dir() else 0o600 for p in (cache / "mha").rglob("*")}

    def test_the_prepared_course_stays_private(self, edge_course, submission):
        """`mha grade` prepares the assignment on its first run: under umask 022, a 0700 cache
        folder holding one 0600 seed cache, and a 0700 folder of the course files' parsed trees,
        each 0600 (course/yamlio.py: a problem file holds hidden cases)."""
        cache = new_folder(edge_course, "seed-cache")
        run = run_grader(edge_course, "grade", str(submission), "--format", "json", cwd=submission, umask=0o022,
                         env={"MHA_CACHE_DIR": str(cache / "mha")})
        assert run.code == 0, run.stderr
        assert json.loads(run.stdout)["score"] == edge_course.total
        seed_cases = [p for p in (cache / "mha").iterdir() if p.suffix == ".cases"]
        assert mode(cache / "mha") == 0o700 and len(seed_cases) == 1
        kept = cache / "mha" / KEPT_FOLDER
        assert {p.name: mode(p) for p in (cache / "mha").iterdir()} == {
            p.name: 0o700 if p == kept else 0o600 for p in (cache / "mha").iterdir()}
        assert mode(kept) == 0o700 and {mode(p) for p in kept.iterdir()} == {0o600}

    @pytest.mark.parametrize("secret, expected", [(None, 0o644), ("a-course-secret", 0o600)])
    def test_gradescope_zip_is_private_when_it_holds_the_secret(self, cli, monkeypatch, tmp_path, secret, expected):
        """The autograder zip packs course.yaml with the secret: then it is 0600 whatever the umask
        (the zip's making is stubbed here: test_export_gradescope builds real ones)."""
        from grader.exports import gradescope, wheelhouse
        monkeypatch.setattr(wheelhouse, "download", lambda python, **_: {})
        monkeypatch.setattr(gradescope, "build", lambda course, secret, wheels, python, **options: b"PK\x05\x06" + bytes(18))
        if secret:
            monkeypatch.setenv("MHA_COURSE_SECRET", secret)
        else:
            monkeypatch.delenv("MHA_COURSE_SECRET", raising=False)
        old = os.umask(0o022)
        try:
            result = cli("export", "gradescope", "--out", str(tmp_path / "autograder.zip"))
        finally:
            os.umask(old)
        assert result.exit_code == 0, result.output
        assert mode(tmp_path / "autograder.zip") == expected
