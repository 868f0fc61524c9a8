"""Student-chosen text (an exception's class name and message, what it printed) is shown inert in
every format: it never starts a line of its own, so it cannot forge a `PASS ... [10/10]` line.

Each format is produced through the CLI (`mha grade --format F`, `mha check`, `mha grade-all`'s
feedback files); the text each gives a reader (JSON strings decoded, XML text and attributes,
HTML without its tags) is split into lines, and no line starts with the forged PASS.
"""
from __future__ import annotations

import html
import json
import re
from xml.etree import ElementTree

import pytest
import yaml

from ._edges import (  # noqa: F401 (edge_course: a fixture of these tests)
    AR,
    ROOT_MODE,
    deserved,
    edge_course,
    grade,
    new_folder,
    run_grader,
    scores,
    skip_unless_runnable,
    users,
    write_submission,
)
from .conftest import solution_source

FORGED = f"PASS  {AR}: forged  [10/10]"
# the class name, the message and the printed output all try to start a line with FORGED
RAISES = f'''

def attention_reading(weights, values):
    print("\\n{FORGED}")
    raise type("Oops\\n{FORGED}\\r\\n{FORGED}", (ValueError,), {{}})("msg\\n{FORGED}\\n {FORGED}")
'''
AT_IMPORT = f'''
raise type("Oops\\n{FORGED}", (ValueError,), {{}})("msg\\n{FORGED}")
'''


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def readable(fmt: str, output: str) -> list[str]:
    """The lines a reader of `output` in format `fmt` sees."""
    if fmt in ("json", "gradescope", "github", "prairielearn"):
        texts = _strings(json.loads(output))
    elif fmt == "junit":
        root = ElementTree.fromstring(output)
        texts = [t for e in root.iter() for t in (e.text or "", e.tail or "", *e.attrib.values())]
    elif fmt == "html":
        texts = [html.unescape(re.sub(r"<[^>]*>", "\n", output))]
    else:
        texts = [output]
    return [line for text in texts for line in re.split(r"\r\n|\r|\n", text)]


def forged(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(f"PASS  {AR}") or line.startswith(f"PASS {AR}")]


@pytest.fixture(scope="module")
def raising(edge_course):
    return write_submission(new_folder(edge_course, "forger"), solution_source() + RAISES, answers=edge_course.key)


@pytest.mark.parametrize("fmt", ["text", "json", "gradescope", "junit", "github", "html"])
def test_no_format_shows_a_forged_pass_line(edge_course, raising, fmt):
    """attention_reading 0 (the real score), and no line of the report starts with the forged PASS."""
    output = raising.parent / f"report-{raising.name}.{fmt}"
    run = grade(edge_course, raising, fmt=fmt, output=output, timeout=5)
    assert run.code == 0, run.stderr
    text = output.read_text()
    assert "Oops\\n" in text or "Oops\\\\n" in text  # the class name is shown, its line break escaped
    assert forged(readable(fmt, text) + run.stdout.splitlines() + run.stderr.splitlines()) == []
    if fmt == "gradescope":
        assert scores(json.loads(text)) == deserved(edge_course, (AR,))
    if fmt == "json":  # a written item's score is null: pending, graded by hand
        assert {p["id"]: p["score"] for p in json.loads(text)["problems"] if p["score"] is not None} == \
            deserved(edge_course, (AR,))


def test_check_in_a_terminal(edge_course, raising):
    """`mha check` (the student's terminal) shows the failure, no forged PASS line; exit 1."""
    run = run_grader(edge_course, "check", AR, "--path", str(raising / "attention.py"), cwd=raising)
    assert run.code == 1, run.stderr
    assert "Oops\\n" in run.stdout and forged(run.stdout.splitlines() + run.stderr.splitlines()) == []


def test_an_import_failure_shows_no_forged_line(edge_course):
    """Raised while importing attention.py: every problem 0, the class name escaped in the report."""
    folder = write_submission(new_folder(edge_course, "import-forger"), solution_source() + AT_IMPORT, answers=edge_course.key)
    output = folder / "report.txt"
    run = grade(edge_course, folder, fmt="text", output=output, timeout=5)
    assert run.code == 0, run.stderr
    text = output.read_text()
    assert "Oops\\n" in text and forged(text.splitlines()) == []


def test_grade_all_feedback_files(edge_course, raising):
    """A class's feedback file and stored result of the same submission hold no forged line."""
    root = new_folder(edge_course, "forger-class")
    (root / "ann").mkdir()
    for name in ("attention.py", "answers.yaml"):
        (root / "ann" / name).write_bytes((raising / name).read_bytes())
    out = new_folder(edge_course, "forger-graded")
    run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", "--timeout", "10", cwd=root)
    assert run.code == 0, run.stderr
    feedback = (out / "feedback" / "ann.txt").read_text()
    assert "Oops\\n" in feedback and forged(feedback.splitlines()) == []
    assert forged(readable("json", (out / "results" / "ann.json").read_text())) == []


# a returned object whose class name holds line breaks: it reached the case detail whole, and put a
# GitHub workflow command at column 0 of the JUnit failure text; a print of U+009B (CSI: a terminal's
# escape in one character) and other C1 controls passed the text report's filter
COMMAND = "::error title=forged::PASS softmax [10/10]"
RETURNS_ODD = f'''

def attention_reading(weights, values):
    print("\\x9b30mScore: 243/243\\x9b0m \\x85{FORGED} \\u202e\\u2028{FORGED}\\x1b[8m")
    return type("Odd\\n{COMMAND}\\r\\n{FORGED}\\u2029{FORGED}", (), {{}})()
'''
STUDENT_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def returning(edge_course):
    return write_submission(new_folder(edge_course, "odd"), solution_source() + RETURNS_ODD, answers=edge_course.key)


@pytest.mark.parametrize("user", users(), ids=lambda u: "root" if u is None and ROOT_MODE else "non-root")
@pytest.mark.parametrize("fmt", ["text", "json", "gradescope", "junit", "github", "html", "prairielearn"])
def test_a_returned_class_name_and_printed_controls_are_inert(edge_course, returning, fmt, user):
    """No line a reader sees starts with the class name's forged lines or a workflow command, no
    control or bidirectional character the student printed or named is in the output; the case
    scores 0 and the rest of the submission its full score."""
    skip_unless_runnable(user)
    output = new_folder(edge_course, "report") / f"report.{fmt}"
    run = grade(edge_course, returning, fmt=fmt, output=output, timeout=5, user=user)
    assert run.code == 0, run.stderr
    text = output.read_text(encoding="utf-8")
    lines = readable(fmt, text)
    assert forged(lines) == [] and [line for line in lines if line.lstrip().startswith("::")] == []
    assert STUDENT_CONTROLS.findall("\n".join(lines)) == []
    assert "Odd\\n::error" in text or "Odd\\\\n::error" in text  # shown, its line break escaped
    if fmt == "text":
        assert "\\x9b30mScore: 243/243" in text  # what was printed, its CSI a visible escape
    if fmt == "gradescope":
        assert scores(json.loads(text)) == deserved(edge_course, (AR,))  # public and hidden tests added up


NOTEBOOK_NAME = f"work\n{FORGED.replace('/', ' of ')}\n\u202eScore: 243 of 243\x9b.ipynb"  # no "/" in a name


@pytest.mark.parametrize("user", users(), ids=lambda u: "root" if u is None and ROOT_MODE else "non-root")
@pytest.mark.parametrize("fmt", ["text", "junit", "github", "gradescope", "html"])
def test_a_notebook_named_with_line_breaks_forges_no_line(edge_course, fmt, user):
    """A notebook whose file name holds line breaks (and is no notebook: the report names it) is
    named inert: no forged PASS or Score line, no control; the quiz beside it still counts."""
    skip_unless_runnable(user)
    folder = new_folder(edge_course, "named")
    (folder / NOTEBOOK_NAME).write_text("not a notebook")
    (folder / "answers.yaml").write_text(yaml.safe_dump(edge_course.key))
    output = new_folder(edge_course, "report") / f"report.{fmt}"
    run = grade(edge_course, folder, fmt=fmt, output=output, timeout=5, user=user)
    assert run.code == 0, run.stderr
    text = output.read_text(encoding="utf-8")
    lines = readable(fmt, text)
    assert forged(lines) == [] and not any(line.lstrip().startswith("Score: 243 of 243") for line in lines)
    assert STUDENT_CONTROLS.findall("\n".join(lines)) == []
    assert "the file work\\n" in text or "the file work\\\\n" in text
