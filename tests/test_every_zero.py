"""Every problem that earns 0 says why, in every report format: not implemented, no such function,
attention.py failed its import, timed out. None of them ever says it passed.

The submissions are graded for real (in the sandbox), once per module; each format then renders
the same results."""
from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

import pytest

from grader.grading.grade import grade
from grader.grading.otter_checks import check_case
from grader.grading.results import GradeResult
from grader.reports import github, gradescope, html, json_report, junit, prairielearn, text
from grader.sandbox.limits import Limits

from .conftest import SOLUTIONS

FORMATS = ("text", "json", "gradescope", "junit", "github", "html", "prairielearn", "notebook")
STUB = "    raise NotImplementedError\n"


def _without(source: str, name: str) -> str:
    """`source` without the top-level function `name`."""
    start = source.index(f"\ndef {name}(")
    end = source.find("\ndef ", start + 1)
    return source[:start] + (source[end:] if end >= 0 else "\n")


def _stubbed(source: str, name: str) -> str:
    """`source` with the body of `name` replaced by `raise NotImplementedError` (its docstring kept out)."""
    start = source.index(f"\ndef {name}(")
    header_end = source.index(":\n", start) + 2
    end = source.find("\ndef ", start + 1)
    return source[:header_end] + STUB + (source[end:] if end >= 0 else "")


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory) -> dict[str, GradeResult]:
    """The results of three submissions: one with softmax not implemented and multi_head_reading
    missing (attention_reading right), one that raises while being imported, one whose
    attention_reading never returns."""
    solution = (SOLUTIONS / "attention.py").read_text()
    sources = {
        "partial": _without(_stubbed(solution, "softmax"), "multi_head_reading"),
        "import": solution + "\nraise ValueError('the data file is missing')\n",
        "loop": solution.replace("\ndef attention_reading(", "\ndef attention_reading(*args):\n    while True:\n"
                                 "        pass\n\n\ndef _replaced_attention_reading(", 1),
    }
    results = {}
    for name, source in sources.items():
        folder = tmp_path_factory.mktemp(name)
        (folder / "attention.py").write_text(source)
        results[name] = grade(course, folder / "attention.py",
                              problem_ids=["softmax", "multi_head_reading", "attention_reading"],
                              limits=Limits(problem_seconds=2))
    return results


def said(fmt: str, result: GradeResult, pid: str) -> tuple[str, list[bool]]:
    """What format `fmt` tells about problem `pid`: its text, and the pass flags it sets on it."""
    if fmt in ("text", "html", "notebook"):
        report = text.render(result) if fmt == "text" else re.sub(r"<[^>]+>", "", html.fragment(result))
        lines = report.splitlines()
        start = next((i for i, line in enumerate(lines) if re.match(rf"(FAIL|TODO|PASS)  {pid}:", line)), None)
        if start is None:  # not run: the import failure is told once, for every problem
            block = report[report.index("FAIL  attention.py"):report.index("\nQuiz") if "\nQuiz" in report else None]
            block = block.split("\n\n")[0]
        else:
            end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
            block = "\n".join(lines[start:end])
        summary = next(line for line in lines if line.startswith("  ") and (f" {pid} " in line or "not run" in line))
        if start is None:
            block += "\n" + summary
        return block, [" PASS " in " " + summary]
    if fmt == "json":
        p = next(p for p in json_report.as_dict(result)["problems"] if p["id"] == pid)
        return "\n".join([p["message"]] + [c["summary"] for c in p["cases"]]), [p["passed"]]
    if fmt == "gradescope":
        tests = [t for t in gradescope.as_dict(result)["tests"] if t["name"].startswith(f"{pid}:")]
        return "\n".join(t["output"] for t in tests), [t["status"] == "passed" for t in tests]
    if fmt == "github":
        tests = [t for t in github.as_dict(result)["tests"] if t["name"].startswith(f"{pid}:")]
        return "\n".join(t["message"] for t in tests), [t["status"] == "pass" for t in tests]
    if fmt == "junit":
        suite = next(s for s in ET.fromstring(junit.render(result)) if s.get("name") == pid)
        outcomes = [(case.find("failure"), case.find("error")) for case in suite.iter("testcase")]
        found = [f if f is not None else e for f, e in outcomes]
        return ("\n".join(f"{o.get('message')}\n{o.text or ''}" for o in found if o is not None),
                [o is None for o in found])
    if fmt == "prairielearn":
        report = prairielearn.as_dict(result)
        tests = [t for t in report["tests"] if t["name"].startswith(f"{pid}:")]
        lines = report["message"].split("\n")
        start = next(i for i, line in enumerate(lines) if re.match(rf"(FAIL|TODO|PASS)  {pid}:", line))
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
        block = "\n".join(lines[start:end] + [result.messages[0]] if result.messages else lines[start:end])
        return (block + "\n" + "\n".join(t["message"] + "\n" + t["output"] for t in tests),
                [t["message"] == "passed" for t in tests])
    raise AssertionError(fmt)


WHY = {  # (submission, problem): what the report must say
    ("partial", "softmax"): r"not implemented",
    ("partial", "multi_head_reading"): r"defines no function multi_head_reading",
    ("import", "softmax"): r"ValueError[\s\S]*import|import[\s\S]*ValueError",
    ("import", "multi_head_reading"): r"ValueError[\s\S]*import|import[\s\S]*ValueError",
    ("loop", "attention_reading"): r"timed out|time limit",
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("submission, pid", list(WHY))
def test_every_zero_says_why(graded, fmt, submission, pid):
    """A problem that earned 0 (not implemented, missing, import failed, timed out) says so in each format."""
    result = graded[submission]
    problem = next(p for p in result.problems if p.id == pid)
    assert problem.score == 0
    shown, flags = said(fmt, result, pid)
    assert re.search(WHY[submission, pid], shown, re.IGNORECASE), shown
    assert flags and not any(flags)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_zero_says_it_passed(graded, fmt):
    """No 0-score problem of any submission says it passed, in any format; a right one still does."""
    zeros = [(result, p.id) for result in graded.values() for p in result.problems if not p.quiz and p.score == 0]
    assert len(zeros) >= 5
    for result, pid in zeros:
        shown, flags = said(fmt, result, pid)
        assert "All cases passed" not in shown and not re.search(r"\bPASS\b", shown), shown
        assert not any(flags)
    right, flags = said(fmt, graded["partial"], "attention_reading")
    assert all(flags) and "FAIL" not in right


def test_gradescope_says_all_cases_passed_only_on_a_pass(graded):
    """The one test that says "All cases passed." is the one that did."""
    tests = gradescope.as_dict(graded["partial"])["tests"]
    assert [t["name"].split(":")[0] for t in tests if "All cases passed." in t["output"]] == ["attention_reading"]
    assert all(t["status"] == "passed" for t in tests if "All cases passed." in t["output"])


def test_github_attaches_the_report_to_the_failing_test(graded):
    """Each problem's report sits on its first failing test, not on a test that passed."""
    tests = [t for t in github.as_dict(graded["partial"])["tests"]]
    carrying = [t for t in tests if t["message"]]
    assert {t["name"].split(":")[0] for t in carrying} == {"softmax", "multi_head_reading", "attention_reading"}
    for t in carrying:
        problem = t["name"].split(":")[0]
        failing = [u for u in tests if u["name"].startswith(problem + ":") and u["status"] != "pass"]
        assert t is (failing[0] if failing else next(u for u in tests if u["name"].startswith(problem + ":")))
    assert json.loads(github.render(graded["partial"]))["tests"] == tests


class TestOtterChecks:
    """The notebook's own checks (otter) say the same two things."""

    def test_not_implemented(self):
        def softmax(scores):
            raise NotImplementedError
        with pytest.raises(AssertionError, match="worked example: not implemented yet"):
            check_case("softmax", "worked example", softmax)

    def test_missing(self):
        with pytest.raises(AssertionError, match="defines no function softmax"):
            check_case("softmax", "worked example", None)
