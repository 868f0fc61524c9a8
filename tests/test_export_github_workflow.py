"""The exported GitHub Classroom starter repository, graded as GitHub runs it.

The workflow is read from the exported file and its steps are replayed: `actions/checkout` is a
copy of the starter repository (with the student's files), `actions/setup-python` a fresh venv
put first on PATH, each `run:` step runs with bash -eo pipefail as GitHub's default shell, and
each command-grader step runs as the action's src/main.js does (execSync: /bin/sh, the repository
as working folder, only PATH and HOME in the environment, `timeout` minutes, full `max-score` on
exit 0, else 0). A step's `env:` is evaluated as GitHub does for `${{ secrets.NAME }}`, from the
secrets the test gives. The reporter's total is the sum of the steps' scores.

The grader is installed as an instructor keeps it private: `--install` names the full wheel in a
folder outside the starter repository (written by `--grader-wheel`), through a secret, offline.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from grader.course.loader import load_course
from grader.exports import wheel
from grader.exports.github_classroom import COMMAND_GRADER, REPORTER, WORKFLOW_PATH

from ._install import clean_env, fresh_venv, link_farm
from .conftest import EXERCISES, SOLUTIONS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


pytestmark = pytest.mark.slow  # runs the exported workflow's steps in a fresh venv


SECRET = "GRADER_WHEELS"  # the "token" of the test: the private folder that holds the grader's wheel


def export_starter(out: Path, private: Path, *options: str) -> None:
    """`mha export github-classroom` through the CLI, as an instructor runs it: the grader's wheel
    written to `private`, the workflow installing it from there through the secret."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "export", "github-classroom", "--out", str(out),
                                       "--grader-wheel", str(private), "--install", f"${SECRET}/{wheel.filename()}",
                                       "--install-token-secret", SECRET, *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    """(starter repository, the private folder with the grader's wheel), exported through the CLI."""
    tmp = tmp_path_factory.mktemp("starter")
    export_starter(tmp / "repo", tmp / "private")
    return tmp / "repo", tmp / "private"


def _step_env(step: dict, secrets: dict[str, str]) -> dict[str, str]:
    """A step's `env:`, each `${{ secrets.NAME }}` replaced by the secret (KeyError: a secret not given)."""
    def value(text: str) -> str:
        return re.sub(r"\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", lambda m: secrets[m.group(1)], text)
    return {name: value(str(text)) for name, text in step.get("env", {}).items()}


def run_workflow(starter: Path, work: Path, files: dict[str, Path], secrets: dict[str, str] | None = None,
                 plant: Callable[[Path], None] | None = None) -> tuple[float, float, dict[str, float]]:
    """(points, max points, points per step) of the workflow run on the starter repo with `files`
    and the repository's `secrets`; `plant(checkout)` adds whatever else the student committed."""
    workflow = yaml.safe_load((starter / WORKFLOW_PATH).read_text())
    steps = workflow["jobs"]["run-autograding-tests"]["steps"]
    repo = work / "workspace"
    scores: dict[str, float] = {}
    maxima: dict[str, float] = {}
    env = clean_env(work, HOME=str(work))
    for step in steps:
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            shutil.copytree(starter, repo)
            for name, source in files.items():
                shutil.copyfile(source, repo / name)
            if plant is not None:
                plant(repo)
        elif uses.startswith("actions/setup-python@"):
            python = fresh_venv(work / "python", link_farm(work / "shared"))
            env["PATH"] = f"{python.parent}:{env['PATH']}"
        elif "run" in step:
            output = work / f"output-{len(scores)}"
            output.write_text("")
            step_env = {**env, **_step_env(step, secrets or {}), "GITHUB_OUTPUT": str(output)}
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo,
                                  env=step_env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{step['name']}: {done.stderr[-2000:]}"
            if "id" in step:  # a graded step: its base64 result, as the reporter reads it
                line = next(x for x in output.read_text().splitlines() if x.startswith("result="))
                result = json.loads(base64.b64decode(line[len("result="):]))
                scores[step["id"]] = sum(t["score"] for t in result["tests"])
                maxima[step["id"]] = result["max_score"]
        elif uses == COMMAND_GRADER:
            options = step["with"]
            action_env = {"PATH": env["PATH"], "HOME": env["HOME"], "FORCE_COLOR": "true",
                          "DOTNET_CLI_HOME": "/tmp", "DOTNET_NOLOGO": "true"}
            passed = True
            for command in (options.get("setup-command"), options["command"]):
                if not command:
                    continue
                done = subprocess.run(["/bin/sh", "-c", command], cwd=repo, env=action_env, capture_output=True,
                                      text=True, timeout=float(options["timeout"]) * 60)
                passed = passed and done.returncode == 0
                if not passed:
                    break
            maximum = int(options["max-score"])  # parseInt, as the action reads it
            maxima[step["id"]] = maximum
            scores[step["id"]] = maximum if passed else 0
        elif uses == REPORTER:
            assert step["with"]["runners"].split(",") == list(scores)
        else:
            raise AssertionError(f"a step this test cannot replay: {step}")
    return sum(scores.values()), sum(maxima.values()), scores


class TestStarterRepository:
    def test_the_workflow_installs_the_grader_from_the_private_folder(self, starter):
        """The install step reads the secret and installs the wheel kept outside the repository; no wheel inside."""
        repo, private = starter
        assert [p.name for p in private.iterdir()] == [wheel.filename()]
        steps = yaml.safe_load((repo / WORKFLOW_PATH).read_text())["jobs"]["run-autograding-tests"]["steps"]
        install = next(s for s in steps if s["name"] == "Install the grader")
        assert install["env"] == {SECRET: f"${{{{ secrets.{SECRET} }}}}"}
        assert install["run"] == f"python -I -m pip install --disable-pip-version-check ${SECRET}/{wheel.filename()}"
        assert not list(repo.rglob("*.whl"))
        from grader.starter import starter_files
        made = starter_files(load_course(EXERCISES))  # made from the course, never copied
        assert (repo / "attention.py").read_text() == made["attention.py"]
        assert (repo / "answers.yaml").read_text() == made["answers.yaml"]

    def test_solution_gets_every_point_and_the_stubs_none(self, starter, tmp_path, course):
        """Run as GitHub runs it: the model answers earn every step's points, the stubs nothing."""
        repo, private = starter
        runs = {"solution": {"attention.py": SOLUTIONS / "attention.py", "answers.yaml": SOLUTIONS / "answers.yaml"},
                "stubs": {}}
        for name in runs:
            (tmp_path / name).mkdir()
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(run_workflow, repo, tmp_path / name, files, {SECRET: str(private)})
                       for name, files in runs.items()}
            results = {name: future.result(timeout=900) for name, future in futures.items()}
        points, maximum, per_step = results["solution"]
        assert maximum == course.max_score > 0
        assert points == maximum, {k: v for k, v in per_step.items() if v == 0}
        points, maximum, per_step = results["stubs"]
        assert (points, maximum) == (0, course.max_score)
        # one step per problem and per automatically graded quiz item (written items: graded by hand)
        assert len(per_step) == len(course.problems) + sum(not i.manual for i in course.quiz.items)

    def test_a_wrong_secret_stops_at_the_install(self, starter, tmp_path):
        """The install step uses the secret: with a wrong one the requirement names no wheel, and the run stops there."""
        repo, _ = starter
        with pytest.raises(AssertionError, match="Install the grader"):
            run_workflow(repo, tmp_path, {}, {SECRET: str(tmp_path / "nowhere")})


class TestWhatAStudentCommits:
    def test_a_course_and_a_pip_package_in_the_checkout_change_nothing(self, starter, tmp_path, course):
        """A student commits an exercises/ folder (a copy of the course whose course.py and problem files
        are theirs: every problem worth 100 points) and a pip/ package. The workflow grades with the
        installed course (--course packaged): the forged course.py is never imported, the points are
        the instructor's and the stubs score 0; the install step runs pip itself (python -I), so the
        pip/ package never sees the token."""
        repo, private = starter
        marker = tmp_path / "marker"

        def plant(checkout: Path) -> None:
            forged = checkout / "exercises"
            shutil.copytree(EXERCISES, forged, ignore=shutil.ignore_patterns("__pycache__", "solutions"))
            code = forged / "course.py"
            code.write_text(f"open({str(marker)!r}, 'a').write('course.py imported\\n')\n" + code.read_text())
            for problem in (forged / "problems").glob("*.yaml"):
                problem.write_text(re.sub(r"(?m)^points: .*$", "points: 100", problem.read_text()))
            (checkout / "pip").mkdir()
            (checkout / "pip" / "__init__.py").write_text("")
            (checkout / "pip" / "__main__.py").write_text(
                f"import os\nopen({str(marker)!r}, 'a').write('pip/ ran: ' + os.environ.get({SECRET!r}, '') + '\\n')\n")

        points, maximum, _ = run_workflow(repo, tmp_path, {}, {SECRET: str(private)}, plant=plant)
        assert not marker.exists(), marker.read_text()
        assert (points, maximum) == (0, course.max_score)
