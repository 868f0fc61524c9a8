"""Human-readable report for students (`mha check`) and instructors (`mha grade`)."""
from __future__ import annotations

from ..grading.results import CaseResult, GradeResult, ProblemResult

MARK = {True: "PASS", False: "FAIL"}


def _points(x: float) -> str:
    return f"{x:g}"


def case_lines(case: CaseResult) -> list[str]:
    label = f"{'[hidden] ' if case.hidden else ''}{case.name}"
    if case.passed:
        return [f"    ok    {label}"]
    lines = [f"    FAIL  {label}: {case.summary}"]
    if case.inputs:
        lines.append(f"          inputs: {case.inputs}")
    if case.detail:
        lines.append(f"          {case.detail}")
    if case.mistake:
        lines.append(f"          likely mistake ({case.mistake}): {case.mistake_message}")
    return lines


def problem_lines(problem: ProblemResult, show_hints: bool = True) -> list[str]:
    head = f"{MARK[problem.passed]}  {problem.id}: {problem.title}  [{_points(problem.score)}/{_points(problem.max_score)}]"
    lines = [head]
    if problem.message:
        lines.append(f"    {problem.message}")
        if problem.message == "not implemented yet" or "import" in problem.message:
            return lines
    for case in problem.cases:
        lines.extend(case_lines(case))
    if not problem.passed and show_hints and problem.hints:
        lines.append(f"    hint: {problem.hints[0]}")
    if problem.stdout.strip() and not problem.passed:
        shown = problem.stdout.strip().splitlines()[:5]
        lines.append("    your code printed:")
        lines.extend(f"      | {line[:160]}" for line in shown)
    return lines


def render(result: GradeResult) -> str:
    lines = [result.title, "=" * len(result.title), ""]
    lines.extend(result.messages)
    for problem in result.problems:
        lines.extend(problem_lines(problem))
        lines.append("")
    passed = sum(p.passed for p in result.problems)
    lines.append(f"Score: {_points(result.score)}/{_points(result.max_score)} ({result.percent:.0f}%), "
                 f"{passed} of {len(result.problems)} problems fully correct"
                 + ("" if result.include_hidden else " (public cases only)"))
    return "\n".join(lines) + "\n"
