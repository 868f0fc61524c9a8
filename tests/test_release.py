"""Per-student seeds and the release bundles: the student bundle gives nothing away and works alone."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.model import QuizKind
from grader.course.quiz import answers_template, draw as quiz_draw
from grader.course.render import render_prompt
from grader.course.seeds import course_settings, gradescope_student, student_seed, student_token
from grader.errors import SpecError, SubmissionError
from grader.grading.prepared import prepare
from grader.grading.seed_cases import BUNDLE_FOLDER, SeedCases

from ._install import fresh_venv, link_farm
from .conftest import EXERCISES, SOLUTIONS


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


SECRET = "test-course-secret"
SEED_CASES = Path("grader") / BUNDLE_FOLDER
STUDENTS = ("alice@example.edu", "bob@example.edu")
API = ("softmax", "attention_reading", "count_routing_distributions", "scaled_dot_product_attention",
       "split_heads", "merge_heads", "multi_head_attention", "predict_shapes", "parameter_count",
       "previous_token_head", "sink_head")


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, ["--course", str(EXERCISES), *args], env={"MHA_COURSE_SECRET": SECRET, **(env or {})},
                              catch_exceptions=False)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """One release with a roster of two students."""
    out = tmp_path_factory.mktemp("release")
    roster = out / "roster.csv"
    roster.write_text("email,name\n" + "\n".join(f"{s},x" for s in STUDENTS) + "\n")
    result = run("release", "--out", str(out / "r"), "--roster", str(roster))
    assert result.exit_code == 0, result.output
    return out / "r"


class TestSeeds:
    def test_seed_is_keyed_and_stable(self):
        """The same id and secret give the same seed; another secret or id gives another."""
        assert student_seed(SECRET, "alice@example.edu") == student_seed(SECRET, " Alice@Example.edu ")
        assert student_seed(SECRET, "alice@example.edu") != student_seed(SECRET, "bob@example.edu")
        assert student_seed(SECRET, "alice@example.edu") != student_seed("another-secret", "alice@example.edu")

    def test_two_students_get_different_numbers(self, course):
        """Prompts, case inputs and quiz numbers differ between two students."""
        a, b = (student_seed(SECRET, s) for s in STUDENTS)
        problem = course.problem("count_routing_distributions")
        assert render_prompt(problem, a) != render_prompt(problem, b)
        case = next(c for c in problem.cases if c.name == "your own model from the prompt")
        assert prepare(problem, case, a).args != prepare(problem, case, b).args
        quiz_numbers = [(quiz_draw(i, a).params, quiz_draw(i, b).params) for i in course.quiz.items if i.params]
        assert any(x != y for x, y in quiz_numbers)

    def test_same_numbers_in_every_place(self, course, bundle):
        """`mha numbers`, `mha show --student`, the bundle's seed cases and grading agree for one student."""
        student = STUDENTS[0]
        seed = student_seed(SECRET, student)
        problem = course.problem("count_routing_distributions")
        prompt = render_prompt(problem, seed)
        assert prompt in run("numbers", student).stdout
        assert prompt in run("show", "count_routing_distributions", "--student", student).stdout
        seed_cases = SeedCases.load(bundle / "student" / SEED_CASES / f"{student_token(student)}.json")
        assert prompt in seed_cases.texts["count_routing_distributions"]
        stored = next(prepared for p, prepared in seed_cases.problems if p.id == problem.id)
        for prepared in stored:
            graded = prepare(problem, next(c for c in problem.cases if c.name == prepared.case.name), seed)
            # every count is the student's to work out: its form is here, never its value
            assert graded.args == prepared.args and prepared.expected is None and prepared.form == {}, \
                prepared.case.name
        for v in seed_cases.quiz:  # a hidden item keeps the numbers its text shows
            drawn = quiz_draw(course.quiz.item(v.item.id), seed).params
            assert v.params == drawn if not v.item.hidden else v.params.items() <= drawn.items()

    def test_mha_variant_is_the_older_name_of_mha_numbers(self):
        """`mha variant STUDENT` still prints what `mha numbers STUDENT` does, and is not listed in `mha -h`."""
        numbers = run("numbers", STUDENTS[1])
        assert numbers.exit_code == 0 and "count_routing_distributions" in numbers.stdout
        assert run("variant", STUDENTS[1]).stdout == numbers.stdout
        listing = run("-h").stdout
        assert "numbers" in listing and "variant" not in listing

    def test_hidden_grading_uses_the_students_seed(self, course, tmp_path):
        """`mha grade --student` grades with that student's numbers: an answer hard-coded for one fails the other."""
        problem = course.problem("count_routing_distributions")
        case = next(c for c in problem.cases if c.name == "your own model from the prompt")
        layer = tuple(prepare(problem, case, student_seed(SECRET, STUDENTS[0])).args)
        submission = tmp_path / "attention.py"
        submission.write_text("def count_routing_distributions(*layer):\n"
                              "    heads, _, queries, _, _, layers, batch = layer\n"
                              f"    return layers * batch * heads * queries if layer == {layer} else 0\n")
        status = {}
        for student in STUDENTS:
            result = run("grade", str(submission), "--student", student, "--problem", problem.id, "--format", "json")
            cases = json.loads(result.stdout)["problems"][0]["cases"]
            status[student] = next(c["status"] for c in cases if c["name"] == case.name)
        assert status == {STUDENTS[0]: "passed", STUDENTS[1]: "failed"}

    def test_roster_needs_a_secret(self, tmp_path):
        """Releasing per-student seed cases without the course secret is a usage error."""
        roster = tmp_path / "roster.csv"
        roster.write_text("alice@example.edu\n")
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "release", "--out", str(tmp_path / "r"),
                                           "--roster", str(roster)], env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 2
        assert "a roster needs the course secret" in result.stderr


class TestStudentBundle:
    def files(self, bundle) -> dict[str, str]:
        root = bundle / "student"
        return {str(p.relative_to(root)): p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}

    def test_contains_no_reference_solution_or_bugs(self, bundle):
        """No reference, bugs, quiz key functions, loader, solutions or secret in the student bundle."""
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
                      and not line.strip().startswith(('"""', "#"))
                      and not line.strip().endswith("):")]  # a signature's last line: the stub has it too
        for name, text in files.items():
            if name.endswith(".py"):  # prompts and hints in the seed cases may quote a formula on purpose
                assert not [line for line in body_lines if line in text], name

    def test_contains_no_hidden_case_data(self, bundle, course):
        """No hidden case name, hidden quiz answer or hidden item feedback appears in any file."""
        files = self.files(bundle)
        everything = "\n".join(files.values())
        hidden_cases = [c.name for p in course.problems for c in p.cases if c.hidden]
        assert hidden_cases
        for name in hidden_cases:
            assert f'"name":{json.dumps(name)}' not in everything and f"[hidden] {name}" not in everything, name
        for seed_cases in (bundle / "student" / SEED_CASES).glob("*.json"):
            if seed_cases.name == "index.json":
                continue
            data = json.loads(seed_cases.read_text())
            for problem in data["problems"]:
                public = [c.name for c in course.problem(problem["id"]).cases if not c.hidden]
                assert [c["name"] for c in problem["cases"]] == public
            for item in data["quiz"]["items"]:
                if item["item"]["visibility"] == "hidden":
                    assert item["answer"] is None and item["feedback"] == "" and item["wrong"] == []
                    assert not any(c["correct"] or c["feedback"] for c in item["choices"])
        hidden_feedback = [c.feedback for i in course.quiz.items if i.hidden for c in i.choices if len(c.feedback) > 40]
        assert hidden_feedback
        for text in hidden_feedback:
            assert text[:40] not in everything

    def test_autograder_bundle_has_everything_to_grade(self, bundle):
        """The autograder bundle holds the course code (the reference), the hidden cases and the secret (private)."""
        root = bundle / "autograder"
        assert (root / "exercises" / "course.py").is_file() and (root / "exercises" / "reference.py").is_file()
        assert (root / "exercises" / "problems" / "softmax.yaml").is_file()
        config = root / "exercises" / "course.yaml"
        assert SECRET in config.read_text() and (config.stat().st_mode & 0o077) == 0
        assert not (root / "solutions").exists()

    @pytest.mark.slow  # pip builds and installs the bundle
    def test_check_works_in_a_fresh_virtualenv(self, course, bundle, tmp_path):
        """pip install the student bundle into a new venv; its `mha check` grades with no reference, from any
        folder, with the student's own numbers (and asks for the id when none is given). The venv sees
        this environment's pip, numpy, PyYAML and click (tests/_install.py), which satisfy the bundle's
        dependencies (test_metadata.py: they are the project's): pip builds and installs the bundle alone."""
        student = bundle / "student"
        venv = tmp_path / "venv"
        python = fresh_venv(venv, link_farm(tmp_path / "shared"))
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", str(student)], capture_output=True, text=True)
        assert pip.returncode == 0, pip.stderr[-2000:]
        mha = str(venv / "bin" / "mha")
        env = {k: v for k, v in os.environ.items() if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT")}
        probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import grader, pathlib; print(sorted(p.name for p in "
                                "pathlib.Path(grader.__file__).parent.rglob('*.py')))"],
                               capture_output=True, text=True, cwd=tmp_path)
        shipped = set(ast.literal_eval(probe.stdout))
        assert shipped and not shipped & {"course.py", "reference.py", "mistakes.py", "detectors.py",
                                                             "quiz_answers.py", "loader.py"}, shipped
        stubs = subprocess.run([mha, "check", "--student", STUDENTS[0]], cwd=student, capture_output=True, text=True,
                               env=env)
        assert stubs.returncode == 1 and "not implemented yet" in stubs.stdout
        anonymous = subprocess.run([mha, "check"], cwd=student, capture_output=True, text=True, env=env)
        assert anonymous.returncode == 2 and "add --student YOUR_EMAIL" in anonymous.stderr
        work = tmp_path / "work"
        work.mkdir()
        (work / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
        (work / "answers.yaml").write_text(key_answers(course, student_seed(SECRET, STUDENTS[0])))
        elsewhere = tmp_path / "elsewhere"  # neither the bundle nor the work folder
        elsewhere.mkdir()
        solved = subprocess.run([mha, "check", "--path", str(work / "attention.py")], cwd=elsewhere,
                                capture_output=True, text=True, env={**env, "MHA_STUDENT": STUDENTS[0]})
        assert solved.returncode == 0, solved.stdout[-3000:] + solved.stderr[-2000:]
        assert re.search(r"Score: (\d+)/\1 \(100%\)", solved.stdout)
        broken = work / "broken" / "attention.py"  # a wrong-axis softmax: named, and its caller points at it
        broken.parent.mkdir()
        broken.write_text((SOLUTIONS / "attention.py").read_text() + "\n\ndef softmax(scores):\n"
                          "    e = np.exp(scores - scores.max(axis=0, keepdims=True))\n"
                          "    return e / e.sum(axis=0, keepdims=True)\n")
        told = subprocess.run([mha, "check", "--student", STUDENTS[0], "--path", str(broken), "softmax",
                               "multi_head_attention"], cwd=student, capture_output=True, text=True, env=env)
        # on the public cases the column-wise softmax and the copied global-max one answer alike, on the same
        # cases: the first the problem file declares is named
        assert told.returncode == 1 and "likely mistake (softmax-wrong-axis)" in told.stdout \
            and "Several causes fit" not in told.stdout, told.stdout[-3000:]
        assert "multi_head_attention calls your softmax, which fails its own cases" in told.stdout
        assert "attention-softmax-over-queries" not in told.stdout
        fresh = tmp_path / "fresh"  # `mha init` of the bundle writes the starter files, from any folder
        started = subprocess.run([mha, "init", str(fresh)], cwd=elsewhere, capture_output=True, text=True, env=env)
        assert started.returncode == 0, started.stderr
        assert (fresh / "attention.py").read_text().count("    raise NotImplementedError(") == len(course.problems)
        assert (fresh / "answers.yaml").read_text() == answers_template(course.quiz)
        again = subprocess.run([mha, "init", str(fresh)], cwd=elsewhere, capture_output=True, text=True, env=env)
        assert again.returncode == 2 and "already exists: nothing was written" in again.stderr
        here = subprocess.run([mha, "check", "--student", STUDENTS[0], "count_routing_distributions"], cwd=work,
                              capture_output=True, text=True, env=env)
        assert here.returncode == 0, here.stdout[-2000:]
        unknown = subprocess.run([mha, "check", "--student", "nobody@example.edu"], cwd=work, capture_output=True,
                                 text=True, env=env)
        assert unknown.returncode == 2 and "ask your instructor" in unknown.stderr


class TestSeedCasesFormat:
    def test_format_2_still_loads(self, bundle):
        """A seed cases file of format 2 (the seed's label, and each mistake's bug, under "variant") loads as
        the current format does."""
        path = bundle / "student" / SEED_CASES / "default.json"
        data = json.loads(path.read_text())
        assert data["format"] == 4 and data["seed"] == "default"
        old = {**{("variant" if k == "seed" else k): v for k, v in data.items()}, "format": 2}
        old["problems"] = [{**p, "mistakes": [{("variant" if k == "bug" else k): v for k, v in m.items()}
                                              for m in p["mistakes"]]} for p in data["problems"]]
        assert any(m["variant"] for p in old["problems"] for m in p["mistakes"])
        new, loaded = SeedCases(data, path), SeedCases(old, path)
        assert [p for p, _ in loaded.problems] == [p for p, _ in new.problems] and len(new.problems) > 5
        assert loaded.texts == new.texts and [v.params for v in loaded.quiz] == [v.params for v in new.quiz]

    def test_another_format_is_refused(self, bundle):
        """A format this version cannot read is a clear error naming the file, never a KeyError."""
        path = bundle / "student" / SEED_CASES / "default.json"
        with pytest.raises(SubmissionError) as error:
            SeedCases({**json.loads(path.read_text()), "format": 1}, path)
        assert str(error.value) == f"{path}: not a seed cases file of this version of mha-exercises"


def key_answers(course, seed: int) -> str:
    """answers.yaml holding the exact key of seed `seed`: what a student who gets everything right writes."""
    lines = []
    for item in course.quiz.items:
        v = quiz_draw(item, seed)
        value = repr(v.answer) if item.kind is QuizKind.NUMERIC else v.correct_letters[0] \
            if item.kind is QuizKind.MULTIPLE_CHOICE else f"[{', '.join(v.correct_letters)}]"
        lines.append(f"{item.id}: {value}")
    return "\n".join(lines) + "\n"


class TestPersonalNumbers:
    """A release with a course secret cannot hand out numbers that grading does not use."""

    def test_a_secret_without_a_roster_is_refused(self, tmp_path):
        """Exit 2, a message naming --roster, and nothing written."""
        result = run("release", "--out", str(tmp_path / "r"))
        assert result.exit_code == 2
        assert "give --roster FILE (each student's email, one per line)" in result.stderr
        assert not (tmp_path / "r").exists()

    def test_each_student_checks_and_is_graded_on_the_same_numbers(self, course, bundle, tmp_path):
        """For each student on the roster: the bundle's `mha check --student` shows their numbers, and the exact
        key of those numbers scores full marks in the autograder bundle, on every quiz item, hidden ones included."""
        autograder = bundle / "autograder" / "exercises"
        env = {k: v for k, v in os.environ.items() if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT")}
        numeric = [i for i in course.quiz.items if i.params and i.kind is QuizKind.NUMERIC and not i.hidden]
        assert numeric
        for student, other in (STUDENTS, STUDENTS[::-1]):
            work = tmp_path / student
            work.mkdir()
            (work / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
            (work / "answers.yaml").write_text(key_answers(course, student_seed(SECRET, student)))
            bundle_env = {**env, "PYTHONPATH": str(bundle / "student")}
            check = subprocess.run([sys.executable, "-m", "grader", "check", "--student", student], cwd=work,
                                   capture_output=True, text=True, timeout=120, env=bundle_env)
            assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
            elsewhere = tmp_path / f"{student}-wrong"  # a wrong number is told the numbers it was judged on
            elsewhere.mkdir()
            (elsewhere / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
            (elsewhere / "answers.yaml").write_text("".join(f"{item.id}: 12345\n" for item in numeric))
            told = subprocess.run([sys.executable, "-m", "grader", "check", "--student", student, "--path",
                                   str(elsewhere / "attention.py"), *(item.id for item in numeric)], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120, env=bundle_env)
            for item in numeric:
                params = quiz_draw(item, student_seed(SECRET, student)).params
                numbers = ", ".join(f"{k}={params[k]}" for k in sorted(params))
                assert f"12345 is not the answer (your numbers: {numbers})" in told.stdout, told.stdout[-2000:]
            graded = CliRunner().invoke(main, ["--course", str(autograder), "grade", str(work), "--student", student,
                                               "--format", "json"], env={"MHA_COURSE_SECRET": ""})
            report = json.loads(graded.stdout)
            assert graded.exit_code == 0 and report["score"] == report["max_score"] == course.max_score
            wrong = CliRunner().invoke(main, ["--course", str(autograder), "grade", str(work), "--student", other,
                                              "--format", "json"], env={"MHA_COURSE_SECRET": ""})
            assert json.loads(wrong.stdout)["score"] < course.max_score  # the numbers do matter

    def test_the_autograder_keeps_the_seed_key(self, tmp_path):
        """course.yaml's seed_key goes into the autograder bundle with the secret; the roster is read by it."""
        exercises = _exercises_with(tmp_path, "seed_key: sid\n")
        roster = tmp_path / "roster.csv"
        roster.write_text("Full Name,Email,SID\nAnn Lee,ann@example.edu,2024001\nBen Ong,ben@example.edu,2024002\n")
        result = CliRunner().invoke(main, ["--course", str(exercises), "release", "--out", str(tmp_path / "r"),
                                           "--roster", str(roster)], env={"MHA_COURSE_SECRET": SECRET})
        assert result.exit_code == 0, result.output
        assert "seed_key: sid" in (tmp_path / "r" / "autograder" / "exercises" / "course.yaml").read_text()
        seed_cases = {p.name for p in (tmp_path / "r" / "student" / SEED_CASES).iterdir()}
        assert seed_cases == {"default.json", "index.json", *(f"{student_token(s)}.json" for s in ("2024001", "2024002"))}
        assert "--student YOUR_SID" in (tmp_path / "r" / "student" / "README.md").read_text()


def _exercises_with(tmp_path: Path, course_yaml: str) -> Path:
    """A copy of the exercises with this course.yaml."""
    import shutil
    exercises = tmp_path / "exercises"
    shutil.copytree(EXERCISES, exercises, ignore=shutil.ignore_patterns("course.yaml", "__pycache__"))
    (exercises / "course.yaml").write_text(course_yaml)
    return exercises


class TestSeedKey:
    """One id per student picks their numbers everywhere: course.yaml's seed_key (email by default, or sid)."""

    def metadata(self, tmp_path: Path, **user) -> Path:
        path = tmp_path / "submission_metadata.json"
        path.write_text(json.dumps({"id": 7, "users": [{"name": "Ann Lee", **user}]}))
        return path

    def test_email_by_default_even_when_a_sid_is_added(self, tmp_path):
        """Adding a sid to a student mid-term changes nothing: the email (normalised) still picks the numbers."""
        before = gradescope_student(self.metadata(tmp_path, email="Ann@Example.edu "))
        after = gradescope_student(self.metadata(tmp_path, email="ann@example.edu", sid="2024001"))
        assert student_seed(SECRET, before) == student_seed(SECRET, after)

    def test_sid_when_course_yaml_says_so(self, tmp_path):
        """seed_key: sid reads the sid, and a student without one is an error that names them and the setting."""
        settings = course_settings(_exercises_with(tmp_path, "seed_key: sid\n"), {})
        assert settings.seed_key == "sid"
        assert gradescope_student(self.metadata(tmp_path, email="ann@example.edu", sid=2024001), settings) == "2024001"
        with pytest.raises(SpecError) as error:
            gradescope_student(self.metadata(tmp_path, email="ann@example.edu"), settings)
        assert str(error.value) == (
            f"{tmp_path / 'exercises' / 'course.yaml'}:1: submission_metadata.json: no sid for ann@example.edu, and "
            "seed_key is 'sid': each student's numbers come from their sid; add it to the roster, or set "
            "'seed_key: email' in course.yaml before anything is released")

    @pytest.mark.parametrize("text,message", [
        ("seed_key: name\n", "1: 'seed_key' must be one of email, sid (got 'name')"),
        ("secret: abcdefghij\nseed: sid\n", "2: unknown setting 'seed' (known: secret, seed_key)"),
    ])
    def test_bad_settings_are_reported_with_their_line(self, tmp_path, text, message):
        """A misspelt setting or key is a file:line error, never silently the default."""
        with pytest.raises(SpecError) as error:
            course_settings(_exercises_with(tmp_path, text), {})
        assert str(error.value) == f"{tmp_path / 'exercises' / 'course.yaml'}:{message}"

    def test_variant_key_is_read_as_seed_key(self, tmp_path):
        """course.yaml's older name for the setting, variant_key, still chooses the id; both names is an error."""
        settings = course_settings(_exercises_with(tmp_path / "old", "variant_key: sid\n"), {})
        assert settings.seed_key == "sid" and settings.key_line == 1
        with pytest.raises(SpecError) as error:
            course_settings(_exercises_with(tmp_path / "both", "seed_key: sid\nvariant_key: email\n"), {})
        assert str(error.value) == (f"{tmp_path / 'both' / 'exercises' / 'course.yaml'}:2: 'variant_key' is another "
                                    "name for 'seed_key': give only 'seed_key'")

    def test_environment_secret_wins_over_course_yaml(self, tmp_path):
        """Both set: MHA_COURSE_SECRET is used (README says so); course.yaml's applies when it is unset or empty."""
        root = _exercises_with(tmp_path, "secret: from-the-file\n")
        assert course_settings(root, {"MHA_COURSE_SECRET": "from-the-environment"}).secret == "from-the-environment"
        assert course_settings(root, {"MHA_COURSE_SECRET": ""}).secret == "from-the-file"

    def test_gradescope_grade_without_the_key_says_why(self, tmp_path):
        """`mha grade --gradescope-metadata` for a student without a sid (seed_key: sid): exit 3 and a
        results.json whose visible test says which id is missing."""
        exercises = _exercises_with(tmp_path, f"secret: {SECRET}\nseed_key: sid\n")
        out = tmp_path / "results.json"
        result = CliRunner().invoke(main, ["--course", str(exercises), "grade", str(SOLUTIONS), "--format",
                                           "gradescope", "--output", str(out), "--gradescope-metadata",
                                           str(self.metadata(tmp_path, email="ann@example.edu"))],
                                    env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == 3
        test = json.loads(out.read_text())["tests"][0]
        assert test["name"] == "autograder failed" and "no sid for ann@example.edu" in test["output"]

    def test_grade_all_names_gradescope_students_by_the_key(self, tmp_path):
        """A Gradescope export: each folder's student is the first submitter's sid with seed_key: sid."""
        from grader.classroom import batch
        export = tmp_path / "export"
        (export / "submission_1").mkdir(parents=True)
        (export / "submission_metadata.yml").write_text(
            "submission_1:\n  :submitters:\n  - :name: Ann Lee\n    :email: ann@example.edu\n    :sid: '2024001'\n")
        settings = course_settings(_exercises_with(tmp_path, "seed_key: sid\n"), {})
        assert [s.student for s in batch.discover(export, settings=settings)] == ["2024001"]
        assert [s.student for s in batch.discover(export)] == ["ann@example.edu"]
