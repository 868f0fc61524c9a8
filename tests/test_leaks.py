"""Hidden cases show only the kind of failure, and student text is inert wherever it is rendered.

A submission that tries every channel to carry a hidden case's inputs into its own feedback (an
exception's message, its class's name, what it prints, a returned string, its exit code) is
graded through the CLI in every report format and by `mha grade-all`: no report holds the
marker it wrote. Student text written to look like report structure (a closing code fence, a
Markdown heading and image, a workflow command, a fake score line) renders as plain text in
Gradescope's Markdown, GitHub's log and the text report.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grader.paths import remove_tree
from grader.reports.gradescope import fenced

from ._edges import AR, CR, PS, deserved, grade, make_course, new_folder, run_grader, scores, write_submission
from .conftest import isolation_missing, solution_source

LEAKY = '''

import os as _os
import sys as _sys
_calls = []


def attention_reading(weights, values):
    _calls.append(1)
    secret = "LEAK" + repr(values.tolist())[:60]
    n = len(_calls)
    if n == 1:
        print(secret)
        raise ValueError(secret)
    if n == 2:
        _sys.stderr.write(secret + "\\n")
        raise type("LEAK_" + str(abs(int(values.sum() * 1000))), (KeyError,), {})(secret)
    if n == 3:
        return secret
    if n == 4:
        print(secret)
        return values[0] * float("nan")
    _os._exit(40 + int(abs(values[0, 0]) * 10) % 10)
'''


@pytest.fixture(scope="module")
def edge_course():
    """The edges course with every case of attention_reading hidden."""
    edge_course = make_course()
    problem = edge_course.exercises / "problems" / f"{AR}.yaml"
    problem.write_text(problem.read_text().replace("visibility: public", "visibility: hidden"))
    yield edge_course
    remove_tree(edge_course.base)


@pytest.fixture(scope="module")
def leaky(edge_course) -> Path:
    return write_submission(new_folder(edge_course, "leaky"), solution_source() + LEAKY, answers=edge_course.key)


@pytest.mark.parametrize("fmt", ["text", "json", "gradescope", "junit", "github"])
def test_hidden_cases_show_only_the_kind_of_failure(edge_course, leaky, fmt):
    """No marker, exit code or exception text of a hidden case in any report format."""
    output = new_folder(edge_course, f"out-{fmt}") / "report"
    run = grade(edge_course, leaky, output=output, fmt=fmt, timeout=5)
    assert run.code == 0, run.stderr
    report = run.report()
    assert "LEAK" not in report
    assert not any(f"code {n}" in report for n in range(40, 50))
    assert run.left == [] and run.processes == []
    if fmt == "json":
        cases = next(p for p in json.loads(output.read_text())["problems"] if p["id"] == AR)["cases"]
        summaries = [c["summary"] for c in cases]
        assert summaries[:5] == ["raised ValueError", "raised KeyError", "wrong type", "wrong shape", "crashed"]
        assert all(s.startswith("crashed") for s in summaries[5:])  # the cases after the process died
        assert {c["detail"] for c in cases} == {""} and {c["inputs"] for c in cases} == {""}
    if fmt == "gradescope":
        assert scores(json.loads(output.read_text())) == deserved(edge_course, (AR,))


def test_grade_all_feedback_and_results_hold_no_hidden_text(edge_course, leaky):
    """The same submission in a class: its feedback file and stored result hold no marker."""
    root = new_folder(edge_course, "class")
    (root / "ann").mkdir()
    for name in ("attention.py", "answers.yaml"):
        (root / "ann" / name).write_bytes((leaky / name).read_bytes())
    out = new_folder(edge_course, "graded")
    run = run_grader(edge_course, "grade-all", str(root), "--out", str(out), "--jobs", "1", "--timeout", "5", cwd=root)
    assert run.code == 0, run.stderr
    written = "".join(p.read_text() for p in out.rglob("*") if p.suffix in (".txt", ".json", ".csv", ".html"))
    assert "ann" in (out / "gradebook.csv").read_text()
    assert "LEAK" not in written + run.stdout + run.stderr


FAKE = "```\\n# All tests passed\\n![ok](https://evil.example/pixel.png)\\n::error::hacked\\nScore: 142/142 (100%)"
FAKING = f'''

def predict_shapes(seq_len, d_model, num_heads):
    raise ValueError("{FAKE}")
'''


@pytest.fixture(scope="module")
def faking(edge_course) -> Path:
    """A submission whose exception message (shown: the first case of predict_shapes is public)
    tries to close the code fence and add a heading, an image, a workflow command, a score."""
    return write_submission(new_folder(edge_course, "faking"), solution_source() + FAKING, answers=edge_course.key)


def test_gradescope_markdown_stays_inert(edge_course, faking):
    """Rendered as CommonMark, Gradescope's outputs hold no heading, image or link: only code."""
    markdown_it = pytest.importorskip("markdown_it")
    run = grade(edge_course, faking)
    assert run.code == 0, run.stderr
    data = run.results()
    shown = [data["output"]] + [t["output"] for t in data["tests"]]
    assert any("All tests passed" in text for text in shown)  # the text is there, as text
    parser = markdown_it.MarkdownIt("commonmark")
    for text in shown:
        html = parser.render(text)
        assert "<h1" not in html and "<img" not in html and "<a " not in html


@pytest.mark.parametrize("text", ["```", "````\n```\n````", "a ``` b\n```` c", "`" * 40, "~~~\n# x"])
def test_fence_is_longer_than_any_run_of_backticks(text):
    """Nothing inside `fenced` can close it: CommonMark renders exactly one code block."""
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark").parse(fenced(text + "\n# Heading"))
    assert [t.type for t in tokens] == ["fence"] and tokens[0].content == text + "\n# Heading\n"


def test_github_messages_and_text_report_stay_inert(edge_course, faking):
    """No line of a GitHub message reads as a workflow command; the text report has no line of
    the student's own (the fake score stays inside the exception's line)."""
    out = new_folder(edge_course, "github") / "result.json"
    run = grade(edge_course, faking, output=out, fmt="github")
    assert run.code == 0, run.stderr
    messages = [t["message"] for t in json.loads(out.read_text())["tests"]]
    assert any("::error::hacked" in m for m in messages)
    assert not any(line.lstrip().startswith("::") for m in messages for line in m.splitlines())
    text = grade(edge_course, faking, fmt="text").stdout
    assert not any(line.startswith(("Score: 142", "# All tests", "::")) for line in text.splitlines())
    flat = " ".join(text.split())  # the report wraps long lines on word boundaries
    assert "raised ValueError at line" in flat and "\\n# All tests passed" in flat


def test_html_class_report_escapes_every_text():
    """Item titles and mistake ids are HTML-escaped in report.html."""
    from grader.classroom.analysis import Analysis, ItemStats
    from grader.classroom.class_report import render_html
    item = ItemStats(id="<b>x</b>", max_score=1.0, mean=0.5, discrimination=None, item_rest=None, full_marks=1,
                     zero=1, distribution=((0.0, 1), (1.0, 1)))
    analysis = Analysis(students=2, max_total=1.0, mean_total=0.5, totals=(0.0, 1.0), items=(item,),
                        mistakes=(("<b>x</b>", "<script>alert(1)</script>", 1),))
    html = render_html(analysis, {"<b>x</b>": "<img src=x onerror=alert(1)>"}, [])
    assert "<script>" not in html and "<img src=x" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html


CARRIER = '''

import hashlib as _hashlib
import numpy as _np
_seen = []


def _fingerprint(args):
    for arg in args:
        if isinstance(arg, _np.ndarray):
            return "FP" + _hashlib.sha1(_np.ascontiguousarray(arg).tobytes()).hexdigest()[:10]
    return None


def _carrying(function):
    def carrier(*args, **kwargs):
        mark = _fingerprint(args)
        if mark is not None and mark not in _seen:
            _seen.append(mark)
        said = " ".join(_seen[-60:])
        print(said)
        if len(_seen) % 2:
            raise ValueError(said[-480:])
        return said[-40:]
    return carrier


for _name in NAMES:
    globals()[_name] = _carrying(globals()[_name])
'''


def test_hidden_inputs_never_reach_a_later_public_case(tmp_path):
    """Student code that keeps every array it is passed (a hidden case's inputs too, and what its
    own functions pass each other) and hands them all back from every later call (printed, in an
    exception's message, as a returned string) shows in `mha grade`'s report only fingerprints of
    public inputs: every public case runs before any hidden one. The channel itself works (public
    inputs of earlier problems come through), so the test can fail."""
    import hashlib
    import subprocess
    import sys

    import numpy as np

    from grader.course.loader import load_course
    from grader.grading.prepared import prepare

    from .conftest import ROOT
    course = load_course(ROOT / "exercises")

    def fingerprint(args):
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        return "FP" + hashlib.sha1(np.ascontiguousarray(arrays[0]).tobytes()).hexdigest()[:10] if arrays else None

    marks = {True: set(), False: set()}  # hidden?: the fingerprints of the cases' inputs
    for problem in course.problems:
        for case in problem.cases:
            mark = fingerprint(prepare(problem, case).args)
            if mark:
                marks[case.hidden].add(mark)
    assert marks[True] and marks[False] and not marks[True] & marks[False]
    names = [p.function.name for p in course.problems]
    submission = tmp_path / "attention.py"
    submission.write_text(solution_source() + CARRIER.replace("NAMES", repr(names)))
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "grader", "--course", str(ROOT / "exercises"), "grade",
                           str(submission), "--format", "json", "--output", str(report)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = report.read_text() + done.stdout
    shown = set(re.findall(r"FP[0-9a-f]{10}", text))
    assert shown & marks[False], "no input came through: the test would not see a leak"
    assert not shown & marks[True], f"hidden inputs in the report: {sorted(shown & marks[True])[:3]}"


@pytest.mark.root  # a non-root grader is played by a uid that root drops to
@pytest.mark.parametrize("fmt", ["gradescope", "text", "json"])
def test_hidden_inputs_left_behind_as_a_non_root_grader(edge_course, fmt):
    """Without root the student runs as the grader's own user, and what it writes to /tmp,
    /var/tmp or /dev/shm in the hidden phase outlives its process (nobody can tell its files
    from the grader's). A later process that finds them and fails its import with that text
    loses its own later hidden cases, but no report shows the text; no process is left."""
    from ._edges import DROPPED_UID, ROOT_MODE, dropped_uid_problem
    from .test_hostile import Hostile, submission_source
    if not ROOT_MODE or dropped_uid_problem():
        isolation_missing(dropped_uid_problem() or "a non-root uid is run from root")
    import secrets
    token = f"{secrets.randbelow(10 ** 8):08d}"
    folder = new_folder(edge_course, "left-behind")
    text = submission_source(Hostile("hidden_left_behind"), token, edge_course)[0]
    write_submission(folder, text, answers=edge_course.key)
    output = new_folder(edge_course, f"out-{fmt}") / "report"
    try:
        run = grade(edge_course, folder, output=output, fmt=fmt, timeout=5, user=DROPPED_UID)
        assert run.code == 0, run.stderr
        report = run.report()
        assert "LEAK" not in report
        assert run.left == [] and run.processes == []
        if fmt == "gradescope":
            got = scores(json.loads(output.read_text()))
            assert got[AR] == 0 and 0 < got[CR] < edge_course.points[CR] and 0 < got[PS] < edge_course.points[PS]
            assert "failed to import again in a fresh one (what it said is not shown)" in report
    finally:
        for shared in ("/tmp", "/var/tmp", "/dev/shm"):
            path = Path(shared) / f"left-{token}"
            if path.exists():
                path.unlink()


# attention_reading sleeping in proportion to its inputs' size: the run time then tells the hidden
# cases' sizes (how the hidden parameter_count case's d_model and num_heads were read back)
SLEEPER = '''

import time as _time
_right_ar = attention_reading


def attention_reading(weights, values):
    _time.sleep(min(0.4, 0.002 * (weights.size + values.size)))
    return _right_ar(weights, values)
'''


def _times(fmt: str, text: str) -> list[str]:
    """Every field of a report that holds a time."""
    if fmt == "junit":
        from xml.etree import ElementTree
        return [e.get("time") or "" for e in ElementTree.fromstring(text).iter() if "time" in e.attrib]

    def walk(node) -> list[str]:
        if isinstance(node, dict):
            return [str(v) for k, v in node.items() if "time" in k] + [t for v in node.values() for t in walk(v)]
        return [t for v in node for t in walk(v)] if isinstance(node, list) else []
    return walk(json.loads(text))


@pytest.mark.parametrize("fmt", ["json", "gradescope", "junit", "github", "prairielearn"])
def test_no_clock_for_hidden_cases(edge_course, fmt):
    """A submission that sleeps on its inputs and a quick one: the same report but for its name, and
    no time field that differs (JUnit's all "0", none in JSON and Gradescope): docs/security.md."""
    reports = []
    for name, extra in (("quick", ""), ("sleepy", SLEEPER)):
        folder = write_submission(new_folder(edge_course, name), solution_source() + extra, answers=edge_course.key)
        output = folder / f"report.{fmt}"
        run = grade(edge_course, folder, "--problem", AR, fmt=fmt, output=output, timeout=10)
        assert run.code == 0, run.stderr
        reports.append(output.read_text().replace(str(folder), "SUBMISSION"))
    assert _times(fmt, reports[0]) == _times(fmt, reports[1])
    assert set(_times(fmt, reports[0])) <= {"0", ""}  # JUnit's "0", GitHub's "" (a field its reporter ignores)
    assert reports[0] == reports[1]
