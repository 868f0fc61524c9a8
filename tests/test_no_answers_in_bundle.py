"""A student bundle checks without telling: released with a course secret and a roster of three,
no file of the student bundle, nor of the folder its `mha init` writes, holds an expected value
that the grader never shows (a hidden case's, a withheld public case's, a hidden quiz item's),
of any student; its `mha check` still checks every public case whose value may be shown, as
`mha grade` does, and says "graded on submission" for the others.

The expected values are the grader's own: each student's cases prepared with seed_cases.build
from the course and the student's seed, hidden cases included.
"""
from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.model import CompareKind
from grader.course.seeds import DEFAULT_SEED, student_seed, student_token
from grader.grading.grade import ON_SUBMISSION, grade, grade_seed_cases
from grader.grading.results import CaseStatus
from grader.grading.seed_cases import BUNDLE_FOLDER, FORMAT, SeedCases, build, decode, withheld
from grader.paths import PACKAGE

from .conftest import EXERCISES, SOLUTIONS
from .test_mistakes import BUGS, buggy_submission


@pytest.fixture(scope="session")
def course(core_course):
    """The course as its exports and bundles ship it: the core, optional problems switched off."""
    return core_course


SECRET = "no-answers-course-secret"
STUDENTS = ("ada@example.edu", "ben@example.edu", "cy@example.edu")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _student_mha(bundle: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The student bundle's own `mha` (its grader package on PYTHONPATH, not the full grader)."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("MHA_COURSE_SECRET", "MHA_STUDENT")},
           "PYTHONPATH": str(bundle)}
    return subprocess.run([sys.executable, "-c", "from grader.cli.launch import student; student()", *args],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """`mha release` with a course secret and a roster of three: the student bundle."""
    out = tmp_path_factory.mktemp("release")
    roster = out / "roster.csv"
    roster.write_text("email\n" + "\n".join(STUDENTS) + "\n")
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "release", "--out", str(out / "r"),
                                       "--roster", str(roster)], env={"MHA_COURSE_SECRET": SECRET},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out / "r" / "student"


@pytest.fixture(scope="module")
def started(released, tmp_path_factory) -> Path:
    """The folder the bundle's `mha init` writes."""
    folder = tmp_path_factory.mktemp("init") / "my-work"
    run = _student_mha(released, "init", str(folder), cwd=folder.parent)
    assert run.returncode == 0, run.stderr
    return folder


SEEDS = {**{s: student_seed(SECRET, s) for s in STUDENTS}, "the default numbers": DEFAULT_SEED}


@pytest.fixture(scope="module")
def full(course) -> dict[str, dict]:
    """Each student's cases and quiz as the grader prepares them, hidden ones and every answer
    included; and the default numbers' (the bundle's example numbers, default.json)."""
    return {name: build(course, seed, name, hidden=True) for name, seed in SEEDS.items()}


# --------------------------------------------------------------------------- what is never shown

def _never_shown(course, full: dict[str, dict]):
    """(student, where, value) for every expected value the grader never shows a student: hidden
    cases, public cases it withholds (`reveal: false`, shapes), hidden quiz items' answers."""
    for student, data in full.items():
        for problem, stored in zip(course.problems, data["problems"]):
            for case, c in zip(problem.cases, stored["cases"]):
                assert case.name == c["name"]
                if not case.raises and (case.hidden or withheld(problem, case)):
                    yield student, f"{problem.id}/{case.name}", decode(c["expected"])
        for item in data["quiz"]["items"]:
            if item["item"]["visibility"] == "hidden" and item["answer"] is not None:
                yield student, f"quiz/{item['item']['id']}", item["answer"]


def _shown(course, full: dict[str, dict]) -> set[str]:
    """The text forms of what a student may see, or what the bundle holds by design: every input,
    every expected value the grader shows and what a named mistake answers on those cases, the
    numbers in the course's words (prompts, choices, titles, messages, for each seed) and its
    YAML line numbers. A value never shown that equals one of these (a hidden softmax of shifted
    scores, a count that a prompt mentions as a width) gives nothing away."""
    from grader.course.quiz import draw
    from grader.course.render import render_problem
    from grader.grading.diagnosis import wrong_answer
    seen: set[str] = set()

    def add(value: Any) -> None:
        for x in _numbers(value):
            seen.update(_forms(x))
        for a in value if isinstance(value, tuple) else (value,):
            if isinstance(a, np.ndarray) and a.ndim:
                seen.add(_tuple_text(a.shape))

    def words(*texts: str | None) -> None:
        for text in texts:
            seen.update(NUMBER.findall(text or ""))
    for name, data in full.items():
        seed = SEEDS[name]
        for problem, stored in zip(course.problems, data["problems"]):
            words(render_problem(problem, seed), problem.title, *problem.hints, *(m.message for m in problem.mistakes))
            seen.update(str(line) for line in (*(m.line for m in problem.mistakes), *(c.line for c in problem.cases))
                        if line)
            for case, c in zip(problem.cases, stored["cases"]):
                if case.hidden:
                    continue
                words(case.name)
                for arg in c["args"]:
                    add(decode(arg))
                if not case.raises and not withheld(problem, case):
                    add(decode(c["expected"]))
                    args = tuple(decode(a) for a in c["args"])
                    for mistake in problem.mistakes:  # what the bundle's cases hold of each named mistake
                        try:
                            add(wrong_answer(mistake, args, problem.code))
                        except Exception:
                            pass  # it does not apply to these inputs (or is a detector)
        for item in course.quiz.items:
            v = draw(item, seed)
            words(v.prompt, item.title, *(c.text for c in v.choices))
            if not item.hidden:
                words(v.feedback, v.hint, *(c.feedback for c in v.choices), *(w.feedback for w in v.wrong))
            seen.update(str(line) for line in (item.line, *(c.line for c in item.choices), *(w.line for w in item.wrong),
                                               *(r.line for r in item.rubric)) if line)
    return seen


def _numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, (tuple, list)) and not all(isinstance(v, (int, float)) for v in value):
        return [x for v in value for x in _numbers(v)]
    try:
        return [float(x) for x in np.asarray(value, dtype=np.float64).ravel()]
    except (TypeError, ValueError):
        return []


def _significant(text: str) -> int:
    return len(text.lstrip("-").split("e")[0].replace(".", "").strip("0"))


def _forms(x: float) -> set[str]:
    """The text forms of a number that say which number it is: an integer of three digits or
    more (as JSON, Python and a float write it); a float's repr (JSON's too), float32's, and 8 and
    6 significant digits (numpy's and the checks' "expected 0.123457"), each with 4 or more
    significant digits. Shorter forms (3, 0.25) are on every page, so they are searched as
    structure instead (TestSeedCasesHoldNoAnswer)."""
    if float(x).is_integer():
        n = int(x)
        return {str(n), f"{n}.0", f"{n:,}", f"{n:_}"} if abs(n) >= 100 else set()
    forms = {repr(float(x)), str(np.float32(x)), f"{x:.8g}", f"{x:.6g}"}
    return {f for f in forms if _significant(f) >= 4}


def _tuple_text(shape) -> str:
    return ", ".join(str(int(n)) for n in shape)


# for each pattern of _needles, one that matches wherever it does (and maybe elsewhere), found faster
quick: dict[re.Pattern, re.Pattern] = {}


def _search(pattern: re.Pattern, text: str) -> bool:
    """pattern.search(text), the quick pattern's search first: most texts match neither."""
    return bool(quick[pattern].search(text) and pattern.search(text))


def _needles(value: Any, shown: set[str]) -> tuple[set[str], set[str], set[bytes], list[re.Pattern]]:
    """(number tokens, substrings, bytes, patterns) that would give `value` away."""
    tokens, texts, raw, patterns = set(), set(), set(), []
    if isinstance(value, dict):  # a dict of shapes: each shape beside its key, and the shape itself
        for key, shape in value.items():
            numbers = r"\W{1,4}".join(str(int(n)) for n in shape)
            patterns.append(re.compile(rf"\b{re.escape(str(key))}\b[^0-9]{{1,40}}\b{numbers}\b"))
            # the same without its first \b: it starts with the key's letters, which re looks for with a
            # fast scan (the \b first made every search step through each character: 40 times slower)
            quick[patterns[-1]] = re.compile(rf"{re.escape(str(key))}\b[^0-9]{{1,40}}\b{numbers}\b")
            if len(shape) >= 3 and _tuple_text(shape) not in shown:
                texts.update({f"({_tuple_text(shape)})", f"[{_tuple_text(shape)}]", json.dumps(list(shape)),
                              json.dumps(list(shape), separators=(",", ":"))})
        return tokens, texts, raw, patterns
    for x in _numbers(value):
        tokens.update(f for f in _forms(x) if f not in shown)
        if f"{x!r}" not in shown and _significant(repr(float(x))) >= 6:
            raw.add(struct.pack("<d", x))
    arrays = value if isinstance(value, tuple) else (value,)
    for a in arrays:
        if isinstance(a, np.ndarray) and a.size >= 2 and not all(f in shown for x in a.ravel() for f in _forms(x)):
            texts.update({json.dumps(a.tolist()), str(a.tolist()), base64.b64encode(a.tobytes()).decode()[:40],
                          base64.b64encode(a.astype(np.float64).tobytes()).decode()[:40]})
    return tokens, texts, raw, patterns


def _files(*folders: Path) -> dict[Path, bytes]:
    """Every file of the folders, but the bundle's grader modules, which are the very bytes of the
    grader's own (asserted here): they hold nothing of a course, and the numbers the grader's code
    spells (a 1024-byte buffer) are no student's answer."""
    files = {}
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder)
            if relative.parts[0] == "grader" and path.suffix == ".py" and relative.name != "__main__.py":
                assert path.read_bytes() == (PACKAGE.parent / relative).read_bytes(), relative
                continue
            files[path] = path.read_bytes()
    assert files
    return files


def _found(course, full, files: dict[Path, bytes]) -> list[str]:
    """Every (file, student, where, form) at which a never-shown value appears."""
    shown = _shown(course, full)
    texts = {p: data.decode("utf-8", "replace") for p, data in files.items()}
    tokens: dict[str, set[Path]] = {}
    for path, text in texts.items():
        for match in NUMBER.finditer(text):
            tokens.setdefault(match.group(), set()).add(path)
    binary = {p: data for p, data in files.items() if b"\0" in data}  # model files (.npz): numbers as bytes
    found = []
    for student, where, value in _never_shown(course, full):
        number_forms, substrings, raw, patterns = _needles(value, shown)
        found += [f"{p.name}: {student} {where} as {form}" for form in number_forms for p in tokens.get(form, ())]
        found += [f"{p.name}: {student} {where} as {form[:40]}" for form in substrings
                  for p, text in texts.items() if form in text]
        found += [f"{p.name}: {student} {where} as bytes" for form in raw for p, data in binary.items() if form in data]
        found += [f"{p.name}: {student} {where} as {pattern.pattern}" for pattern in patterns
                  for p, text in texts.items() if _search(pattern, text)]
    return found


class TestNothingToCopy:
    def test_the_search_finds_what_an_old_bundle_gave_away(self, course, full, tmp_path):
        """The search is not blind: the expected values of format 3 (every public case's, in plain
        JSON) are found, each student's routing count among them."""
        student = STUDENTS[0]
        old = full[student] | {"problems": [
            {**p, "cases": [c for c, case in zip(p["cases"], problem.cases) if not case.hidden]}
            for p, problem in zip(full[student]["problems"], course.problems)]}
        old_file = tmp_path / "old.json"
        old_file.write_text(json.dumps(old))
        found = _found(course, {student: full[student]}, {old_file: old_file.read_bytes()})
        count = decode(next(c for c in old["problems"][[p.id for p in course.problems].index(
            "count_routing_distributions")]["cases"] if c["name"] == "your own model from the prompt")["expected"])
        assert any(f"count_routing_distributions/your own model from the prompt as {count}" in f for f in found), found
        assert any("predict_shapes/" in f for f in found) and any("parameter_count/" in f for f in found)

    def test_no_file_of_the_bundle_or_the_started_folder_holds_a_value_never_shown(self, course, full, released,
                                                                                  started):
        """Every file of the student bundle and of `mha init`'s folder, searched for every hidden or
        withheld expected value of every student (numbers, arrays, shapes, as JSON and as text): none."""
        files = _files(released, started)
        assert {"attention.py", "answers.yaml"} <= {p.name for p in files if started in p.parents}
        assert len([p for p in files if p.parent.name == BUNDLE_FOLDER and p.name != "index.json"]) == 1 + len(STUDENTS)
        assert _found(course, full, files) == []


class TestSeedCasesHoldNoAnswer:
    """What the text search cannot see (small numbers: 3, 0.25, a letter): the bundle's seed cases
    hold no expected value of a withheld case, no hidden case and no hidden item's answer at all."""

    def test_withheld_cases_hold_their_form_only(self, course, released):
        """Each seed cases file (format 4): a withheld case has inputs and a form, no expected value
        and no bug's answer; no hidden case is there; the other public cases keep their expected value."""
        for path in sorted((released / "grader" / BUNDLE_FOLDER).glob("*.json")):
            if path.name == "index.json":
                continue
            data = json.loads(path.read_text())
            assert data["format"] == FORMAT == 4
            for stored, problem in zip(data["problems"], course.problems):
                public = [c for c in problem.cases if not c.hidden]
                assert [c["name"] for c in stored["cases"]] == [c.name for c in public], (path.name, problem.id)
                for c, case in zip(stored["cases"], public):
                    if withheld(problem, case):
                        assert "expected" not in c and c["wrong_answers"] == [] and "form" in c, (problem.id, c["name"])
                        assert set(c["form"]) <= {"arrays", "keys"}
                    else:
                        assert "form" not in c and "expected" in c

    def test_hidden_quiz_items_hold_no_answer(self, course, released):
        """A hidden item: no right choice, no number, no feedback, hint or known-wrong value, and only
        the numbers its text shows."""
        for path in sorted((released / "grader" / BUNDLE_FOLDER).glob("*.json")):
            if path.name == "index.json":
                continue
            for item in json.loads(path.read_text())["quiz"]["items"]:
                if item["item"]["visibility"] != "hidden":
                    continue
                for part in (item, item["item"]):
                    assert part["answer"] is None and part["feedback"] == "" and part["wrong"] == [] \
                        and part["hint"] is None
                    assert not any(c["correct"] or c["feedback"] or c["mistake"] for c in part["choices"])
                assert item["item"]["rubric"] == []
                assert all("{" + name + "}" in course.quiz.item(item["item"]["id"]).prompt
                           or any("{" + name + "}" in c.text for c in course.quiz.item(item["item"]["id"]).choices)
                           for name in item["params"]), (item["item"]["id"], item["params"])

    def test_the_withheld_cases(self, course):
        """Withheld: every `reveal: false` case and every shapes case (the shapes are the answer),
        never a case that must raise; the packaged course withholds its counts, two parameter counts
        and the public shape predictions."""
        named = {(p.id, c.name) for p in course.problems for c in p.cases if not c.hidden and withheld(p, c)}
        assert {p for p, _ in named} == {"count_routing_distributions", "parameter_count", "predict_shapes"}
        shapes = course.problem("predict_shapes")
        assert shapes.compare.kind is CompareKind.SHAPES
        assert {c.name for c in shapes.cases if not c.hidden and not c.raises} == \
            {c for p, c in named if p == "predict_shapes"}
        assert not any(withheld(p, c) for p in course.problems for c in p.cases if c.raises)


# --------------------------------------------------------------------------- mha check still checks

def _bundle_check(released: Path, student: str, submission: Path):
    """`mha check` of the bundle's seed cases for `student`, problems only (no answers.yaml here)."""
    seed_cases = SeedCases.load(released / "grader" / BUNDLE_FOLDER / f"{student_token(student)}.json")
    return grade_seed_cases(seed_cases, submission, include_hidden=False,
                            problem_ids=[p.id for p, _ in seed_cases.problems])


class TestCheckStillChecks:
    @pytest.mark.parametrize("student", STUDENTS)
    def test_the_model_answer_passes_every_case_that_may_be_shown(self, course, released, student, tmp_path):
        """Each student's `mha check` of the model answer: every public case whose value may be shown
        passes, every withheld one is graded on submission, and the check passes."""
        submission = tmp_path / "attention.py"
        submission.write_text((SOLUTIONS / "attention.py").read_text())
        result = _bundle_check(released, student, submission)
        assert result.passed
        for problem, checked in zip(course.problems, result.problems):
            public = [c for c in problem.cases if not c.hidden]
            assert [c.name for c in checked.cases] == [c.name for c in public]
            for case, outcome in zip(public, checked.cases):
                expected = CaseStatus.ON_SUBMISSION if withheld(problem, case) else CaseStatus.PASSED
                assert outcome.status is expected, (problem.id, case.name, outcome.summary, outcome.detail)
                if expected is CaseStatus.ON_SUBMISSION:
                    assert outcome.summary == ON_SUBMISSION and "graded on submission" in outcome.detail

    @pytest.mark.parametrize("mistake", ["softmax-wrong-axis", "ignores-layers", "shapes-head-output-full-width"])
    def test_pass_and_fail_as_mha_grade_says_on_the_cases_that_may_be_shown(self, course, released, mistake,
                                                                            tmp_path):
        """A submission with a known mistake: on each case whose value may be shown, the bundle says
        what `mha grade` says (status, summary, expected vs got); a withheld case answered in the
        right form is graded on submission, whatever its value."""
        bug = next(b for b in BUGS if b.mistake == mistake)
        submission = tmp_path / "attention.py"
        submission.write_text(buggy_submission(bug))
        student = STUDENTS[1]
        checked = _bundle_check(released, student, submission)
        graded = grade(course, submission, include_hidden=False, problem_ids=[p.id for p in course.problems],
                       seed=student_seed(SECRET, student))
        problem = course.problem(bug.problem)
        here = next(p for p in checked.problems if p.id == bug.problem)
        there = next(p for p in graded.problems if p.id == bug.problem)
        failed_there = [c for c in there.cases if not c.passed]
        assert failed_there
        for case, a, b in zip([c for c in problem.cases if not c.hidden], here.cases, there.cases):
            if withheld(problem, case):
                assert a.status is CaseStatus.ON_SUBMISSION, (case.name, a.summary)
            else:
                assert (a.status, a.summary, a.detail) == (b.status, b.summary, b.detail), case.name

    def test_a_withheld_case_checks_the_form(self, released, tmp_path):
        """A count of the wrong type fails on its form ("expected an int"), with no expected value."""
        submission = tmp_path / "attention.py"
        submission.write_text((SOLUTIONS / "attention.py").read_text()
                              + "\n\ndef count_routing_distributions(*args, **kwargs):\n    return 1.5\n")
        result = _bundle_check(released, STUDENTS[2], submission)
        count = next(p for p in result.problems if p.id == "count_routing_distributions")
        assert {c.status for c in count.cases} == {CaseStatus.FAILED}
        assert {(c.summary, c.detail) for c in count.cases} == {("wrong type", "expected an int, got the float 1.5")}
        assert not result.passed

    def test_mha_check_in_the_started_folder(self, course, released, started, tmp_path):
        """The bundle's own `mha check --student` in `mha init`'s folder, on the model answer: exit 0,
        every problem passes, and each withheld case is named as graded on submission."""
        folder = tmp_path / "work"
        folder.mkdir()
        for name in ("attention.py", "answers.yaml"):
            (folder / name).write_text((started / name).read_text())
        (folder / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
        run = _student_mha(released, "check", "--student", STUDENTS[0], *[p.id for p in course.problems], cwd=folder)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
        assert "graded on submission" in run.stdout
        assert "count_routing_distributions: Count the routing distributions  [graded on submission]" in run.stdout
        withheld_names = [c.name for p in course.problems for c in p.cases if not c.hidden and withheld(p, c)]
        text = re.sub(r"\s+", " ", run.stdout)
        assert all(name in text for name in withheld_names)
        assert f"; {len(withheld_names)} cases graded on submission" in text
