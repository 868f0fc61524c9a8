"""GitHub Classroom workflow export, and the GitHub / JUnit reports agreeing with Gradescope's."""
from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest
import yaml

from grader.exports import github_classroom
from grader.exports.github_classroom import COMMAND_GRADER, REPORTER, WORKFLOW_PATH

from ._submissions import write_half_done


@pytest.fixture(scope="module")
def half_done_reports(tmp_path_factory):
    """Gradescope, GitHub and JUnit reports of one half-done submission, graded once each."""
    from click.testing import CliRunner

    from grader.cli.commands import main

    from .conftest import EXERCISES
    folder = write_half_done(tmp_path_factory.mktemp("half") / "repo").parent
    runner = CliRunner()
    reports = {}
    for fmt in ("gradescope", "github", "junit"):
        result = runner.invoke(main, ["--exercises", str(EXERCISES), "grade", str(folder), "--format", fmt],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        reports[fmt] = result.stdout
    return reports


def _by_id(gradescope: str) -> dict[str, tuple[float, float]]:
    """Each automatically graded test's (score, max_score); written items (0 of 0, graded by hand) left out."""
    return {t["name"].split(":")[0]: (t["score"], t["max_score"]) for t in json.loads(gradescope)["tests"]
            if "graded_by_hand" not in t["tags"]}


class TestRender:
    def test_one_command_grader_step_per_problem_and_item_with_its_points(self, assignment):
        """All or nothing: every problem and quiz item is one command-grader step whose max-score is its points."""
        workflow = yaml.safe_load(github_classroom.render(assignment, fractional=False))
        steps = workflow["jobs"]["run-autograding-tests"]["steps"]
        graded = [s for s in steps if s.get("uses") == COMMAND_GRADER]
        scored = [i for i in assignment.quiz.items if not i.manual]  # written items: graded by hand, no step
        expected = {p.id: p.points for p in assignment.problems} | {i.id: i.points for i in scored}
        assert {s["id"]: s["with"]["max-score"] for s in graded} == expected
        assert all(s["with"]["command"] == f"mha grade . --problem {s['id']} --fail-under 100" for s in graded)
        assert workflow["on"] == ["push", "repository_dispatch"]

    @pytest.mark.parametrize("fractional", [False, True])
    def test_reporter_runners_and_env_match_the_step_ids(self, assignment, fractional):
        """The reporter lists every step id, and reads <ID>_RESULTS from that step's result output."""
        steps = yaml.safe_load(github_classroom.render(assignment, fractional=fractional))["jobs"][
            "run-autograding-tests"]["steps"]
        reporter = steps[-1]
        assert reporter["uses"] == REPORTER
        ids = [s["id"] for s in steps if "id" in s]
        assert reporter["with"]["runners"].split(",") == ids
        assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}

    def test_fractional_steps_write_the_base64_github_report(self, assignment):
        """By default run: steps pipe `mha grade --format github` through base64 into $GITHUB_OUTPUT."""
        steps = yaml.safe_load(github_classroom.render(assignment))["jobs"]["run-autograding-tests"]["steps"]
        graded = [s for s in steps if "id" in s]
        assert len(graded) == len(assignment.problems) + sum(not i.manual for i in assignment.quiz.items)
        for step in graded:
            assert f"mha grade . --problem {step['id']} --format github" in step["run"]
            assert "base64 -w0" in step["run"] and '>> "$GITHUB_OUTPUT"' in step["run"]
            assert step["shell"] == "bash"

    def test_cli_writes_the_workflow_file(self, cli, tmp_path):
        """`mha export github-classroom --out DIR` writes DIR/.github/workflows/classroom.yml."""
        result = cli("export", "github-classroom", "--out", str(tmp_path), "--install", "git+https://example.org/g")
        assert result.exit_code == 0, result.output
        text = (tmp_path / WORKFLOW_PATH).read_text()
        assert "python -m pip install --disable-pip-version-check git+https://example.org/g" in text
        assert not (tmp_path / github_classroom.VENDOR).exists()
        assert yaml.safe_load(text)["name"] == "Autograding Tests"


class TestReportsAgree:
    def test_github_results_parse_and_match_gradescope(self, half_done_reports):
        """The reporter's JSON: version 1, fractional per-test scores equal to Gradescope's."""
        github = json.loads(half_done_reports["github"])
        gradescope = _by_id(half_done_reports["gradescope"])
        assert github["version"] == 1 and github["status"] == "fail"
        assert {t["name"].split(":")[0]: (t["score"], t["max_score"]) for t in github["tests"]} == gradescope
        assert github["max_score"] == sum(m for _, m in gradescope.values())
        assert 0 < sum(t["score"] for t in github["tests"]) < github["max_score"]
        assert {t["status"] for t in github["tests"]} == {"pass", "fail"}

    def test_junit_parses_and_matches_gradescope(self, half_done_reports):
        """One testsuite per problem; its score property and failure count agree with Gradescope."""
        root = ET.fromstring(half_done_reports["junit"])
        gradescope = _by_id(half_done_reports["gradescope"])
        suites = {s.get("name"): s for s in root.iter("testsuite")}
        assert set(suites) == set(gradescope)
        for name, suite in suites.items():
            score, max_score = gradescope[name]
            value = next(p.get("value") for p in suite.iter("property") if p.get("name") == "score")
            assert value == f"{score:g}/{max_score:g}"
            assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
            assert (int(suite.get("failures")) == 0) == (score == max_score)
        assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in suites.values())


class TestJunitEscaping:
    def test_control_characters_from_student_code_are_escaped(self, cli, write_submission):
        """An exception message with control characters and a lone surrogate still gives valid XML."""
        path = write_submission('''
            def softmax(scores):
                raise ValueError("bad\\x00\\x1b[31m\\x07 \\ud800 end")
        ''')
        result = cli("grade", str(path), "--problem", "softmax", "--format", "junit")
        assert result.exit_code == 0, result.output
        root = ET.fromstring(result.stdout.encode("utf-8"))
        messages = [f.get("message") for f in root.iter("error")]  # an exception: an error, not a failure
        public = [m for m in messages if m != "raised ValueError"]  # hidden cases show the kind only
        assert public and all("\\x00" in m and "\\x1b" in m and "\\ud800" in m for m in public)


def test_cli_all_or_nothing_keeps_the_command_grader(cli, tmp_path):
    """`--all-or-nothing`: every graded step is GitHub's command grader; the default is fractional."""
    cli("export", "github-classroom", "--out", str(tmp_path / "a"), "--install", "mha-exercises", "--all-or-nothing")
    steps = yaml.safe_load((tmp_path / "a" / WORKFLOW_PATH).read_text())["jobs"]["run-autograding-tests"]["steps"]
    assert all(s.get("uses") == COMMAND_GRADER for s in steps if "id" in s)
    cli("export", "github-classroom", "--out", str(tmp_path / "f"), "--install", "mha-exercises")
    steps = yaml.safe_load((tmp_path / "f" / WORKFLOW_PATH).read_text())["jobs"]["run-autograding-tests"]["steps"]
    graded = [s for s in steps if "id" in s]
    assert graded and all("--format github" in s["run"] for s in graded)
