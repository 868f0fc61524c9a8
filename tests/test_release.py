"""Per-student variants and the release bundles: the student bundle gives nothing away and works alone."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.grading.fixtures import Fixtures
from grader.grading.grade import prepare
from grader.assignment.quiz import variant as quiz_variant
from grader.assignment.render import render_prompt
from grader.assignment.variants import student_seed, student_token

from .conftest import EXERCISES, SOLUTIONS

SECRET = "test-course-secret"
STUDENTS = ("alice@example.edu", "bob@example.edu")
API = ("softmax", "attention_reading", "count_routing_distributions", "scaled_dot_product_attention",
       "split_heads", "merge_heads", "multi_head_attention", "predict_shapes", "parameter_count",
       "previous_token_head", "sink_head")


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, ["--exercises", str(EXERCISES), *args], env={"MHA_COURSE_SECRET": SECRET, **(env or {})},
                              catch_exceptions=False)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """One release with a roster of two students."""
    out = tmp_path_factory.mktemp("release")
    roster = out / "roster.csv"
    roster.write_text("student,name\n" + "\n".join(f"{s},x" for s in STUDENTS) + "\n")
    result = run("release", "--out", str(out / "r"), "--roster", str(roster))
    assert result.exit_code == 0, result.output
    return out / "r"


class TestVariants:
    def test_seed_is_keyed_and_stable(self):
        """The same id and secret give the same seed; another secret or id gives another."""
        assert student_seed(SECRET, "alice@example.edu") == student_seed(SECRET, " Alice@Example.edu ")
        assert student_seed(SECRET, "alice@example.edu") != student_seed(SECRET, "bob@example.edu")
        assert student_seed(SECRET, "alice@example.edu") != student_seed("another-secret", "alice@example.edu")

    def test_two_students_get_different_numbers(self, assignment):
        """Prompts, case inputs and quiz numbers differ between two students."""
        a, b = (student_seed(SECRET, s) for s in STUDENTS)
        problem = assignment.problem("count_routing_distributions")
        assert render_prompt(problem, a) != render_prompt(problem, b)
        case = next(c for c in problem.cases if c.name == "your own layer from the prompt")
        assert prepare(problem, case, a).args != prepare(problem, case, b).args
        quiz_numbers = [(quiz_variant(i, a).params, quiz_variant(i, b).params) for i in assignment.quiz.items if i.params]
        assert any(x != y for x, y in quiz_numbers)

    def test_same_numbers_in_every_place(self, assignment, bundle):
        """`mha variant`, `mha show --student`, the bundle's fixtures and grading agree for one student."""
        student = STUDENTS[0]
        seed = student_seed(SECRET, student)
        problem = assignment.problem("count_routing_distributions")
        prompt = render_prompt(problem, seed)
        assert prompt in run("variant", student).stdout
        assert prompt in run("show", "count_routing_distributions", "--student", student).stdout
        fixtures = Fixtures.load(bundle / "student" / "fixtures" / f"{student_token(student)}.json")
        assert prompt in fixtures.texts["count_routing_distributions"]
        stored = next(prepared for p, prepared in fixtures.problems if p.id == problem.id)
        for prepared in stored:
            graded = prepare(problem, next(c for c in problem.cases if c.name == prepared.case.name), seed)
            assert graded.args == prepared.args and graded.expected == prepared.expected, prepared.case.name
        for v in fixtures.quiz:
            assert v.params == quiz_variant(assignment.quiz.item(v.item.id), seed).params

    def test_hidden_grading_uses_the_students_variant(self, assignment, tmp_path):
        """`mha grade --student` grades with that student's numbers: an answer hard-coded for one fails the other."""
        problem = assignment.problem("count_routing_distributions")
        case = next(c for c in problem.cases if c.name == "your own layer from the prompt")
        layer = tuple(prepare(problem, case, student_seed(SECRET, STUDENTS[0])).args)
        submission = tmp_path / "attention.py"
        submission.write_text("def count_routing_distributions(num_heads, d_v, num_queries=1):\n"
                              f"    return num_heads * num_queries if (num_heads, d_v, num_queries) == {layer} else 0\n")
        status = {}
        for student in STUDENTS:
            result = run("grade", str(submission), "--student", student, "--problem", problem.id, "--format", "json")
            cases = json.loads(result.stdout)["problems"][0]["cases"]
            status[student] = next(c["status"] for c in cases if c["name"] == case.name)
        assert status == {STUDENTS[0]: "passed", STUDENTS[1]: "failed"}

    def test_roster_needs_a_secret(self, tmp_path):
        """Releasing per-student fixtures without the course secret is a usage error."""
        roster = tmp_path / "roster.csv"
        roster.write_text("alice\n")
        result = CliRunner().invoke(main, ["--exercises", str(EXERCISES), "release", "--out", str(tmp_path / "r"),
                                           "--roster", str(roster)], env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 2
        assert "a roster needs the course secret" in result.stderr


class TestStudentBundle:
    def files(self, bundle) -> dict[str, str]:
        root = bundle / "student"
        return {str(p.relative_to(root)): p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}

    def test_contains_no_reference_solution_or_variants(self, bundle):
        """No reference, wrong variants, quiz key functions, loader, solutions or secret in the student bundle."""
        files = self.files(bundle)
        names = {Path(f).name for f in files}
        assert not names & {"reference.py", "mistakes.py", "quiz.py", "loader.py", "quiz.yaml", "course.yaml"}
        assert not any(f.startswith(("problems", "solutions")) for f in files)
        for name, text in files.items():
            assert SECRET not in text, name
            for fn in API:
                for match in re.finditer(rf"^def {fn}\(.*?(?=^def |\Z)", text, re.M | re.S):
                    assert name == "attention.py" and "raise NotImplementedError" in match.group(0), (name, fn)
        solution = (SOLUTIONS / "attention.py").read_text()
        body_lines = [line.strip() for line in solution.splitlines() if line.startswith("    ") and len(line.strip()) > 25
                      and not line.strip().startswith(('"""', "#"))]
        for name, text in files.items():
            if name.endswith(".py"):  # prompts and hints in the fixtures may quote a formula on purpose
                assert not [line for line in body_lines if line in text], name

    def test_contains_no_hidden_case_data(self, bundle, assignment):
        """No hidden case name, hidden quiz answer or hidden item feedback appears in any file."""
        files = self.files(bundle)
        everything = "\n".join(files.values())
        hidden_cases = [c.name for p in assignment.problems for c in p.cases if c.hidden]
        assert hidden_cases
        for name in hidden_cases:
            assert f'"name":{json.dumps(name)}' not in everything and f"[hidden] {name}" not in everything, name
        for fixtures in (bundle / "student" / "fixtures").glob("*.json"):
            data = json.loads(fixtures.read_text())
            for problem in data["problems"]:
                public = [c.name for c in assignment.problem(problem["id"]).cases if not c.hidden]
                assert [c["name"] for c in problem["cases"]] == public
            for item in data["quiz"]["items"]:
                if item["item"]["visibility"] == "hidden":
                    assert item["answer"] is None and item["feedback"] == "" and item["wrong"] == []
                    assert not any(c["correct"] or c["feedback"] for c in item["choices"])
        hidden_feedback = [c.feedback for i in assignment.quiz.items if i.hidden for c in i.choices if len(c.feedback) > 40]
        assert hidden_feedback
        for text in hidden_feedback:
            assert text[:40] not in everything

    def test_autograder_bundle_has_everything_to_grade(self, bundle):
        """The autograder bundle holds the reference, the hidden cases and the secret (private)."""
        root = bundle / "autograder"
        assert (root / "grader" / "attention" / "reference.py").is_file()
        assert (root / "exercises" / "problems" / "softmax.yaml").is_file()
        config = root / "exercises" / "course.yaml"
        assert SECRET in config.read_text() and (config.stat().st_mode & 0o077) == 0
        assert not (root / "solutions").exists()

    def test_check_works_in_a_fresh_virtualenv(self, bundle, tmp_path):
        """pip install the student bundle into a new venv; its `mha check` grades with no reference."""
        student = bundle / "student"
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(student)], capture_output=True, text=True)
        assert pip.returncode == 0, pip.stderr[-2000:]
        mha = str(venv / "bin" / "mha")
        env = {k: v for k, v in os.environ.items() if k != "MHA_COURSE_SECRET"}
        probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import grader.attention.reference"], capture_output=True,
                               text=True, cwd=tmp_path)
        assert probe.returncode != 0 and "No module named 'grader.attention.reference'" in probe.stderr
        stubs = subprocess.run([mha, "check"], cwd=student, capture_output=True, text=True, env=env)
        assert stubs.returncode == 1 and "not implemented yet" in stubs.stdout
        work = tmp_path / "work"
        work.mkdir()
        for name in ("attention.py", "answers.yaml"):
            (work / name).write_text((SOLUTIONS / name).read_text())
        solved = subprocess.run([mha, "check", "--path", str(work / "attention.py")], cwd=student,
                                capture_output=True, text=True, env=env)
        assert solved.returncode == 0, solved.stdout[-3000:] + solved.stderr[-2000:]
        assert "Score: 142/142 (100%)" in solved.stdout or re.search(r"Score: (\d+)/\1 \(100%\)", solved.stdout)
        broken = work / "broken" / "attention.py"  # a wrong-axis softmax: named, and its caller points at it
        broken.parent.mkdir()
        broken.write_text((SOLUTIONS / "attention.py").read_text() + "\n\ndef softmax(scores):\n"
                          "    e = np.exp(scores - scores.max(axis=0, keepdims=True))\n"
                          "    return e / e.sum(axis=0, keepdims=True)\n")
        told = subprocess.run([mha, "check", "--path", str(broken), "softmax", "scaled_dot_product_attention"],
                              cwd=student, capture_output=True, text=True, env=env)
        assert told.returncode == 1 and "likely mistake (softmax-wrong-axis)" in told.stdout, told.stdout[-3000:]
        assert "scaled_dot_product_attention calls your softmax, which fails its own cases" in told.stdout
        assert "attention-softmax-over-queries" not in told.stdout
        own = subprocess.run([mha, "check", "--student", STUDENTS[0], "--path", str(work / "attention.py"),
                              "count_routing_distributions"], cwd=student, capture_output=True, text=True, env=env)
        assert own.returncode == 0, own.stdout[-2000:]
        unknown = subprocess.run([mha, "check", "--student", "nobody@example.edu"], cwd=student, capture_output=True,
                                 text=True, env=env)
        assert unknown.returncode == 2 and "ask your instructor" in unknown.stderr
