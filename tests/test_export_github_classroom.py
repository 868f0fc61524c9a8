"""GitHub Classroom export: the starter repository (a student bundle: no course code in it), where
its workflow installs the grader from, and the GitHub / JUnit reports agreeing with Gradescope's."""
from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from grader.errors import ExitCode
from grader.exports import github_classroom, wheel
from grader.exports.github_classroom import COMMAND_GRADER, REPORTER, VENDOR, WORKFLOW_PATH

from ._student_models import assert_models_shipped, load_in
from ._submissions import write_half_done
from .conftest import EXERCISES
from .test_student_bundle import COURSE_CODE, _check_imports, imports

INSTALL = "git+https://example.org/grader.git"


@pytest.fixture(scope="module")
def starter(tmp_path_factory) -> Path:
    """The starter repository of `mha export github-classroom --install ...`, as an instructor makes it."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    out = tmp_path_factory.mktemp("starter") / "repo"
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "export", "github-classroom", "--out", str(out),
                                       "--install", INSTALL], env={"MHA_COURSE_SECRET": ""}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """The student bundle of `mha release` (no course secret), to compare the starter repository with."""
    from click.testing import CliRunner

    from grader.cli.commands import main
    out = tmp_path_factory.mktemp("release") / "r"
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "release", "--out", str(out)],
                                env={"MHA_COURSE_SECRET": ""}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out / "student"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _texts(folder: Path) -> dict[str, str]:
    """Every file of `folder` but the models' weights, as text."""
    return {name: data.decode("utf-8") for name, data in _files(folder).items() if not name.endswith(".npz")}


def _cases(data) -> list[dict]:
    """Every case ({"name", "visibility", ...}) of a fixtures JSON document, wherever it sits."""
    found: list[dict] = []
    if isinstance(data, dict):
        if isinstance(data.get("cases"), list):
            found += [c for c in data["cases"] if isinstance(c, dict)]
        for value in data.values():
            found += _cases(value)
    elif isinstance(data, list):
        for value in data:
            found += _cases(value)
    return found


class TestStarterHoldsNoCourseCode:
    def test_it_is_the_release_student_bundle_and_the_workflow(self, starter, released):
        """Byte for byte what `mha release` gives a student, plus the workflow, a .gitignore and a Grading section."""
        mine, theirs = _files(starter), _files(released)
        assert set(mine) - set(theirs) == {WORKFLOW_PATH, ".gitignore"}
        assert set(theirs) <= set(mine)
        assert {n for n in theirs if mine[n] != theirs[n]} == {"README.md"}
        assert mine["README.md"].startswith(theirs["README.md"].rstrip(b"\n")) and b"## Grading" in mine["README.md"]

    def test_no_wheel_and_the_student_package_only(self, starter):
        """No wheel at all; the grader package in it is the student one (version +student, entry point `student`)."""
        assert not list(starter.rglob("*.whl")) and not (starter / VENDOR).exists()
        pyproject = (starter / "pyproject.toml").read_text()
        assert '+student"' in pyproject and 'mha = "grader.cli.launch:student"' in pyproject
        assert not (starter / "grader" / "_assignment").exists()

    def test_no_file_imports_the_course(self, starter):
        """The grader package passes the student bundle's import walk; no other .py file imports the course's code."""
        package = {p.relative_to(starter / "grader").as_posix(): p.read_text() for p in (starter / "grader").rglob("*.py")}
        assert package and _check_imports(package) == []
        for path in starter.rglob("*.py"):
            if (starter / "grader") in path.parents:
                continue
            names = {name.split(".")[0] for _, name in imports("x.py", path.read_text())}
            assert not names & (COURSE_CODE | {"exercises", "grader"}), path

    def test_no_course_file_is_in_it(self, starter):
        """None of the course folder's Python files (reference, mistakes, quiz answers, model code), by path or text."""
        course_dir = [p for p in EXERCISES.rglob("*.py") if p.name not in ("attention.py", "__init__.py")]
        assert {p.stem for p in course_dir} >= {"course", "reference", "mistakes", "quiz_answers"}
        texts = _texts(starter)
        for path in course_dir:
            assert path.relative_to(EXERCISES).as_posix() not in texts, path.name
            body = path.read_text().strip()
            assert not any(body in text for text in texts.values()), path.name
        # the seed cases' index (whose numbers the bundle holds); never the models' index, which answers quiz items
        assert [p.relative_to(starter).as_posix() for p in starter.rglob("index.json")] == ["grader/_seed_cases/index.json"]

    def test_no_hidden_case(self, starter, course):
        """Every case in its seed cases is public; a hidden case's name appears in no file (unless it is a phrase of
        a public prompt, as 'random layers')."""
        from grader.course.render import render_problem
        texts = _texts(starter)
        cases = [c for name, text in texts.items() if name.endswith(".json") for c in _cases(json.loads(text))]
        assert cases and {c["visibility"] for c in cases} == {"public"}
        hidden = {c.name for p in course.problems for c in p.cases if c.hidden}
        assert hidden and not hidden & {c["name"] for c in cases}
        prompts = "\n".join(render_problem(p, 0) for p in course.problems)
        distinct = {name for name in hidden if name not in prompts}
        assert len(distinct) > len(hidden) / 2
        assert {name for name in distinct if any(name in text for text in texts.values())} == set()

    def test_no_quiz_key_of_a_hidden_item(self, starter, core_course):
        """A hidden item's answer, right choices and feedback are nowhere: its seed cases entry holds none of them."""
        from grader.course.quiz import DEFAULT_SEED, draw
        texts = _texts(starter)
        seed_cases = json.loads(texts["grader/_seed_cases/default.json"])
        stored = {i["item"]["id"]: i for i in seed_cases["quiz"]["items"]}
        def feedback(item) -> set[str]:
            v = draw(item, DEFAULT_SEED)
            return {t for t in [v.feedback, *(c.feedback for c in v.choices), *(w.feedback for w in item.wrong)] if t}
        hidden = [i for i in core_course.quiz.items if i.hidden]
        public = set().union(*(feedback(i) for i in core_course.quiz.items if not i.hidden))
        assert hidden and public
        for item in hidden:
            entry = stored[item.id]
            assert entry["answer"] is None and entry["item"]["answer"] is None, item.id
            assert not any(c["correct"] for c in entry["choices"] + entry["item"]["choices"]), item.id
            own = feedback(item) - public  # a text shared with a practice item is that item's, shown by design
            assert own, item.id
            assert [t for t in own if any(t in text for text in texts.values())] == [], item.id

    def test_the_models_load_from_the_starter_folder(self, starter):
        """The course's .npz files (no index.json); `load_model` run in the starter with its own student package finds them."""
        assert_models_shipped(starter)
        package, folder, shape = load_in(starter)
        assert package == starter / "grader" / "__init__.py"  # the student package, not this checkout's
        assert folder == starter / "models" and shape == "2 8"


class TestWhereTheGraderComesFrom:
    def test_without_install_the_export_refuses(self, cli, tmp_path):
        """No --install, no --vendor-grader: exit 2, a message naming both, nothing written."""
        result = cli("export", "github-classroom", "--out", str(tmp_path / "repo"))
        assert result.exit_code == ExitCode.USAGE
        assert "--install REQUIREMENT" in result.stderr and "--vendor-grader" in result.stderr
        assert "every student can read" in result.stderr
        assert not (tmp_path / "repo").exists()

    def test_vendor_grader_warns_and_ships_the_full_wheel(self, cli, tmp_path):
        """--vendor-grader: the full wheel in .mha/, the workflow installing it, and a warning on stderr."""
        result = cli("export", "github-classroom", "--out", str(tmp_path / "repo"), "--vendor-grader")
        assert result.exit_code == 0, result.output
        assert result.stderr.count(github_classroom.VENDOR_WARNING) == 1
        assert [p.name for p in (tmp_path / "repo" / VENDOR).iterdir()] == [wheel.filename()]
        text = (tmp_path / "repo" / WORKFLOW_PATH).read_text()
        assert f"python -I -m pip install --disable-pip-version-check ./{VENDOR}/{wheel.filename()} numpy==" in text

    @pytest.mark.parametrize("args, message", [
        (["--install", INSTALL, "--vendor-grader"], "--install and --vendor-grader are two places"),
        (["--install-token-secret", "TOKEN", "--vendor-grader"], "--install-token-secret needs --install REQUIREMENT"),
        (["--install", "git+https://$TOKEN@x.org/g.git", "--install-token-secret", "2TOKEN"],
         "'2TOKEN' is not a GitHub secret name"),
        (["--install", "git+https://$TOKEN@x.org/g.git", "--install-token-secret", "GITHUB_TOKEN"],
         "'GITHUB_TOKEN' is not a GitHub secret name"),
        (["--install", "git+https://$TOKEN2@x.org/g.git", "--install-token-secret", "TOKEN"],
         "--install-token-secret TOKEN: the requirement never uses $TOKEN"),
    ], ids=["both", "secret-without-install", "digit", "github-prefix", "unused"])
    def test_contradictory_choices_are_refused(self, cli, tmp_path, args, message):
        """Exit 2 naming the conflict, nothing written."""
        result = cli("export", "github-classroom", "--out", str(tmp_path / "repo"), *args)
        assert result.exit_code == ExitCode.USAGE
        assert message in result.stderr
        assert not (tmp_path / "repo").exists()

    def test_the_secret_reaches_the_install_step_only(self, course):
        """`${{ secrets.NAME }}` is in the install step's env and in no other step."""
        steps = yaml.safe_load(github_classroom.render(course, install="git+https://${TOKEN}@x.org/g.git",
                                                       token_secret="TOKEN"))["jobs"]["run-autograding-tests"]["steps"]
        with_env = [s["name"] for s in steps if "secrets." in json.dumps(s)]
        assert with_env == ["Install the grader"]
        install = next(s for s in steps if s["name"] == "Install the grader")
        assert install["env"] == {"TOKEN": "${{ secrets.TOKEN }}"}
        assert install["run"].endswith("git+https://${TOKEN}@x.org/g.git")

    def test_a_grader_left_by_an_earlier_vendored_export_is_refused(self, cli, tmp_path):
        """Exporting with --install over a folder whose .mha/ holds a grader: exit 2, the wheel named, nothing added."""
        assert cli("export", "github-classroom", "--out", str(tmp_path), "--vendor-grader").exit_code == 0
        (tmp_path / WORKFLOW_PATH).unlink()
        result = cli("export", "github-classroom", "--out", str(tmp_path), "--install", INSTALL)
        assert result.exit_code == ExitCode.USAGE
        assert f"{tmp_path / VENDOR} holds the grader of an earlier --vendor-grader export" in result.stderr
        assert not (tmp_path / WORKFLOW_PATH).exists()

    def test_the_grader_wheel_goes_outside_the_repository(self, cli, tmp_path):
        """--grader-wheel writes the full wheel (the course in it) where asked, and refuses a folder inside --out."""
        result = cli("export", "github-classroom", "--out", str(tmp_path / "repo"), "--install", INSTALL,
                     "--grader-wheel", str(tmp_path / "repo" / "private"))
        assert result.exit_code == ExitCode.USAGE and "is inside the starter repository" in result.stderr
        assert not (tmp_path / "repo").exists()
        result = cli("export", "github-classroom", "--out", str(tmp_path / "repo"), "--install", INSTALL,
                     "--grader-wheel", str(tmp_path / "private"))
        assert result.exit_code == 0, result.output
        import zipfile
        with zipfile.ZipFile(tmp_path / "private" / wheel.filename()) as archive:
            assert "grader/_course/reference.py" in archive.namelist()
        assert not list((tmp_path / "repo").rglob("*.whl"))


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
        visible = ["--hidden-visibility", "visible"] if fmt == "gradescope" else []  # one test per problem
        result = runner.invoke(main, ["--course", str(EXERCISES), "grade", str(folder), "--format", fmt, *visible],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        reports[fmt] = result.stdout
    return reports


def _by_id(gradescope: str) -> dict[str, tuple[float, float]]:
    """Each automatically graded test's (score, max_score); written items (0 of 0, graded by hand) left out."""
    return {t["name"].split(":")[0]: (t["score"], t["max_score"]) for t in json.loads(gradescope)["tests"]
            if "graded_by_hand" not in t["tags"]}


class TestRender:
    def test_one_command_grader_step_per_problem_and_item_with_its_points(self, course):
        """All or nothing: every problem and quiz item is one command-grader step whose max-score is its points."""
        workflow = yaml.safe_load(github_classroom.render(course, install=INSTALL, fractional=False))
        steps = workflow["jobs"]["run-autograding-tests"]["steps"]
        graded = [s for s in steps if s.get("uses") == COMMAND_GRADER]
        scored = [i for i in course.quiz.items if not i.manual]  # written items: graded by hand, no step
        expected = {p.id: p.points for p in course.problems} | {i.id: i.points for i in scored}
        assert {s["id"]: s["with"]["max-score"] for s in graded} == expected
        assert all(s["with"]["command"] == f"mha --course packaged grade . --problem {s['id']} --fail-under 100" for s in graded)
        assert workflow["on"] == ["push", "repository_dispatch"]

    @pytest.mark.parametrize("fractional", [False, True])
    def test_reporter_runners_and_env_match_the_step_ids(self, course, fractional):
        """The reporter lists every step id, and reads <ID>_RESULTS from that step's result output."""
        steps = yaml.safe_load(github_classroom.render(course, install=INSTALL, fractional=fractional))["jobs"][
            "run-autograding-tests"]["steps"]
        reporter = steps[-1]
        assert reporter["uses"] == REPORTER
        ids = [s["id"] for s in steps if "id" in s]
        assert reporter["with"]["runners"].split(",") == ids
        assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}

    def test_fractional_steps_write_the_base64_github_report(self, course):
        """By default run: steps pipe `mha grade --format github` through base64 into $GITHUB_OUTPUT."""
        steps = yaml.safe_load(github_classroom.render(course, install=INSTALL))["jobs"]["run-autograding-tests"]["steps"]
        graded = [s for s in steps if "id" in s]
        assert len(graded) == len(course.problems) + sum(not i.manual for i in course.quiz.items)
        for step in graded:
            assert f"mha --course packaged grade . --problem {step['id']} --format github" in step["run"]
            assert "base64 -w0" in step["run"] and '>> "$GITHUB_OUTPUT"' in step["run"]
            assert step["shell"] == "bash"

    def test_cli_writes_the_workflow_file(self, cli, tmp_path):
        """`mha export github-classroom --out DIR` writes DIR/.github/workflows/classroom.yml."""
        result = cli("export", "github-classroom", "--out", str(tmp_path), "--install", "git+https://example.org/g")
        assert result.exit_code == 0, result.output
        text = (tmp_path / WORKFLOW_PATH).read_text()
        assert "python -I -m pip install --disable-pip-version-check git+https://example.org/g" in text
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
        suites = {s.get("name"): s for s in root.iter("testsuite") if s.get("skipped") != "1"}  # written: pending
        assert set(suites) == set(gradescope)
        for name, suite in suites.items():
            score, max_score = gradescope[name]
            value = next(p.get("value") for p in suite.iter("property") if p.get("name") == "score")
            assert value == f"{score:g}/{max_score:g}"
            assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
            assert (int(suite.get("failures")) == 0) == (score == max_score)
        assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in root.iter("testsuite"))


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
