"""JUnit XML for CI servers (GitLab, Jenkins...): one testsuite per problem, one testcase per case.

A wrong answer is a `failure`; a case the code could not run (an exception, a time-out, a
crash, a file that cannot be imported) is an `error`. Messages about the submission as a whole
(a syntax error with its line, an unusable submission) come first, as the testsuite
"submission"; a case that failed because of one repeats it in its message. A written item is
graded by hand: its testcase is `skipped` (pending), never a pass or a failure, and its text
stays out of the XML."""
from __future__ import annotations

import re
from xml.etree import ElementTree as ET

from ..grading.results import CaseResult, CaseStatus, GradeResult, ProblemResult

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    """XML 1.0 cannot hold most control characters, nor can UTF-8 hold a lone surrogate; student
    output may contain both. Each becomes a visible escape (\\x00, \\ud800)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


# What the student's code did wrong is a failure; a case it could not even run is an error.
ERRORS = frozenset({CaseStatus.ERROR, CaseStatus.TIMEOUT, CaseStatus.CRASHED})
SUBMISSION = "submission"  # the testsuite that carries the messages about the submission as a whole


def _kind(case: CaseResult) -> str:
    return "error" if case.status in ERRORS else "failure"


def _case(suite: ET.Element, problem: ProblemResult, case: CaseResult) -> None:
    element = ET.SubElement(suite, "testcase", classname=problem.id, name=_clean(case.name), time="0")
    if case.passed:
        return
    message = case.summary or case.status.value
    if problem.message and problem.message not in message:  # e.g. the syntax error and its line
        message += f": {problem.message}"
    if case.mistake:
        message += f" [likely mistake: {case.mistake}]"
    outcome = ET.SubElement(element, _kind(case), message=_clean(message), type=case.status.value)
    outcome.text = _clean("\n".join(filter(None, (case.inputs and f"inputs: {case.inputs}", case.detail,
                                                    case.mistake_message))))


def _submission_suite(suites: ET.Element, result: GradeResult) -> tuple[int, int]:
    """The submission-level messages as one testcase: an error when they stopped the grading (nothing
    was graded, or attention.py could not be imported), else a passed case whose output lists them."""
    stopped = not result.problems or any(p.message in result.messages for p in result.problems)
    suite = ET.SubElement(suites, "testsuite", name=SUBMISSION, tests="1", failures="0",
                          errors="1" if stopped else "0", time="0")
    element = ET.SubElement(suite, "testcase", classname=SUBMISSION, name=SUBMISSION, time="0")
    text = _clean("\n".join(result.messages))
    if stopped:
        ET.SubElement(element, "error", message=_clean(result.messages[0]), type=SUBMISSION).text = text
    else:
        ET.SubElement(element, "system-out").text = text
    return 1, int(stopped)


def _pending_suite(suites: ET.Element, problem: ProblemResult) -> None:
    """A written item: one skipped testcase saying its points are given by hand."""
    suite = ET.SubElement(suites, "testsuite", name=problem.id, tests="1", failures="0", errors="0", skipped="1",
                          time="0")
    element = ET.SubElement(suite, "testcase", classname=problem.id, name=_clean(problem.cases[0].name), time="0")
    ET.SubElement(element, "skipped", message=_clean(f"pending: graded by hand ({problem.max_score:g} points); "
                                                     f"{problem.cases[0].summary}"))


def render(result: GradeResult) -> str:
    suites = ET.Element("testsuites", name=_clean(result.title))
    tests = failures = errors = 0
    if result.messages:
        tests, errors = _submission_suite(suites, result)
    for problem in result.problems:
        if problem.pending:  # a written item is graded by hand: nothing passed or failed here
            _pending_suite(suites, problem)
            tests += 1  # JUnit counts a skipped test among the tests
            continue
        kinds = [_kind(c) for c in problem.cases if not c.passed]
        suite = ET.SubElement(suites, "testsuite", name=problem.id, tests=str(len(problem.cases)),
                              failures=str(kinds.count("failure")), errors=str(kinds.count("error")), time="0")
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="score",
                      value=f"{problem.score:g}/{problem.max_score:g}")
        for case in problem.cases:
            _case(suite, problem, case)
        tests, failures, errors = tests + len(problem.cases), failures + kinds.count("failure"), \
            errors + kinds.count("error")
    suites.set("tests", str(tests))
    suites.set("failures", str(failures))
    suites.set("errors", str(errors))
    suites.set("skipped", str(sum(p.pending for p in result.problems)))
    suites.set("time", "0")  # no clock: student code could modulate a hidden case's time (docs/security.md)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
