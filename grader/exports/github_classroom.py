"""GitHub Classroom: a starter repository with `.github/workflows/classroom.yml` for the autograding reporter.

A GitHub Classroom starter repository is a student bundle: every student gets a copy and can
read all of it. So it holds what `mha release` gives a student (`classroom.bundles.write_student`:
stubs and a blank answers template made from the course, ASSIGNMENT.md, the public seed cases and
the student package, built from an allow-list of modules, for `mha check`; the trained models'
.npz files) and the workflow, and nothing of the course's code, hidden cases or quiz key.

The workflow installs the grading side when it runs, from where the instructor keeps it private:
`install` is any pip requirement (a git+https URL of a private repository, a private index), and
`token_secret` names a GitHub Actions secret put into the install step's environment only, so the
requirement can use it as `$NAME`. Without `install` the export refuses, unless `vendor_grader`
says to put the whole grader (a wheel with the course: hidden cases, reference, quiz key) into
the repository's `.mha/`, readable by every student. A student can edit the workflow in their own
repository (GitHub Classroom's model): the install keeps the grader out of the repository, it
does not keep it from a student who changes the workflow to print it.

The reporter's contract (its src/main.js and src/notify-classroom.js): `runners` is the
comma-separated list of step ids; for each, the env var `<ID upper-cased>_RESULTS` holds that
step's `result` output, base64 JSON `{version, status, max_score, tests: [{name, status, score,
...}]}`; the points sent to Classroom are the sum of the tests' `score` over the runners, out of
the sum of `max_score`.

The command grader (its src/main.js) runs `setup-command` and then `command` with Node's
execSync: /bin/sh, the repository as working folder, an environment of PATH and HOME only,
`timeout` minutes; `max-score` is read with parseInt, so each step's points must be whole
numbers (all or nothing only).

Every step names the course it grades with, `--course packaged` (the one inside the installed
grader): the checkout is the student's, and a lookup from the working folder would take an
`exercises/` folder a student committed, course code and all. pip runs as `python -I -m pip`, so no
module of the checkout runs in the one step that holds the token; `mha` is a console script, whose
sys.path starts at its own bin/ folder, never the working folder.

- fractional (the default): each step runs `mha --course packaged grade . --problem ID --format github` itself
  and writes the base64 result to $GITHUB_OUTPUT, so partial credit reaches the reporter and
  the points equal every other platform's. If the grader fails, the step writes an "error"
  result worth 0 instead, so the reporter still runs.
- all or nothing (`fractional=False`): each step is
  `classroom-resources/autograding-command-grader@v1` running
  `mha --course packaged grade . --problem ID --fail-under 100`: full points on exit 0, none otherwise.
"""
from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

from ..course.model import Course
from ..course.yamlio import yaml
from ..errors import SpecError, SubmissionError

__all__ = ["WORKFLOW_PATH", "VENDOR", "check_source", "steps", "render", "write"]

WORKFLOW_PATH = ".github/workflows/classroom.yml"
VENDOR = ".mha"  # the folder of the starter repository that holds the grader's wheel, with --vendor-grader only
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
# GitHub's rules for a secret's name: letters, digits and underscores, not starting with a digit or GITHUB_.
_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REFUSAL = ("a GitHub Classroom starter repository is given to every student, who can read all of it: "
           "say where the workflow installs the grader from, with --install REQUIREMENT (any pip "
           "requirement, e.g. git+https://... of a private repository; add --install-token-secret NAME "
           "for a URL that needs a token), or pass --vendor-grader to put the whole grader, hidden cases, "
           "reference and quiz key included, into the repository's .mha/ where every student can read it")
VENDOR_WARNING = ("warning: --vendor-grader: the starter repository holds the whole grader in .mha/; every "
                  "student can read the hidden cases, the reference and the quiz key there")
README_GRADING = """
## Grading

Every push runs `.github/workflows/classroom.yml`: it installs the grader and grades the
`attention.py` and `answers.yaml` of this repository, hidden cases included, one step per
problem and quiz item; the points are in the Actions tab and in GitHub Classroom. `mha check`
here checks the public cases only.
"""
GITIGNORE = "__pycache__/\n*.egg-info/\nbuild/\n"  # what `pip install .` leaves in the folder


class _Dumper(yaml.SafeDumper):
    """Block scalars for multi-line text (the run: scripts), plain style elsewhere."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def check_source(install: str | None, vendor_grader: bool = False, token_secret: str | None = None) -> None:
    """Where the workflow gets the grader from, checked: exactly one of `install` (a pip
    requirement) and `vendor_grader`; a `token_secret` is a GitHub secret name that `install`
    uses as $NAME or ${NAME}. SubmissionError (exit 2) saying what to give otherwise."""
    install = (install or "").strip() or None
    if install and vendor_grader:
        raise SubmissionError("--install and --vendor-grader are two places to install the grader from: give one")
    if not install and not vendor_grader:
        raise SubmissionError(REFUSAL)
    if token_secret is None:
        return
    if not install:
        raise SubmissionError("--install-token-secret needs --install REQUIREMENT, a requirement that uses the secret")
    if not _SECRET_NAME.fullmatch(token_secret) or token_secret.upper().startswith("GITHUB_"):
        raise SubmissionError(f"--install-token-secret: {token_secret!r} is not a GitHub secret name (letters, "
                              "digits and _, not starting with a digit or GITHUB_)")
    if not re.search(rf"\$(\{{{token_secret}\}}|{token_secret}(?![A-Za-z0-9_]))", install):
        raise SubmissionError(f"--install-token-secret {token_secret}: the requirement never uses ${token_secret} "
                              f"(got {install!r}); write it where the token goes, e.g. "
                              f"'git+https://x-access-token:${token_secret}@github.com/ORG/REPO.git'")


def steps(course: Course) -> list[tuple[str, str, float]]:
    """(step id, name, max score) of every problem and automatically graded quiz item, in assignment
    order (written items are graded by hand, outside GitHub Classroom's points)."""
    items = tuple(i for i in course.quiz.items if not i.manual) if course.quiz else ()
    return [(p.id, f"{p.id}: {p.title}", p.points) for p in course.problems] + \
           [(i.id, f"{i.id}: {i.title}", i.points) for i in items]


def _fractional_script(step_id: str, name: str, points: float) -> str:
    error = json.dumps({"version": 1, "status": "error", "max_score": _number(points), "tests": [
        {"name": name, "status": "error", "score": 0,
         "message": "mha grade failed; see the log of this step"}]})
    return (f"if ! report=$(mha --course packaged grade . --problem {step_id} --format github); then\n"
            f"  report={shlex.quote(error)}\n"
            "fi\n"
            'echo "result=$(printf \'%s\' "$report" | base64 -w0)" >> "$GITHUB_OUTPUT"\n')


def vendored_install() -> str:
    """The pip arguments that install the wheel `write` vendors into .mha/, dependencies pinned."""
    from . import wheel, wheelhouse
    pins = [p for p in wheelhouse.pinned() if not p.startswith("pip==")]
    return " ".join([f"./{VENDOR}/{wheel.filename()}", *pins])


def render(course: Course, *, install: str, token_secret: str | None = None, fractional: bool = True,
           python: str = "3.11", timeout_minutes: int = 5) -> str:
    """The workflow as YAML text. `install`: the pip arguments that install the grader, as bash
    reads them (so `$NAME` is expanded); `token_secret`: the secret given to that step alone as
    the environment variable of the same name."""
    install_step: dict = {"name": "Install the grader"}
    if token_secret:  # the install step's environment only: the steps that run student code never see it
        install_step["env"] = {token_secret: f"${{{{ secrets.{token_secret} }}}}"}
    # -I: `python -m` would put the working folder (the student's checkout) first on sys.path, so a
    # committed pip/ package would run instead of pip, with the token in its environment
    install_step["run"] = f"python -I -m pip install --disable-pip-version-check {install}"
    job_steps: list[dict] = [
        {"name": "Checkout code", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": python}},
        install_step,
    ]
    runners = steps(course)
    if not fractional:
        partial = [step_id for step_id, _, points in runners if not float(points).is_integer()]
        if partial:
            path = str(course.root / "assignment.yaml")
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
                "command": f"mha --course packaged grade . --problem {step_id} --fail-under 100",
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
    head = (f"# GitHub Classroom autograding for {course.title!r}, exported by `mha export github-classroom`"
            f"{'' if fractional else ' --all-or-nothing'}.\n")
    return head + yaml.dump(workflow, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def write(out: Path, course: Course, *, install: str | None = None, vendor_grader: bool = False,
          token_secret: str | None = None, fractional: bool = True) -> list[Path]:
    """The starter repository: what `mha release` gives a student, the workflow, and with
    `vendor_grader` the whole grader's wheel in .mha/; returns the paths written. Refuses
    (SubmissionError) without a place to install the grader from (`check_source`), and a folder
    whose .mha/ still holds a grader from an earlier export when none is vendored now."""
    from ..classroom.bundles import write_student
    from ..paths import write_atomically
    from . import wheel
    check_source(install, vendor_grader, token_secret)
    out = Path(out)
    if not vendor_grader and (out / VENDOR).exists():
        raise SubmissionError(f"{out / VENDOR} holds the grader of an earlier --vendor-grader export: remove it "
                              "(and from the repository's history, if it was pushed) before exporting without it")
    bundle: dict[Path, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="mha-starter-") as folder:
        student = Path(folder) / "student"
        write_student(course, student, [], None)  # the default numbers: one starter repository for everyone
        for path in sorted(student.rglob("*")):
            if path.is_file():
                bundle[out / path.relative_to(student)] = path.read_bytes()
    files: dict[Path, str | bytes] = dict(bundle)
    files[out / "README.md"] = bundle[out / "README.md"].decode("utf-8").rstrip("\n") + "\n" + README_GRADING
    files[out / ".gitignore"] = GITIGNORE
    files[out / WORKFLOW_PATH] = render(course, install=install.strip() if install else vendored_install(),
                                        token_secret=token_secret, fractional=fractional)
    if vendor_grader:
        name, data = wheel.build(course)
        files[out / VENDOR / name] = data
    from ..outputs import staged_folder
    with staged_folder(out, merge=True) as staged:  # every file, or none: built beside `out`, then moved in
        for path, content in files.items():
            write_atomically(staged / path.relative_to(out), content)
    return list(files)
