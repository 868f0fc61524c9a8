"""The exported GitHub Classroom starter repository, graded as GitHub runs it.

The workflow is read from the exported file and its steps are replayed: `actions/checkout` is a
copy of the starter repository (with the student's files), `actions/setup-python` a fresh venv
put first on PATH, each `run:` step runs with bash -eo pipefail as GitHub's default shell, and
each command-grader step runs as the action's src/main.js does (execSync: /bin/sh, the repository
as working folder, only PATH and HOME in the environment, `timeout` minutes, full `max-score` on
exit 0, else 0). The reporter's total is the sum of the steps' scores.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from grader.assignment.loader import load_assignment
from grader.exports.github_classroom import COMMAND_GRADER, REPORTER, VENDOR, WORKFLOW_PATH

from ._install import clean_env, fresh_venv, link_farm
from .conftest import EXERCISES, SOLUTIONS

pytestmark = pytest.mark.slow  # runs the exported workflow's steps in a fresh venv


@pytest.fixture(scope="module")
def starter(tmp_path_factory):
    """The starter repository exported through the CLI, as an instructor makes it."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    out = tmp_path_factory.mktemp("starter") / "repo"
    result = CliRunner().invoke(main, ["--exercises", str(EXERCISES), "export", "github-classroom", "--out", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def run_workflow(starter: Path, work: Path, files: dict[str, Path]) -> tuple[float, float, dict[str, float]]:
    """(points, max points, points per step) of the workflow run on the starter repo with `files`."""
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
        elif uses.startswith("actions/setup-python@"):
            python = fresh_venv(work / "python", link_farm(work / "shared"))
            env["PATH"] = f"{python.parent}:{env['PATH']}"
        elif "run" in step:
            output = work / f"output-{len(scores)}"
            output.write_text("")
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo,
                                  env={**env, "GITHUB_OUTPUT": str(output)}, capture_output=True, text=True,
                                  timeout=600)
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
    def test_holds_the_grader_wheel_and_the_starter_files(self, starter):
        """The workflow installs the wheel in .mha/ (no package index name); stubs and template beside it."""
        wheels = list((starter / VENDOR).glob("mha_exercises-*-py3-none-any.whl"))
        assert len(wheels) == 1
        text = (starter / WORKFLOW_PATH).read_text()
        assert f"python -m pip install --disable-pip-version-check ./{VENDOR}/{wheels[0].name} numpy==" in text
        assert "install mha-exercises" not in text
        from grader.starter import starter_files
        made = starter_files(load_assignment(EXERCISES))  # made from the course, never copied
        assert (starter / "attention.py").read_text() == made["attention.py"]
        assert (starter / "answers.yaml").read_text() == made["answers.yaml"]

    def test_solution_gets_every_point_and_the_stubs_none(self, starter, tmp_path, assignment):
        """Run as GitHub runs it: the model answers earn every step's points, the stubs nothing."""
        runs = {"solution": {"attention.py": SOLUTIONS / "attention.py", "answers.yaml": SOLUTIONS / "answers.yaml"},
                "stubs": {}}
        for name in runs:
            (tmp_path / name).mkdir()
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(run_workflow, starter, tmp_path / name, files) for name, files in runs.items()}
            results = {name: future.result(timeout=900) for name, future in futures.items()}
        points, maximum, per_step = results["solution"]
        assert maximum == assignment.max_score > 0
        assert points == maximum, {k: v for k, v in per_step.items() if v == 0}
        points, maximum, per_step = results["stubs"]
        assert (points, maximum) == (0, assignment.max_score)
        # one step per problem and per automatically graded quiz item (written items: graded by hand)
        assert len(per_step) == len(assignment.problems) + sum(not i.manual for i in assignment.quiz.items)
