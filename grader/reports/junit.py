"""JUnit XML for CI servers (GitLab, Jenkins...): one testsuite per problem, one testcase per case."""
from __future__ import annotations

import re
from xml.etree import ElementTree as ET

from ..grading.results import GradeResult

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    """XML 1.0 cannot hold most control characters, nor can UTF-8 hold a lone surrogate; student
    output may contain both. Each becomes a visible escape (\\x00, \\ud800)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def render(result: GradeResult) -> str:
    suites = ET.Element("testsuites", name=_clean(result.title), tests=str(sum(len(p.cases) for p in result.problems)),
                        failures=str(sum(not c.passed for p in result.problems for c in p.cases)),
                        time=f"{result.execution_time:.3f}")
    for problem in result.problems:
        failed = [c for c in problem.cases if not c.passed]
        suite = ET.SubElement(suites, "testsuite", name=problem.id, tests=str(len(problem.cases)),
                              failures=str(len(failed)), errors="0", time="0")
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="score",
                      value=f"{problem.score:g}/{problem.max_score:g}")
        for case in problem.cases:
            element = ET.SubElement(suite, "testcase", classname=problem.id, name=_clean(case.name), time="0")
            if not case.passed:
                message = case.summary or case.status.value
                if case.mistake:
                    message += f" [likely mistake: {case.mistake}]"
                failure = ET.SubElement(element, "failure", message=_clean(message), type=case.status.value)
                failure.text = _clean("\n".join(filter(None, (case.inputs and f"inputs: {case.inputs}", case.detail,
                                                                case.mistake_message))))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
