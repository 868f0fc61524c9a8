"""The seed cache (grader/grading/seed_cache.py): the same grades as preparing afresh, and never stale."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.loader import load_course
from grader.course.seeds import student_seed
from grader.course.yamlio import KEPT_FOLDER
from grader.errors import ExitCode, SpecError, SpecErrors
from grader.grading import seed_cache as seed_cache_module
from grader.grading.grade import grade, grade_seed_cases
from grader.grading.seed_cache import CACHE_ENV, cached_seed_cases
from grader.grading.seed_cases import SeedCases, build, pack, unpack
from grader.grading.validation import valid_then
from grader.reports.json_report import as_dict
from grader.sandbox.isolation import private_paths
from grader.sandbox.limits import Limits

from .conftest import EXERCISES, SOLUTIONS, solution_source
from .test_mistakes import BUGS

SECRET = "seed-cache-test-secret"


def comparable(result) -> dict:
    data = as_dict(result)
    return data


def many_bugs() -> str:
    """The model answer with the first named mistake of every problem that has one (the later
    definition of a function wins at import)."""
    first = {}
    for bug in BUGS:
        first.setdefault(bug.problem, bug)
    return solution_source() + "".join("\n\n" + textwrap.dedent(bug.source) for bug in first.values())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


class TestSameGrades:
    @pytest.mark.parametrize("kind", ["solution", "stubs", "many bugs"])
    @pytest.mark.parametrize("student", [None, "s1234"])
    def test_prepared_grades_equal_fresh_ones(self, kind, student, tmp_path, cache):
        """Solutions, stubs and a file with a named mistake in every problem get the very same
        result (scores, case verdicts, mistakes, messages, hidden cases included) from the compiled
        assignment, loaded back from disk, as from preparing every case afresh, on two seeds. The
        file keeps no bug's answer: the bugs run on the cases a submission fails."""
        course = load_course(EXERCISES)
        seed = student_seed(SECRET, student)
        source = {"solution": solution_source(), "stubs": (EXERCISES / "attention.py").read_text(),
                  "many bugs": many_bugs()}[kind]
        folder = tmp_path / "sub"
        folder.mkdir()
        (folder / "attention.py").write_text(source)
        shutil.copyfile(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
        limits = Limits(problem_seconds=5)
        fresh = grade(course, folder / "attention.py", limits=limits, seed=seed)
        cached_seed_cases(EXERCISES, seed, lambda: course)  # written...
        stored = cached_seed_cases(EXERCISES, seed, lambda: pytest.fail("prepared again"))  # ...and read back
        assert all(p.wrong_answers is None for _, prepared in stored.problems for p in prepared)
        again = grade_seed_cases(stored, folder / "attention.py", include_hidden=True, limits=limits,
                               private=private_paths(EXERCISES))
        assert comparable(again) == comparable(fresh)
        assert again.score == fresh.score
        if kind == "many bugs":
            # a function calling the student's own broken softmax is pointed at it instead
            assert sum(bool(p.mistakes) for p in fresh.problems) >= 7
            assert sum("calls your" in p.message for p in fresh.problems) >= 2
            assert 0 < fresh.score < fresh.max_score

    def test_public_cases_only_for_check(self, tmp_path, cache):
        """`include_hidden=False` on the seed cache grades exactly what `mha check` grades."""
        course = load_course(EXERCISES)
        fresh = grade(course, SOLUTIONS / "attention.py", include_hidden=False)
        again = grade_seed_cases(cached_seed_cases(EXERCISES, 0, lambda: course), SOLUTIONS / "attention.py",
                               include_hidden=False, private=private_paths(EXERCISES))
        assert comparable(again) == comparable(fresh)
        assert not any(c.hidden for p in again.problems for c in p.cases)


class TestNeverStale:
    def test_a_changed_problem_file_is_prepared_again(self, tmp_path, cache):
        """Editing a problem file (here its points) changes the next grade at once."""
        root = tmp_path / "exercises"
        shutil.copytree(EXERCISES, root)
        runner = CliRunner()
        first = runner.invoke(main, ["--course", str(root), "grade", str(SOLUTIONS), "--format", "json"])
        softmax = root / "problems" / "softmax.yaml"
        softmax.write_text(softmax.read_text().replace("points: 10", "points: 30"))
        second = runner.invoke(main, ["--course", str(root), "grade", str(SOLUTIONS), "--format", "json"])
        assert json.loads(first.stdout)["max_score"] + 20 == json.loads(second.stdout)["max_score"]
        assert len(list(cache.glob("*.cases"))) == 2

    def test_a_course_copied_elsewhere_names_mistakes_from_its_own_code(self, tmp_path, cache):
        """A course copied with its files' times kept, then the first copy deleted: the second is
        prepared on its own (a problem's bugs run from its course code when a case fails), so a
        named mistake is still named."""
        first, second = tmp_path / "first", tmp_path / "second"
        shutil.copytree(EXERCISES, first)
        folder = tmp_path / "sub"
        folder.mkdir()
        bug = next(b for b in BUGS if b.mistake == "softmax-wrong-axis")
        (folder / "attention.py").write_text(solution_source() + "\n\n" + textwrap.dedent(bug.source))
        runner = CliRunner()
        graded = runner.invoke(main, ["--course", str(first), "grade", str(folder), "--problem", "softmax",
                                      "--format", "json"])
        shutil.copytree(first, second)  # copy2: the same sizes, times and contents
        shutil.rmtree(first)
        again = subprocess.run([sys.executable, "-m", "grader", "--course", str(second), "grade", str(folder),
                                "--problem", "softmax", "--format", "json"], capture_output=True, text=True,
                                timeout=120)  # a process of its own: nothing of the first course's code in memory
        assert graded.exit_code == again.returncode == 0, again.stderr
        mistakes = [json.loads(out)["problems"][0]["mistakes"] for out in (graded.stdout, again.stdout)]
        assert mistakes[0] == mistakes[1] and "softmax-wrong-axis" in json.dumps(mistakes[1])
        assert len(list(cache.glob("*.cases"))) == 2

    def test_an_invalid_problem_file_is_reported_not_served_from_the_cache(self, tmp_path, cache):
        """A problem file broken after a compile still gets its file:line error (exit 3)."""
        root = tmp_path / "exercises"
        shutil.copytree(EXERCISES, root)
        runner = CliRunner()
        assert runner.invoke(main, ["--course", str(root), "compile"]).exit_code == 0
        target = root / "problems" / "predict_shapes.yaml"
        target.write_text(target.read_text().replace("points: 10", "points: lots"))
        result = runner.invoke(main, ["--course", str(root), "grade", str(SOLUTIONS)])
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert f"{target}:4: 'points' must be a number (got 'lots')" in result.stderr

    def test_a_wrong_key_is_refused_and_nothing_is_kept(self, tmp_path, cache):
        """Compiling a course whose key disagrees with the reference raises the key's error, even
        when preparing another case fails too (the cases are prepared while the keys are checked),
        and keeps no seed cache and no note that the course passed; once the key and the
        case are right, the course compiles and is noted as passed."""
        root = tmp_path / "exercises"
        shutil.copytree(EXERCISES, root, ignore=shutil.ignore_patterns("__pycache__"))
        softmax, counts = root / "problems" / "softmax.yaml", root / "problems" / "parameter_count.yaml"
        right_key, good_case = "expect: [0.09003057, 0.24472847, 0.66524096]", "args: {d_model: 8, num_heads: 2}"
        softmax.write_text(softmax.read_text().replace(right_key, "expect: [0.1, 0.2, 0.7]", 1))
        counts.write_text(counts.read_text().replace(good_case, "args: {d_model: 8, num_heads: 3}", 1))
        worked = 1 + softmax.read_text().splitlines().index("  - name: worked example")
        with pytest.raises(SpecErrors) as info:
            cached_seed_cases(root, 0, valid_then=valid_then)
        (error,) = str(info.value).splitlines()  # the key's error alone
        assert error.startswith(f"{softmax}:{worked}: case 'worked example': 'expect' disagrees with the reference (")
        assert [p.name for p in cache.glob("*")] == [KEPT_FOLDER]  # nothing compiled, nothing noted (the files parsed)
        softmax.write_text(softmax.read_text().replace("expect: [0.1, 0.2, 0.7]", right_key, 1))
        with pytest.raises(SpecError) as info:  # the key is right: the case the reference cannot answer
            cached_seed_cases(root, 0, valid_then=valid_then)
        case = 1 + counts.read_text().splitlines().index("  - name: width 8, two heads")
        assert str(info.value).startswith(f"{counts}:{case}: case 'width 8, two heads': the reference raised ValueError")
        assert [p.name for p in cache.glob("*")] == [KEPT_FOLDER]  # nothing compiled, nothing noted (the files parsed)
        counts.write_text(counts.read_text().replace("args: {d_model: 8, num_heads: 3}", good_case, 1))
        assert len(cached_seed_cases(root, 0, valid_then=valid_then).problems) == len(load_course(root).problems)
        assert len(list(cache.glob("*-0.cases"))) == 1 and len(list(cache.glob("*.valid"))) == 1

    def test_a_changed_grader_file_is_prepared_again(self, cache, monkeypatch):
        """The stamp covers the grader package: a file of it with another size or time is a new stamp."""
        before = seed_cache_module.stamp(EXERCISES, 0)
        real_stat = os.stat

        class Later:
            def __init__(self, info):
                self.st_size, self.st_mtime_ns = info.st_size, info.st_mtime_ns + 1
        monkeypatch.setattr(seed_cache_module.os, "stat",
                            lambda path, **kw: Later(real_stat(path)) if str(path).endswith("grading/checks.py")
                            else real_stat(path, **kw))
        assert seed_cache_module.stamp(EXERCISES, 0) != before
        assert seed_cache_module.stamp(EXERCISES, 1) != seed_cache_module.stamp(EXERCISES, 0)

    def test_a_damaged_file_is_replaced(self, cache):
        """A truncated or foreign file is ignored and compiled again; the grade is unaffected."""
        course = load_course(EXERCISES)
        cached_seed_cases(EXERCISES, 0, lambda: course)
        (path,) = cache.glob("*.cases")
        whole = path.read_bytes()
        path.write_bytes(whole[:1000])
        calls = []
        again = cached_seed_cases(EXERCISES, 0, lambda: calls.append(1) or course)
        assert calls == [1] and len(again.problems) == len(course.problems)
        assert path.read_bytes() == whole and unpack(whole)[0]["stamp"] == seed_cache_module.stamp(EXERCISES, 0)
        path.write_bytes(whole[:-1])  # the arrays' bytes cut short: refused by their length
        cached_seed_cases(EXERCISES, 0, lambda: calls.append(2) or course)
        path.write_text(json.dumps({"format": 1, "stamp": seed_cache_module.stamp(EXERCISES, 0)}))  # not packed
        cached_seed_cases(EXERCISES, 0, lambda: calls.append(3) or course)
        path.write_bytes(pack({**unpack(whole)[0], "stamp": "another grader"}))
        cached_seed_cases(EXERCISES, 0, lambda: calls.append(4) or course)
        assert calls == [1, 2, 3, 4] and path.read_bytes() == whole

    def test_only_the_graders_user_can_read_it(self, cache):
        """It holds hidden cases and quiz answers: folder 0700, file 0600."""
        course = load_course(EXERCISES)
        cached_seed_cases(EXERCISES, 0, lambda: course)
        (path,) = cache.glob("*.cases")
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

    def test_only_the_latest_prepared_courses_are_kept(self, cache):
        """Every change of the files makes a new seed cache; the oldest go."""
        course = load_course(EXERCISES)
        cache.mkdir(mode=0o700, exist_ok=True)  # (the course's parsed files are kept there already)
        for i in range(seed_cache_module.KEEP + 3):
            old = cache / f"{i:08x}-0.cases"
            old.write_text("{}")
            os.utime(old, ns=(i * 10**9, i * 10**9))
        (cache / "12345678-0.json").write_text("{}")  # format 1's file, read no more
        cached_seed_cases(EXERCISES, 0, lambda: course)
        kept = {p.name for p in cache.glob("*-*.*")}
        assert len(kept) == seed_cache_module.KEEP
        assert f"{seed_cache_module.KEEP + 2:08x}-0.cases" in kept and "00000000-0.cases" not in kept

    def test_an_unwritable_cache_still_grades(self, tmp_path, monkeypatch):
        """No cache can be written (a file where the folder should be): grading goes on."""
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "grade", str(SOLUTIONS), "--format", "json"])
        data = json.loads(result.stdout)
        assert result.exit_code == 0 and data["score"] == data["max_score"]


    def test_no_home_folder_keeps_nothing_and_still_grades(self, tmp_path, monkeypatch):
        """A uid with no HOME and no password entry (some containers): nothing is kept, grades go on."""
        monkeypatch.delenv(CACHE_ENV, raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        monkeypatch.setattr(seed_cache_module.Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(
            RuntimeError("Could not determine home directory."))))
        runner = CliRunner()
        prepared_out = runner.invoke(main, ["--course", str(EXERCISES), "compile"])
        assert prepared_out.exit_code == 0 and prepared_out.stdout.endswith(
            "but kept nothing: this user has no home folder (set MHA_CACHE_DIR)\n")
        result = runner.invoke(main, ["--course", str(EXERCISES), "grade", str(SOLUTIONS), "--format", "json",
                                      "--problem", "softmax"])
        data = json.loads(result.stdout)
        assert result.exit_code == 0 and data["score"] == data["max_score"] == 10


class TestPrepareCommand:
    def test_prepare_prepares_every_case_once(self, cache):
        """`mha prepare` says what it prepared; the grade after it loads nothing."""
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "compile"])
        course = load_course(EXERCISES)
        cases = sum(len(p.cases) for p in course.problems)
        assert result.exit_code == 0
        assert result.stdout == (f"prepared {len(course.problems)} problem(s), {cases} cases and "
                                 f"{len(course.quiz.items)} quiz items into {cache}\n")
        assert len(list(cache.glob("*.cases"))) == 1

    def test_a_student_seed_needs_the_secret(self, cache):
        result = CliRunner().invoke(main, ["--course", str(EXERCISES), "compile", "--student", "s1"],
                                    env={"MHA_COURSE_SECRET": ""})
        assert result.exit_code == ExitCode.USAGE
        assert "course secret" in result.stderr


class TestPacked:
    """The seed cache's file is packed (seed_cases.pack): its arrays' bytes after the JSON."""

    @staticmethod
    def _values(seed_cases: SeedCases) -> list:
        return [(p.case.name, p.args, p.expected, p.wrong_answers) for _, prepared in seed_cases.problems
                for p in prepared]

    @staticmethod
    def _same(a, b) -> bool:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes("A") == b.tobytes("A")
                    and a.flags.f_contiguous == b.flags.f_contiguous and a.flags.c_contiguous == b.flags.c_contiguous
                    and not b.flags.writeable and b.ctypes.data % 16 == 0)
        if isinstance(a, (tuple, list)):
            return type(a) is type(b) and len(a) == len(b) and all(TestPacked._same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return type(a) is type(b) and a.keys() == b.keys() and all(TestPacked._same(a[k], b[k]) for k in a)
        return type(a) is type(b) and (a == b or a != a and b != b)

    def test_every_value_reads_back_exactly(self):
        """Every input, expected answer and mistake's answer of a seed reads back from the packed
        file as from its JSON: type, dtype, shape, bytes and memory order; each array read-only and
        16-byte aligned in the file's bytes."""
        data = build(load_course(EXERCISES), 7, "cached", hidden=True)
        header, blob = unpack(pack(data))
        assert "b64" not in json.dumps(header) and len(json.dumps(header)) < len(json.dumps(data)) / 3
        from_json, packed = SeedCases(data, EXERCISES), SeedCases(header, EXERCISES, lazy=True, blob=blob)
        pairs = list(zip(self._values(from_json), self._values(packed), strict=True))
        assert len(pairs) > 50 and all(self._same(a, b) for a, b in pairs)
        arrays = [v for _, (_, args, expected, _) in pairs for v in (*args, expected) if isinstance(v, np.ndarray)]
        assert len(arrays) > 100 and max(a.nbytes for a in arrays) > 16 << 10  # a trained model's maps among them

    @pytest.mark.parametrize("damage", ["cut", "longer", "first line", "json"])
    def test_a_damaged_file_is_refused(self, damage):
        """unpack refuses a file that is not whole (ValueError), which the seed cache prepares again."""
        raw = pack(build(load_course(EXERCISES), 0, "cached", hidden=True))
        end = raw.index(b"\n")
        damaged = {"cut": raw[:-16], "longer": raw + b"\0", "first line": b"mha-exercises seed cases 12\n" + raw[end + 1:],
                   "json": raw[:end + 1] + b"[" + raw[end + 2:]}[damage]
        with pytest.raises(ValueError):
            unpack(damaged)
