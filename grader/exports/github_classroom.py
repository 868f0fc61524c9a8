"""GitHub Classroom: `.github/workflows/classroom.yml` for the autograding reporter.

One step per problem and quiz item, each with its points, then
`classroom-resources/autograding-grading-reporter@v1`. The reporter's contract (its
src/main.js and src/notify-classroom.js): `runners` is the comma-separated list of step ids;
for each, the env var `<ID upper-cased>_RESULTS` holds that step's `result` output, base64 JSON
`{version, status, max_score, tests: [{name, status, score, ...}]}`; the points sent to
Classroom are the sum of the tests' `score` over the runners, out of the sum of `max_score`.

The workflow installs this grader from the starter repository itself: `write` puts a wheel of
it (`wheel.py`, with the assignment as its packaged one) in `.mha/`, and the install step pins
numpy, PyYAML and click to the versions installed where it was exported. So the grade does not
depend on a package index name (`install=` takes any pip requirement instead, for a grader you
publish yourself). Everything the workflow uses is in the student's repository, the hidden cases
and the reference included: GitHub Classroom runs the grading where students can read it.

The command grader (its src/main.js) runs `setup-command` and then `command` with Node's
execSync: /bin/sh, the repository as working folder, an environment of PATH and HOME only,
`timeout` minutes; `max-score` is read with parseInt, so each step's points must be whole
numbers (all or nothing only).

- fractional (the default): each step runs `mha grade . --problem ID --format github` itself
  and writes the base64 result to $GITHUB_OUTPUT, so partial credit reaches the reporter and
  the points equal every other platform's. If the grader fails, the step writes an "error"
  result worth 0 instead, so the reporter still runs.
- all or nothing (`fractional=False`): each step is
  `classroom-resources/autograding-command-grader@v1` running
  `mha grade . --problem ID --fail-under 100`: full points on exit 0, none otherwise.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from ..assignment.model import Assignment
from ..errors import SpecError

__all__ = ["WORKFLOW_PATH", "VENDOR", "steps", "render", "write"]

WORKFLOW_PATH = ".github/workflows/classroom.yml"
VENDOR = ".mha"  # the folder of the starter repository that holds the grader's wheel
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
    """(step id, name, max score) of every problem and automatically graded quiz item, in assignment
    order (written items are graded by hand, outside GitHub Classroom's points)."""
    items = tuple(i for i in assignment.quiz.items if not i.manual) if assignment.quiz else ()
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


def vendored_install() -> str:
    """The pip arguments that install the wheel `write` puts in the repository, dependencies pinned."""
    from . import wheel, wheelhouse
    pins = [p for p in wheelhouse.pinned() if not p.startswith("pip==")]
    return " ".join([f"./{VENDOR}/{wheel.filename()}", *pins])


def render(assignment: Assignment, *, install: str | None = None, fractional: bool = True,
           python: str = "3.11", timeout_minutes: int = 5) -> str:
    """The workflow as YAML text. `install`: the pip arguments that install this grader (default:
    the wheel `write` vendors into the repository)."""
    install = install or vendored_install()
    job_steps: list[dict] = [
        {"name": "Checkout code", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": python}},
        {"name": "Install the grader", "run": f"python -m pip install --disable-pip-version-check {install}"},
    ]
    runners = steps(assignment)
    if not fractional:
        partial = [step_id for step_id, _, points in runners if not float(points).is_integer()]
        if partial:
            path = str(assignment.root / "assignment.yaml")
            raise SpecError(path, None, f"GitHub Classroom's command grader counts whole points only; "
                                        f"{', '.join(partial)} have fractional points (export without --all-or-nothing)")
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
            f"{'' if fractional else ' --all-or-nothing'}.\n")
    return head + yaml.dump(workflow, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def write(out: Path, assignment: Assignment, *, install: str | None = None, fractional: bool = True) -> list[Path]:
    """The starter repository: the workflow, the grader's wheel in .mha/ (unless `install` names
    another), and the stubs and answers template; returns the paths written."""
    from ..paths import write_atomically
    from . import wheel
    from .pysource import starter_files
    out = Path(out)
    files: dict[Path, str | bytes] = {out / WORKFLOW_PATH: render(assignment, install=install, fractional=fractional)}
    if install is None:
        name, data = wheel.build(assignment.root)
        files[out / VENDOR / name] = data
    for starter, text in starter_files(assignment).items():  # made from the course, never copied
        files[out / starter] = text
    for path, content in files.items():
        write_atomically(path, content)
    return list(files)
