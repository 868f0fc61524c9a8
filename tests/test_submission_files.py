"""Links and special files in a submission are never read (grader.grading.student_files).

Each hostile submission is graded through the CLI (`mha grade SUB --format gradescope --output
OUT` in a subprocess, as in test_hostile), as root and as a dropped uid: exit 0, a results file,
the exact score deserved (0 for the file that was refused, full marks for the rest), a message
saying why, no secret or root-only text in any report, no hang, nothing left behind. The same
rules hold for `mha grade-all`, notebooks and the Gradescope zip's run_autograder.
"""
from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.course.loader import load_course
from grader.course.quiz import answer_key
from grader.course.seeds import student_seed
from grader.paths import PACKAGE

from ._edges import (
    ROOT_MODE,
    EdgeCourse,
    deserved,
    edge_course,  # noqa: F401 (a fixture of these tests)
    grade,
    graded_in_every_mode,
    new_folder,
    run_grader,
    scores,
    skip_unless_runnable,
    users,
    write_submission,
)

LINKED = "is a link: it was not read (submit the file itself)"
SHADOW = Path("/etc/shadow")


def _shadow_text() -> list[str]:
    """Fields of /etc/shadow that must never appear in a report (empty if it cannot be read)."""
    try:
        lines = SHADOW.read_text().splitlines()
    except OSError:
        return []
    return [line.split(":")[0] + ":" for line in lines if line] + [f for line in lines for f in line.split(":")[1:2]
                                                                  if len(f) > 3]


@dataclass(frozen=True)
class Attack:
    name: str
    make: Callable[[EdgeCourse, Path], None]   # lays out the submission folder
    lost: tuple[str, ...]                  # problems and quiz items it must score 0 on ("code", "quiz": all)
    says: str                              # text the results must hold
    root_only: bool = False


def _link(name: str, target: Callable[[EdgeCourse], Path]):
    """The model answers and the key, with `name` replaced by a link to `target`."""
    def make(edge_course: EdgeCourse, folder: Path) -> None:
        write_submission(folder, answers=edge_course.key)
        (folder / name).unlink()
        (folder / name).symlink_to(target(edge_course))
    return make


def _fifo(name: str):
    def make(edge_course: EdgeCourse, folder: Path) -> None:
        write_submission(folder, answers=edge_course.key)
        (folder / name).unlink()
        os.mkfifo(folder / name)
    return make


def _folder_named_attention(edge_course: EdgeCourse, folder: Path) -> None:
    write_submission(folder, answers=edge_course.key)
    (folder / "attention.py").unlink()
    (folder / "attention.py").mkdir()
    (folder / "attention.py" / "attention.py").write_text((edge_course.base / "solutions" / "attention.py").read_text())


def _too_large(edge_course: EdgeCourse, folder: Path) -> None:
    write_submission(folder, source="x = 1\n" + "#" * (1 << 20), answers=edge_course.key)


def _inner_link(edge_course: EdgeCourse, folder: Path) -> None:
    """answers.yaml linked to a file in the same folder: still a link, still refused."""
    write_submission(folder, answers=edge_course.key)
    (folder / "answers.yaml").rename(folder / "mine.yaml")
    (folder / "answers.yaml").symlink_to("mine.yaml")


def _notebook_link(edge_course: EdgeCourse, folder: Path) -> None:
    elsewhere = new_folder(edge_course, "elsewhere")
    (elsewhere / "attention.ipynb").write_text('{"cells": [], "nbformat": 4}')
    write_submission(folder, answers=edge_course.key)
    (folder / "attention.py").unlink()
    (folder / "attention.ipynb").symlink_to(elsewhere / "attention.ipynb")


def _notebook_answers_link(edge_course: EdgeCourse, folder: Path) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "source": (edge_course.base / "solutions" / "attention.py").read_text()}]
    import json
    (folder / "attention.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}))
    (folder / "answers.yaml").symlink_to(SHADOW)


def _notebook_lone_surrogates(edge_course: EdgeCourse, folder: Path) -> None:
    """A notebook whose code and answer cells hold lone surrogates (JSON escapes no UTF-8 encoder
    takes): reading it raised UnicodeEncodeError, "the autograder failed"."""
    import json

    import yaml
    code = (edge_course.base / "solutions" / "attention.py").read_text() + "# \ud800\n"
    answers = yaml.safe_dump(edge_course.key) + 'why_several_heads: "one head \udfff cannot"\n'
    cells = [{"cell_type": "code", "metadata": {}, "source": code},
             {"cell_type": "raw", "metadata": {"tags": ["mha-answers"]}, "source": answers}]
    (folder / "attention.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}))


CODE, QUIZ, NOTHING = ("code",), ("quiz",), ()
ATTACKS = (
    Attack("code_to_reference", _link("attention.py", lambda c: PACKAGE / "course" / "reference.py"), CODE,
           f"attention.py {LINKED}"),
    Attack("code_to_solutions", _link("attention.py", lambda c: c.base / "solutions" / "attention.py"), CODE,
           f"attention.py {LINKED}"),
    Attack("code_to_course_secret", _link("attention.py", lambda c: c.exercises / "course.yaml"), CODE,
           f"attention.py {LINKED}"),
    Attack("answers_to_shadow", _link("answers.yaml", lambda c: SHADOW), QUIZ, f"answers.yaml {LINKED}"),
    Attack("answers_to_kmsg", _link("answers.yaml", lambda c: Path("/proc/kmsg")), QUIZ, f"answers.yaml {LINKED}"),
    Attack("answers_inner_link", _inner_link, QUIZ, f"answers.yaml {LINKED}"),
    Attack("code_fifo", _fifo("attention.py"), CODE, "attention.py is not a regular file (a FIFO): it was not read"),
    Attack("answers_fifo", _fifo("answers.yaml"), QUIZ, "answers.yaml is not a regular file (a FIFO): it was not read"),
    Attack("code_folder", _folder_named_attention, CODE,
           "attention.py is not a regular file (a folder): it was not read"),
    Attack("code_too_large", _too_large, CODE, f"attention.py is too large (more than {1 << 20} bytes)"),
    Attack("notebook_link", _notebook_link, CODE, f"attention.ipynb {LINKED}"),
    Attack("notebook_answers_link", _notebook_answers_link, QUIZ, f"answers.yaml {LINKED}"),
    Attack("notebook_lone_surrogates", _notebook_lone_surrogates, NOTHING, '"score": '),
)


@pytest.fixture(scope="module")
def graded(edge_course):
    """Every attack graded in every mode (root and a dropped uid), three at a time."""
    return graded_in_every_mode(edge_course, ATTACKS, lambda edge_course, attack, folder: attack.make(edge_course, folder),
                                timeout=5, workers=3)


@pytest.mark.parametrize("user", users(), ids=lambda u: "root" if u is None and ROOT_MODE else "non-root")
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_link_or_special_file_is_not_read(edge_course, graded, attack, user):
    """Exit 0, results written, 0 for the refused file and full marks for the rest, a message
    saying why, no secret or root-only text anywhere, nothing left in the grader's temporary folder."""
    skip_unless_runnable(user)
    outcome = graded[(attack, user)]
    if isinstance(outcome, BaseException):
        raise outcome
    run = outcome
    assert run.code == 0, run.stderr
    data = run.results()
    lost = tuple(edge_course.points) if attack.lost == CODE else tuple(edge_course.quiz_points) if attack.lost \
        else ()
    assert scores(data) == deserved(edge_course, lost)
    assert data["score"] == sum(deserved(edge_course, lost).values())
    report = run.report()
    assert attack.says in report
    assert edge_course.secret not in report
    assert "unknown quiz item" not in report
    assert not any(text in report for text in _shadow_text())
    assert sorted(os.listdir(run.output.parent)) == ["results.json"]
    assert run.left == [] and run.processes == []  # the private copy and the session's folder are gone


def test_grade_all_refuses_links_and_special_files(edge_course, tmp_path):
    """One class, one mechanism: a linked attention.py, a linked student folder, a linked
    sub-folder, answers.yaml linked to /etc/shadow and a FIFO each cost what they hold; the
    honest classmate gets full marks; nothing secret reaches the gradebook or feedback."""
    root = new_folder(edge_course, "class")
    for student in ("ann", "cy", "dee", "eve", "fay"):
        (root / student).mkdir()
    (root / "ann" / "attention.py").symlink_to(edge_course.base / "solutions" / "attention.py")
    (root / "ben").symlink_to(edge_course.base / "solutions")
    write_submission(root / "cy", answers=edge_course.key)
    (root / "cy" / "answers.yaml").unlink()
    (root / "cy" / "answers.yaml").symlink_to(SHADOW)
    (root / "dee" / "hw").symlink_to(edge_course.base / "solutions")
    os.mkfifo(root / "eve" / "attention.py")
    write_submission(root / "fay", answers=answer_key(load_course(edge_course.exercises).quiz,
                                                      student_seed(edge_course.secret, "fay")))  # her own numbers
    (root / "fay" / "notes").mkdir()
    for folder, _, _ in os.walk(root):
        os.chmod(folder, 0o755)
    out = new_folder(edge_course, "graded")
    run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "2", "--timeout", "5", cwd=root)
    assert run.code == 0, run.stderr
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {r["student"]: (r["status"], float(r["total"])) for r in csv.DictReader(handle)}
    problems, quiz = sum(edge_course.points.values()), sum(edge_course.quiz_points.values())
    assert rows == {"ann": ("empty", 0.0), "ben": ("empty", 0.0), "cy": ("graded", problems),
                    "dee": ("empty", 0.0), "eve": ("empty", 0.0), "fay": ("graded", problems + quiz)}
    feedback = {p.stem: p.read_text() for p in (out / "feedback").iterdir()}
    assert f"attention.py {LINKED}" in feedback["ann"]
    assert f"ben {LINKED}" in feedback["ben"]
    assert f"answers.yaml {LINKED}" in feedback["cy"]
    assert "no attention.py was submitted (found: hw)" in feedback["dee"]
    assert "attention.py is not a regular file (a FIFO): it was not read" in feedback["eve"]
    everything = run.stdout + run.stderr + "".join(p.read_text() for p in out.rglob("*") if p.suffix in
                                                   (".txt", ".json", ".csv", ".html"))
    assert edge_course.secret not in everything and not any(text in everything for text in _shadow_text())


@pytest.mark.root  # run_autograder runs as root on Gradescope
def test_gradescope_run_autograder_refuses_links(edge_course, tmp_path, course):
    """The Gradescope zip's own run_autograder (which calls `mha grade`): attention.py linked to
    the reference and answers.yaml linked to /etc/shadow score 0 each, with a results.json."""
    from .test_export_gradescope import autograder, run_autograder
    root = autograder(tmp_path, course, None)
    (root / "submission" / "attention.py").symlink_to(root / "source" / "grader" / "course" / "reference.py")
    (root / "submission" / "answers.yaml").symlink_to(SHADOW)
    data = run_autograder(root, {})
    assert data["score"] == 0 and {t.get("score") for t in data["tests"]} == {0, None}  # None: written, by hand
    outputs = data["output"] + "".join(t["output"] for t in data["tests"])
    assert f"attention.py {LINKED}" in outputs and f"answers.yaml {LINKED}" in outputs
    assert "unknown quiz item" not in outputs and not any(text in outputs for text in _shadow_text())


def test_link_to_the_submission_itself_is_refused(edge_course):
    """`mha grade link.py` names a link: the code is not read (0 on the problems), exit 0."""
    folder = new_folder(edge_course, "direct")
    (folder / "real.py").write_text((edge_course.base / "solutions" / "attention.py").read_text())
    (folder / "link.py").symlink_to(folder / "real.py")
    run = grade(edge_course, folder / "link.py")
    assert run.code == 0, run.stderr
    assert scores(run.results()) == deserved(edge_course, tuple(edge_course.points), quiz=False)
    assert f"link.py {LINKED}" in run.report()


def test_missing_submission_is_still_a_usage_error(edge_course):
    """Nothing at all to grade is exit 2 with a Gradescope results.json saying so."""
    folder = new_folder(edge_course, "missing")
    run = grade(edge_course, folder / "nothere.py")
    assert run.code == 2
    assert run.results()["tests"][0]["name"] == "submission not gradable"
    assert "nothere.py: no such file or folder" in run.report()
