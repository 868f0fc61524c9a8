"""GitHub Classroom: `.github/workflows/classroom.yml` for the autograding reporter.

One step per problem and quiz item, each with its points, then
`classroom-resources/autograding-grading-reporter@v1`. The reporter's contract (its
src/main.js and src/notify-classroom.js): `runners` is the comma-separated list of step ids;
for each, the env var `<ID upper-cased>_RESULTS` holds that step's `result` output, base64 JSON
`{version, status, max_score, tests: [{name, status, score, ...}]}`; the points sent to
Classroom are the sum of the tests' `score` over the runners, out of the sum of `max_score`.

- default: each step is `classroom-resources/autograding-command-grader@v1` running
  `mha grade . --problem ID --fail-under 100`: full points on exit 0, none otherwise.
- fractional: each step runs `mha grade . --problem ID --format github` itself and writes the
  base64 result to $GITHUB_OUTPUT, so partial credit reaches the reporter. If the grader fails,
  the step writes an "error" result worth 0 instead, so the reporter still runs.
"""
from __future__ import annotations

import json
import shlex

import yaml

from ..assignment.model import Assignment

__all__ = ["WORKFLOW_PATH", "steps", "render"]

WORKFLOW_PATH = ".github/workflows/classroom.yml"
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"


class _Dumper(yaml.SafeDumper):
    """Block scalars for multi-line text (the run: scripts), plain style elsewhere."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def steps(assignment: Assignment) -> list[tuple[str, str, float]]:
    """(step id, name, max score) of every problem and quiz item, in assignment order."""
    items = assignment.quiz.items if assignment.quiz else ()
    return [(p.id, f"{p.id}: {p.title}", p.points) for p in assignment.problems] + \
           [(i.id, f"{i.id}: {i.title}", i.points) for i in items]


def _fractional_script(step_id: str, name: str, points: float) -> str:
    error = json.dumps({"version": 1, "status": "error", "max_score": _number(points), "tests": [
        {"name": name, "status": "error", "score": 0,
         "message": "mha grade failed; see the log of this step"}]})
    return (f"if ! report=$(mha grade . --problem {step_id} --format github); then\n"
            f"  report={shlex.quote(error)}\n"
            "fi\n"
            'echo "result=$(printf \'%s\' "$report" | base64 -w0)" >> "$GITHUB_OUTPUT"\n')


def render(assignment: Assignment, *, install: str = "mha-exercises", fractional: bool = False,
           python: str = "3.11", timeout_minutes: int = 5) -> str:
    """The workflow as YAML text. `install` is the pip requirement that installs this grader."""
    job_steps: list[dict] = [
        {"name": "Checkout code", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": python}},
        {"name": "Install the grader", "run": f"python -m pip install {install}"},
    ]
    runners = steps(assignment)
    for step_id, name, points in runners:
        if fractional:
            job_steps.append({"name": name, "id": step_id, "shell": "bash",
                              "timeout-minutes": timeout_minutes,
                              "run": _fractional_script(step_id, name, points)})
        else:
            job_steps.append({"name": name, "id": step_id, "uses": COMMAND_GRADER, "with": {
                "test-name": name, "setup-command": "",
                "command": f"mha grade . --problem {step_id} --fail-under 100",
                "timeout": timeout_minutes, "max-score": _number(points)}})
    job_steps.append({
        "name": "Autograding Reporter", "uses": REPORTER,
        "env": {f"{step_id.upper()}_RESULTS": f"${{{{steps.{step_id}.outputs.result}}}}" for step_id, _, _ in runners},
        "with": {"runners": ",".join(step_id for step_id, _, _ in runners)},
    })
    workflow = {
        "name": "Autograding Tests",
        "on": ["push", "repository_dispatch"],
        "permissions": {"checks": "write", "actions": "read", "contents": "read"},
        "jobs": {"run-autograding-tests": {
            "runs-on": "ubuntu-latest",
            "if": "github.actor != 'github-classroom[bot]'",
            "steps": job_steps,
        }},
    }
    head = (f"# GitHub Classroom autograding for {assignment.title!r}, exported by `mha export github-classroom`"
            f"{' --fractional' if fractional else ''}.\n")
    return head + yaml.dump(workflow, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
