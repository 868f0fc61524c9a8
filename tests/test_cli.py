"""The `mha` commands: exit codes, outputs and result files."""
from __future__ import annotations

import json
import re
import shutil
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.loader import load_course
from grader.errors import ExitCode

from .conftest import EXERCISES, ROOT, SOLUTIONS


def gradescope(path):
    data = json.loads(path.read_text())
    assert "execution_time" not in data  # no clock for hidden cases (docs/security.md)
    for key in ("score", "output", "output_format", "stdout_visibility", "tests"):
        assert key in data
    for test in data["tests"]:
        pending = "graded_by_hand" in test.get("tags", ())  # a written item: no score at all, not a zero
        for key in ("name", "visibility", "output", "output_format", *(() if pending else ("score", "max_score"))):
            assert key in test
        assert not pending or ("score" not in test and "max_score" not in test)
    return data


class TestGrade:
    def test_solutions_get_full_marks_in_gradescope_format(self, cli, tmp_path):
        """The model answers score every point; each test is named after its problem id (hidden cases
        inside it, as --hidden-visibility visible lays them out)."""
        out = tmp_path / "r.json"
        result = cli("grade", str(SOLUTIONS), "--format", "gradescope", "--output", str(out),
                     "--hidden-visibility", "visible")
        assert result.exit_code == 0, result.output
        data = gradescope(out)
        assert data["score"] == sum(t.get("max_score", 0) for t in data["tests"]) > 0
        assert all(t.get("status", "passed") == "passed" for t in data["tests"])  # written items: no status, pending
        problem_ids = [p.id for p in load_course(EXERCISES).problems]   # the core: optional ones are not graded
        quiz_ids = [item.id for item in load_course(EXERCISES).quiz.items]
        assert sorted(t["name"].split(":")[0] for t in data["tests"]) == sorted(problem_ids + quiz_ids)

    def test_stubs_score_zero_with_not_implemented(self, cli):
        """The untouched stubs get 0, 'not implemented yet' per problem, no traceback, exit 0."""
        result = cli("grade", str(EXERCISES))
        assert result.exit_code == 0
        assert "Score: 0/" in result.stdout
        problems = len(load_course(EXERCISES).problems)
        unwrapped = re.sub(r"\n +", " ", result.stdout)
        assert unwrapped.count("not implemented yet") == 2 * problems  # each problem, and its summary line
        # each problem twice, the unanswered scored quiz items twice (their line and the summary's),
        # the unanswered written items once
        assert any(i.manual for i in load_course(EXERCISES).quiz.items)
        assert result.stdout.count("TODO  ") == 2 * problems + 2 + 1
        assert "Traceback" not in result.output

    def test_json_format(self, cli):
        """--format json gives every problem with its score and case statuses."""
        result = cli("grade", str(SOLUTIONS / "attention.py"), "--format", "json")
        data = json.loads(result.stdout)
        assert result.exit_code == 0
        assert data["score"] == data["max_score"] and data["status"] == "graded"
        assert all(c["status"] == "passed" for p in data["problems"] for c in p["cases"] if not p.get("manual"))
        assert {c["status"] for p in data["problems"] for c in p["cases"] if p.get("manual")} == {"recorded"}

    def test_fail_under_exits_1_but_writes_report(self, cli, tmp_path):
        """Below --fail-under the report is still written and the exit code is 1."""
        out = tmp_path / "r.json"
        result = cli("grade", str(EXERCISES), "--format", "gradescope", "--output", str(out), "--fail-under", "50")
        assert result.exit_code == ExitCode.FAILED
        assert gradescope(out)["score"] == 0
        assert "below --fail-under 50%" in result.stderr

    def test_missing_submission_is_usage_error(self, cli, tmp_path):
        """A path that does not exist is exit 2 with a one-line message."""
        result = cli("grade", str(tmp_path / "nope"))
        assert result.exit_code == ExitCode.USAGE
        assert result.stderr.strip() == f"{tmp_path / 'nope'}: no such file or folder"

    def test_folder_without_attention_py_is_usage_error(self, cli, tmp_path):
        """A folder with no attention.py is exit 2."""
        result = cli("grade", str(tmp_path))
        assert result.exit_code == ExitCode.USAGE
        assert "no attention.py in this folder" in result.stderr

    def test_bad_option_is_usage_error(self, cli):
        """click's own usage errors are exit 2 too."""
        assert cli("grade", str(SOLUTIONS), "--format", "pdf").exit_code == ExitCode.USAGE

    def test_invalid_problem_files_exit_3(self, tmp_path):
        """Invalid problem files give exit 3 and the file:line message on stderr."""
        from click.testing import CliRunner
        broken = tmp_path / "exercises"
        shutil.copytree(EXERCISES, broken)
        target = broken / "problems" / "predict_shapes.yaml"
        target.write_text(target.read_text().replace("points: 10", "points: lots"))
        result = CliRunner().invoke(main, ["--course", str(broken), "grade", str(SOLUTIONS)])
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert f"{target}:4: 'points' must be a number (got 'lots')" in result.stderr

    def test_grader_failure_exit_4_still_writes_gradescope_results(self, cli, tmp_path, monkeypatch):
        """If the grader itself breaks, exit 4 and results.json says 'autograder failed'."""
        import grader.grading.grade

        def broken(*args, **kwargs):
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(grader.grading.grade, "grade_seed_cases", broken)
        out = tmp_path / "results.json"
        result = cli("grade", str(SOLUTIONS), "--format", "gradescope", "--output", str(out))
        assert result.exit_code == ExitCode.INTERNAL
        data = gradescope(out)
        assert data["score"] == 0
        assert data["tests"][0]["name"] == "autograder failed"
        assert "disk on fire" in data["tests"][0]["output"]
        assert "Traceback" not in result.output

    @pytest.mark.parametrize("how", ["option", "environment", "neither"])
    def test_traceback_of_a_grader_failure_only_when_asked(self, tmp_path, monkeypatch, how):
        """`mha --traceback` or MHA_DEBUG=1: the whole traceback (down to the failing function) on
        stderr before the one-line message; without either, the message alone."""
        import grader.grading.grade

        def broken(*args, **kwargs):
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(grader.grading.grade, "grade_seed_cases", broken)
        monkeypatch.delenv("MHA_DEBUG", raising=False)
        if how == "environment":
            monkeypatch.setenv("MHA_DEBUG", "1")
        option = ["--traceback"] if how == "option" else []
        result = CliRunner().invoke(main, [*option, "--course", str(EXERCISES), "grade", str(SOLUTIONS),
                                           "--format", "json", "--output", str(tmp_path / "r.json")])
        assert result.exit_code == ExitCode.INTERNAL
        assert result.stderr.splitlines()[-1] == "internal error: RuntimeError: disk on fire"
        shown = "Traceback (most recent call last):" in result.stderr
        assert shown == (how != "neither")
        if shown:
            assert re.search(r'line \d+, in broken\n +raise RuntimeError\("disk on fire"\)', result.stderr)

    def test_traceback_of_a_bug_outside_grading(self, monkeypatch):
        """A bug escaping any command (here `mha list`): its traceback with --traceback, one line without."""
        import grader.cli.course_source

        def broken(self):
            raise KeyError("no such thing")

        monkeypatch.setattr(grader.cli.course_source.CourseSource, "course", broken)
        monkeypatch.delenv("MHA_DEBUG", raising=False)
        for option, shown in (([], False), (["--traceback"], True)):
            result = CliRunner().invoke(main, [*option, "--course", str(EXERCISES), "list"])
            assert result.exit_code == ExitCode.INTERNAL
            assert result.stderr.splitlines()[-1] == "internal error: KeyError: 'no such thing'"
            assert ("Traceback (most recent call last):" in result.stderr) == shown


class TestCheck:
    def test_solutions_pass(self, cli):
        """`mha check --path` on the model answers passes every public case and exits 0."""
        result = cli("check", "--path", str(SOLUTIONS / "attention.py"))
        assert result.exit_code == 0, result.stdout
        assert "[hidden]" not in result.stdout
        assert "FAIL" not in result.stdout

    def test_stubs_fail_with_exit_1(self, cli):
        """The stubs fail every problem; exit 1."""
        result = cli("check", "parameter_count")
        assert result.exit_code == ExitCode.FAILED
        assert "TODO  parameter_count: More heads, same parameters  [0/5]  not implemented yet" in result.stdout

    def test_wrong_answer_shows_got_and_hint_never_the_count(self, cli, write_submission):
        """A public count failure shows the inputs and what was got, never the count (the counting
        cases are `reveal: false`), and the first hint when no mistake is named."""
        path = write_submission("""
            def count_routing_distributions(num_heads, d_v, num_queries=1, *layer):
                return num_heads * d_v
        """)
        result = cli("check", "count_routing_distributions", "--path", str(path))
        assert result.exit_code == ExitCode.FAILED
        assert "inputs: num_heads=1, d_v=20, num_queries=4" in result.stdout
        assert "got the int 20; this answer is yours to work out, so the expected value is not shown" in result.stdout
        assert "expected 4" not in result.stdout
        assert "hint: For each argument, ask: what does doubling it do to the softmax rows" in result.stdout

    def test_unknown_problem_is_usage_error(self, cli):
        """Naming a problem that does not exist is exit 2 and lists the known ones."""
        result = cli("check", "nonsense")
        assert result.exit_code == ExitCode.USAGE
        assert "unknown problem 'nonsense'" in result.stderr

    @pytest.mark.parametrize("command", ["check", "show"])
    def test_a_mistyped_id_gets_did_you_mean(self, cli, command):
        """A problem id one letter off is exit 2 with the id it is closest to."""
        result = cli(command, "sofmax")
        assert result.exit_code == ExitCode.USAGE
        assert result.stderr == "unknown problem 'sofmax': did you mean 'softmax'? (`mha list` lists them all)\n"

    def test_in_an_empty_folder_it_says_to_run_mha_init(self, tmp_path, monkeypatch):
        """`mha check` where there is no attention.py (the packaged course: the working folder's)
        is exit 2 telling the student to run `mha init`, not only that the file is missing."""
        monkeypatch.chdir(tmp_path)
        for variable in ("MHA_COURSE", "MHA_EXERCISES", "MHA_STUDENT"):
            monkeypatch.delenv(variable, raising=False)
        result = CliRunner().invoke(main, ["check"])
        assert result.exit_code == ExitCode.USAGE
        assert result.stderr == (f"no attention.py in {tmp_path}: run `mha init` to write your starter files there "
                                 "(then `mha check`), or give your file with --path FILE\n")

    def test_unanswered_quiz_is_todo_in_the_summary_as_above(self, cli, tmp_path):
        """No answers.yaml: the quiz is TODO in its section and in the summary, never FAIL."""
        shutil.copy(SOLUTIONS / "attention.py", tmp_path / "attention.py")
        result = cli("check", "--path", str(tmp_path / "attention.py"))
        assert result.exit_code == ExitCode.FAILED
        summary = result.stdout.split("\nSummary\n")[1]
        assert re.search(r"^  TODO  quiz +0/\d+  \d+ items not answered yet$", summary, re.M), summary
        assert "FAIL" not in result.stdout


class TestOtherCommands:
    def test_validate_ok(self, cli):
        """validate on the shipped exercises reports the counts and exits 0."""
        result = cli("validate", str(EXERCISES))
        assert result.exit_code == 0
        assert result.stdout.startswith("OK: ")

    def test_validate_catches_expect_that_disagrees_with_reference(self, cli, tmp_path):
        """An explicit `expect` that the reference does not produce is an invalid spec."""
        problem = tmp_path / "attention_reading.yaml"
        problem.write_text((EXERCISES / "problems" / "attention_reading.yaml").read_text()
                           .replace("      values: [[1, 2], [3, 4], [5, 6]]\n",
                                    "      values: [[1, 2], [3, 4], [5, 6]]\n    expect: [3, 5]\n"))
        result = cli("validate", str(problem))
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert "case 'one-hot weights copy a value': 'expect' disagrees with the reference" in result.stderr

    @pytest.mark.parametrize("columns", [100, 72])
    def test_list_fits_the_terminal_width(self, columns):
        """`mha list` with COLUMNS set: no line is wider, and every problem and item is still listed
        (a long title wraps under its column)."""
        result = CliRunner(env={"COLUMNS": str(columns)}).invoke(main, ["--course", str(EXERCISES), "list"])
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert max(len(line) for line in lines) <= columns
        course = load_course(EXERCISES)
        listed = {line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")}
        assert {p.id for p in course.problems} | {i.id for i in course.quiz.items} <= listed
        total = lines.index(f"  total {course.max_score:g} points")  # then the optional ones, named
        assert " ".join(lines[total + 1:]).startswith("optional, switched off") or total == len(lines) - 1

    def test_list_and_show(self, cli):
        """list names every problem; show renders a prompt with the signature."""
        listing = cli("list")
        assert listing.exit_code == 0 and "head_contributions" in listing.stdout
        shown = cli("show", "head_contributions")
        assert shown.exit_code == 0
        assert "head_contributions(weights, values, W_O) -> (contributions, ablated)" in shown.stdout
        assert "[0.8, 0.2, 8, 4]" in shown.stdout

    @pytest.mark.parametrize("command", main.list_commands(None))  # the lazily imported ones too
    def test_every_command_has_help_with_an_example(self, cli, command):
        """Every command answers -h with a summary and an example."""
        result = cli(command, "-h")
        assert result.exit_code == 0
        assert "Example:" in result.stdout
        for param in main.get_command(None, command).params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.help, f"{command} --{param.name} has no help"


def test_readme_starts_with_the_two_setup_commands():
    """README's first commands install and grade the solutions, then install the test tools and run the tests."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```")[1]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("```")][1:]
    assert commands == ["pip install . && mha grade solutions", 'pip install -e ".[test]" && pytest']


def test_grade_loads_no_code_of_other_commands(tmp_path):
    """grade-all, export and release are imported only when used: `mha grade` loads none of them."""
    import subprocess
    import sys
    code = ("import json, sys; from grader.cli.commands import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m in ('grader.cli.grade_all', 'grader.cli.export', "
            "'grader.cli.release', 'grader.classroom.batch', 'grader.classroom.bundles'))))")
    out = subprocess.run([sys.executable, "-c", code, "--course", str(ROOT / "exercises"), "grade",
                          str(ROOT / "solutions"), "--format", "json", "--output", str(tmp_path / "r.json"),
                          "--problem", "softmax"], capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 10


class TestClosedStdout:
    """`mha list | head -2`: when the reader stops reading, mha stops quietly with exit 0, like any Unix tool."""

    @pytest.mark.parametrize("args", [("list",), ("--help",), ("--version",), ("show", "softmax"),
                                      ("grade", str(SOLUTIONS), "--problem", "softmax", "--format", "junit")])
    def test_a_closed_pipe_is_a_quiet_exit_0(self, args):
        """stdout is a pipe whose reading end is already closed: no 'internal error', no traceback, exit 0."""
        import os
        import subprocess
        import sys
        read, write = os.pipe()
        os.close(read)  # every write now fails with EPIPE, whenever it happens
        try:
            done = subprocess.run([sys.executable, "-m", "grader", "--course", str(EXERCISES), *args], stdout=write,
                                  stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
        finally:
            os.close(write)
        assert done.returncode == 0, done.stderr
        assert "error" not in done.stderr.lower() and "Traceback" not in done.stderr  # `list` names its course


class TestSubmissionLevelMessages:
    """Every report format says what went wrong with the submission as a whole, and is written even when
    nothing could be graded."""

    FORMATS = ("text", "json", "gradescope", "junit", "github")

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_syntax_error_and_its_line_reach_every_format(self, cli, write_submission, tmp_path, fmt):
        """attention.py that does not parse: every format names the syntax error and its line."""
        path = write_submission("def softmax(scores):\n    return scores\n\ndef broken(:\n    pass\n")
        out = tmp_path / f"report.{fmt}"
        result = cli("grade", str(path), "--format", fmt, "--output", str(out), "--problem", "softmax")
        assert result.exit_code == 0, result.output
        assert re.search(r"attention\.py has a syntax error (\(line 4\)|on line 4)", out.read_text())

    def test_junit_carries_the_syntax_error_as_an_error(self, cli, write_submission):
        """JUnit: a 'submission' testsuite with the error and its line, and each case's error repeats it."""
        path = write_submission("def broken(:\n    pass\n")
        result = cli("grade", str(path), "--format", "junit", "--problem", "softmax", "--problem", "pruning")
        root = ET.fromstring(result.stdout.encode())
        suites = {s.get("name"): s for s in root.iter("testsuite")}
        assert list(suites) == ["submission", "softmax", "pruning"]
        assert suites["submission"].find("testcase/error").get("message").startswith(
            "attention.py has a syntax error (line 1)")
        softmax = suites["softmax"]
        assert softmax.get("errors") == str(len(softmax.findall("testcase"))) and softmax.get("failures") == "0"
        assert all("syntax error (line 1)" in e.get("message") for e in softmax.iter("error"))
        assert suites["pruning"].get("failures") == "1" and suites["pruning"].get("errors") == "0"  # not answered
        assert root.get("errors") == str(1 + len(softmax.findall("testcase"))) and root.get("failures") == "1"

    def test_wrong_answers_are_failures_and_exceptions_errors(self, cli, write_submission):
        """A wrong value is a <failure>; a raised exception is an <error>."""
        path = write_submission("""
            def softmax(scores):
                return scores
            def parameter_count(d_model, num_heads, bias=True):
                raise RuntimeError("not today")
        """)
        result = cli("grade", str(path), "--format", "junit", "--problem", "softmax", "--problem", "parameter_count")
        suites = {s.get("name"): s for s in ET.fromstring(result.stdout.encode()).iter("testsuite")}
        assert suites["softmax"].get("errors") == "0" and int(suites["softmax"].get("failures")) > 0
        assert suites["parameter_count"].get("failures") == "0" and int(suites["parameter_count"].get("errors")) > 0
        assert "RuntimeError" in suites["parameter_count"].find("testcase/error").get("message")

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_nothing_to_grade_still_writes_the_report(self, cli, tmp_path, fmt):
        """A folder without attention.py: exit 2, and the --output report in that format says why."""
        empty = tmp_path / "empty"
        empty.mkdir()
        out = tmp_path / f"report.{fmt}"
        result = cli("grade", str(empty), "--format", fmt, "--output", str(out))
        assert result.exit_code == ExitCode.USAGE
        text = out.read_text()
        assert f"{empty}: no attention.py" in text
        if fmt == "junit":
            root = ET.fromstring(text.encode())
            assert (root.get("tests"), root.get("errors")) == ("1", "1")
        elif fmt == "github":
            data = json.loads(text)
            assert data["status"] == "error" and data["tests"][0]["status"] == "error"
        elif fmt != "text":
            json.loads(text)
