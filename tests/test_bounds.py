"""Student data is decoded within bounds, and the grader's memory stays bounded, whatever is sent.

Each case is a hostile submission graded through the CLI (`mha grade SUB --format gradescope
--output OUT` in a subprocess): exit 0 (never "autograder failed"), the exact score deserved
(a decoding problem costs that answer: the problem or quiz item it is in), nothing left in the
grader's temporary folder, and the grader process's own peak memory (VmHWM) under 300 MB.
Student code reaches the answer pipe as any hostile code could: through the frame that called
it (the worker's `run`, which holds the request's `seq` and the pipe's number).
"""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.paths import remove_tree
from grader.sandbox.codec import ANSWER, Bounds, DecodeError, loads_bounded, read_event

from ._edges import (
    AR,
    ROOT_MODE,
    EdgeCourse,
    deserved,
    edge_course,  # noqa: F401 (a fixture of these tests)
    grade,
    graded_in_every_mode,
    new_folder,
    scores,
    skip_unless_runnable,
    users,
    write_submission,
)
from .conftest import solution_source

GRADER_MB = 300  # the grader process's peak, whatever the submission sends

# answer lines written straight to the answer pipe from inside attention_reading
RAW_LINE = '''

_solved_ar = attention_reading


def attention_reading(weights, values):
    import os, sys
    caller = sys._getframe(1)  # the worker's run(): the request's seq, the case, the pipe
    head = b'{"event": "case", "id": %d, "ok": true, ' % caller.f_locals["case"]["id"]
    os.write(caller.f_globals["RESULT_FD"], head + LINE(caller) + b', "seq": %d}\\n' % caller.f_locals["seq"])
    return _solved_ar(weights, values)
'''

LINES = {
    # 100,000 nested arrays: the grader's JSON parser recursed until RecursionError
    "nested_arrays": 'LINE = lambda caller: b\'"value": \' + b"[" * 100000 + b"]" * 100000',
    # a right answer whose "seconds" has 400 digits: float() of it overflowed
    "long_seconds": ('LINE = lambda caller: (\'"value": \' + __import__("json").dumps(caller.f_globals["encode"]('
                     '_solved_ar(*caller.f_locals["args"]))) + \', "seconds": \' + "7" * 400).encode()'),
    # 18 MiB of {} objects: the grader went from 35 MB to 520 MB
    "empty_objects_18mib": 'LINE = lambda caller: b\'"value": [\' + b"{}," * (6 << 20) + b"{}]"',
    # 63 MiB of them reached 1.7 GB
    "empty_objects_63mib": 'LINE = lambda caller: b\'"value": [\' + b"{}," * (21 << 20) + b"{}]"',
    # under the byte bound, over the value bound
    "empty_objects_4mib": 'LINE = lambda caller: b\'"value": [\' + b"{}," * ((4 << 20) // 3 - 100) + b"{}]"',
    # an integer of 5,000 digits in the value: int() refuses more than 4,300
    "long_integer": 'LINE = lambda caller: b\'"value": {"t": "int", "v": "\' + b"9" * 5000 + b\'"}\'',
    # zero bytes for a shape numpy refuses: reshape raised ValueError past the decoder (exit 4)
    "refused_shape": ('LINE = lambda caller: b\'"value": {"t": "array", "dtype": "float64", "shape": [0, 1\' '
                      '+ b"0" * 39 + b\'], "b64": ""}\''),
}


@dataclass(frozen=True)
class Sent:
    name: str
    lost: tuple[str, ...]   # problems it must score 0 on
    says: str = ""


SENT = (
    Sent("nested_arrays", (AR,), "the process sent an unreadable answer (the answer is nested too deeply"),
    Sent("long_seconds", ()),  # the answer is right: the field is ignored, the case passes
    Sent("empty_objects_18mib", (AR,), "the process sent an unreadable answer (an answer larger than 4 MiB)"),
    Sent("empty_objects_63mib", (AR,), "the process sent an unreadable answer (an answer larger than 4 MiB)"),
    Sent("empty_objects_4mib", (AR,), "the process sent an unreadable answer (the answer holds too many values"),
    Sent("long_integer", ()),  # read as a bad answer, then the worker's own right answer for the same case
    Sent("refused_shape", ()),  # a DecodeError like long_integer's: never "the autograder failed"
)


def _send(edge_course: EdgeCourse, case: Sent, folder: Path) -> None:
    write_submission(folder, solution_source() + "\n\n" + LINES[case.name] + RAW_LINE, answers=edge_course.key)


@pytest.fixture(scope="module")
def sent(edge_course):
    """Every raw answer line graded in every mode, two at a time (the large ones take memory)."""
    return graded_in_every_mode(edge_course, SENT, _send, timeout=20, workers=2)


@pytest.mark.parametrize("user", users(), ids=lambda u: "root" if u is None and ROOT_MODE else "non-root")
@pytest.mark.parametrize("case", SENT, ids=lambda s: s.name)
def test_answer_line_out_of_bounds_costs_its_problem(edge_course, sent, case, user):
    """Exit 0, the exact score, the reason shown, nothing left, the grader under 300 MB."""
    skip_unless_runnable(user)
    run = sent[(case, user)]
    if isinstance(run, BaseException):
        raise run
    assert run.code == 0, run.stderr
    data = run.results()
    assert scores(data) == deserved(edge_course, case.lost)
    report = run.report()
    assert case.says in report and "autograder failed" not in report
    assert run.left == [] and run.processes == []
    assert 0 < run.peak_mb < GRADER_MB


def test_a_right_submission_stays_well_under_the_bound(edge_course):
    """The reference point for the figures above: an honest submission's grader peak."""
    run = grade(edge_course, write_submission(new_folder(edge_course, "honest"), answers=edge_course.key))
    assert run.code == 0 and run.results()["score"] == edge_course.total
    assert 0 < run.peak_mb < GRADER_MB


class TestQuizNumbers:
    @pytest.mark.parametrize("digits", [401, 4301])
    def test_a_huge_number_costs_that_item(self, edge_course, digits):
        """A numeric answer of 401 digits (beyond a float) or 4,301 (beyond int()) is that item's 0
        with a message; every other item and problem is graded as usual."""
        folder = new_folder(edge_course, f"quiz-{digits}")
        write_submission(folder, answers={**edge_course.key, "attention_budget": 0})
        text = (folder / "answers.yaml").read_text().replace("attention_budget: 0", "attention_budget: " + "9" * digits)
        (folder / "answers.yaml").write_text(text)
        run = grade(edge_course, folder)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, ("attention_budget",))
        assert "answers.yaml:" in run.report() and "answer must be a finite number (got inf)" in run.report()

    def test_a_huge_number_for_a_choice_item(self, edge_course):
        """A 500-digit number where a letter is expected is a wrong form, said briefly."""
        folder = new_folder(edge_course, "quiz-choice")
        write_submission(folder, answers={**edge_course.key, "pruning": 0})
        text = (folder / "answers.yaml").read_text().replace("pruning: 0", "pruning: " + "9" * 500)
        (folder / "answers.yaml").write_text(text)
        run = grade(edge_course, folder)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, ("pruning",))
        assert "answer must be one letter from a to" in run.report() and "9" * 100 not in run.report()


class TestNotebooks:
    def test_deeply_nested_notebook_costs_the_problems(self, edge_course):
        """A notebook of 100,000 nested arrays: every problem 0 saying why, the quiz counts, exit 0."""
        folder = new_folder(edge_course, "nested-notebook")
        (folder / "attention.ipynb").write_text('{"cells": ' + "[" * 100000 + "]" * 100000 + "}")
        write_submission(folder, answers=edge_course.key)
        (folder / "attention.py").unlink()
        run = grade(edge_course, folder)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course, tuple(edge_course.points))
        assert "attention.ipynb: not a Jupyter notebook (the notebook is nested too deeply" in run.report()

    def test_cell_too_deep_for_the_parser(self, edge_course):
        """A cell `1+1+...+1` 30,000 long (ast.parse recursion) is not Python the grader can read:
        it is left out and, defining no function, costs nothing; the report names it; exit 0."""
        cells = [{"cell_type": "code", "metadata": {}, "source": solution_source()},
                 {"cell_type": "code", "metadata": {}, "source": "x = " + "1+" * 30000 + "1"}]
        folder = new_folder(edge_course, "deep-cell")
        (folder / "attention.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}))
        (folder / "answers.yaml").write_text(json.dumps(edge_course.key))
        run = grade(edge_course, folder)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course)
        assert "cell 2: too deeply nested (not valid Python: it was left out" in run.report()
        assert "autograder failed" not in run.report()


NESTED_FOLDERS = '''

_solved_ar = attention_reading


def attention_reading(weights, values):
    import os
    for base in BASES:
        fd = os.open(base, os.O_RDONLY)
        for _ in range(3000):  # deeper than any path may be long
            try:
                os.mkdir("d", dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        open(os.open("deepest", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w").close()
        os.close(fd)
    return _solved_ar(weights, values)
'''


@pytest.mark.parametrize("user", users(), ids=lambda u: "root" if u is None and ROOT_MODE else "non-root")
def test_thousands_of_nested_folders_are_deleted(edge_course, user):
    """3,000 nested folders in the student's working folder (and, as root, in /tmp) are all
    deleted after the session (shutil.rmtree recursed too deep and left them); full marks."""
    skip_unless_runnable(user)
    token = f"mha-deep-{secrets.token_hex(6)}"
    shared = Path("/tmp") / token
    bases = ["."] + ([str(shared)] if user is None and ROOT_MODE else [])
    folder = new_folder(edge_course, "nested-folders")
    prelude = f"BASES = {bases!r}\nimport os as _os\n" + (f"_os.makedirs({str(shared)!r}, exist_ok=True)\n"
                                                           if len(bases) > 1 else "")
    write_submission(folder, solution_source() + "\n\n" + prelude + NESTED_FOLDERS, answers=edge_course.key)
    try:
        run = grade(edge_course, folder, user=user, timeout=30)
        assert run.code == 0, run.stderr
        assert scores(run.results()) == deserved(edge_course)
        assert run.left == [] and run.processes == []
        assert not os.path.lexists(shared)
    finally:
        remove_tree(shared)


def test_nested_folders_in_the_submission_itself(edge_course):
    """A submission folder holding 3,000 nested folders beside attention.py grades as usual."""
    folder = write_submission(new_folder(edge_course, "deep-upload"), answers=edge_course.key)
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    run = grade(edge_course, folder)
    assert run.code == 0, run.stderr
    assert scores(run.results()) == deserved(edge_course)


class TestLoadsBounded:
    """The bounds checked on the bytes, before anything is parsed."""

    BOUNDS = Bounds(bytes=1000, nodes=50, depth=8, digits=5)

    @pytest.mark.parametrize("text, message", [
        ("[" * 20 + "]" * 20, "the data is nested too deeply (more than 8 levels)"),
        ("[" + "1," * 60 + "1]", "the data holds too many values (more than 50)"),
        ('"' + "x" * 1000 + '"', "the data is too large (1,002 bytes; at most 1,000)"),
        ("[1, 2", "the data is not valid JSON (Expecting ',' delimiter: line 1 column 6 (char 5))"),
    ])
    def test_out_of_bounds_is_refused_with_the_bound(self, text, message):
        with pytest.raises(DecodeError) as caught:
            loads_bounded(text, self.BOUNDS)
        assert str(caught.value) == message

    def test_brackets_and_commas_inside_strings_do_not_count(self):
        """Strings may hold any brackets (an error message, a repr): only structure counts."""
        text = json.dumps({"message": "[" * 300 + "," * 300, "v": [[1]]})
        assert loads_bounded(text, self.BOUNDS)["v"] == [[1]]

    def test_long_integers_stay_text(self):
        """An integer longer than the digit bound is never converted (int() of 5,000 digits fails)."""
        value = loads_bounded('{"n": ' + "7" * 5000 + ', "m": 12345}', Bounds(10000, 50, 8, 5))
        assert value["m"] == 12345 and not isinstance(value["n"], int) and value["n"] == "7" * 5000

    def test_a_legitimate_answer_fits(self):
        """A float64 array of 390,000 numbers (base64) is within the answer bounds."""
        import base64
        data = base64.b64encode(bytes(8 * 390_000)).decode()
        line = json.dumps({"event": "case", "id": 0, "ok": True, "seq": 1,
                           "value": {"t": "array", "dtype": "float64", "shape": [390_000], "b64": data}})
        assert len(line) < ANSWER.bytes
        assert read_event(line.encode())["event"] == "case"

    def test_garbled_says_why(self):
        assert read_event(b"[" * 100 + b"]" * 100) == {
            "event": "garbled", "why": "the answer is nested too deeply (more than 64 levels)"}
        assert read_event(b"[1]") == {"event": "garbled", "why": "the answer is not an object"}


def test_the_leftover_process_check_finds_one(tmp_path):
    """The helper behind `run.processes` sees a process working in a folder (and then none)."""
    import subprocess
    import sys

    from ._edges import working_in
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    try:
        assert [line.split()[0] for line in working_in(tmp_path)] == [str(sleeper.pid)]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    assert working_in(tmp_path) == []
