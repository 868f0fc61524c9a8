"""Canvas QTI export: the structure text2qti produces, Canvas-safe numbers, identical re-exports."""
from __future__ import annotations

import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from grader.course.quiz import draw, load_quiz
from grader.errors import ExitCode, SpecError
from grader.exports import qti

from .conftest import COURSE_CODE

SMALL_QUIZ = """\
title: Small quiz
items:
  - id: add
    title: Add
    kind: numeric
    points: 2
    visibility: public
    prompt: What is 2 + 3?
    answer: 5
    tolerance: 0.1
    feedback: Right.
    wrong:
      - {value: 6, mistake: off_by_one, feedback: Wrong.}
  - id: pick
    title: Pick
    kind: multiple_choice
    points: 1
    visibility: public
    prompt: Which is right?
    choices:
      - {text: Wrong one., feedback: Because wrong., mistake: first_wrong}
      - {text: Right one., correct: true, feedback: Because right.}
      - {text: Another wrong., feedback: Also wrong., mistake: second_wrong}
  - id: all
    title: All
    kind: multiple_answers
    points: 1
    visibility: hidden
    prompt: Select all true.
    choices:
      - {text: True A., correct: true, feedback: A feedback}
      - {text: False B., feedback: B feedback, mistake: believed_b}
      - {text: True C., correct: true, feedback: C feedback}
  - id: why
    title: Why
    kind: written
    points: 3
    visibility: public
    prompt: Say why.
    rubric:
      - {points: 2, text: Names the <constraint>.}
      - {points: 1, text: Names the cost.}
  - id: grouped
    title: Grouped
    kind: numeric
    points: 2
    visibility: public
    params: {W: {choice: [2, 3]}}
    prompt: What is {W}?
    answer: W
    feedback: It is {W}.
"""

# The same quiz in text2qti's Markdown; the group holds the two draws of `grouped`.
SMALL_MARKDOWN = """\
Quiz title: Small quiz
Quiz description: Small quiz: exported by mha-exercises.
Shuffle answers: true

Title: Add
Points: 2
1.  What is 2 + 3?
+   Right.
-   Wrong.
=   5 +- 0.1

Title: Pick
Points: 1
2.  Which is right?
a)  Wrong one.
... Because wrong.
*b) Right one.
... Because right.
c)  Another wrong.
... Also wrong.

Title: All
Points: 1
3.  Select all true.
[*] True A.
... A feedback
[ ] False B.
... B feedback
[*] True C.
... C feedback

Title: Why
Points: 3
4.  Say why.
... Rubric: names the constraint and the cost.
____

GROUP
pick: 1
points per question: 2
Points: 2
1.  What is 2?
+   It is 2.
=   2 +- 0.1
Points: 2
2.  What is 3?
+   It is 3.
=   3 +- 0.1
END_GROUP
"""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].split(":")[-1]


def _shape(xml: bytes, skip: str | None = None) -> set[tuple[str, tuple[str, ...]]]:
    """Every element as (its path of tag names, its attribute names), namespaces dropped."""
    found = set()

    def walk(element, path):
        path = f"{path}/{_local(element.tag)}"
        if skip and _local(element.tag) == skip:
            return
        found.add((path, tuple(sorted(_local(a) for a in element.attrib))))
        for child in element:
            walk(child, path)

    walk(ET.fromstring(xml), "")
    return found


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _kinds(files: dict[str, bytes]) -> dict[str, bytes]:
    """manifest, questions and meta files of a package, by role."""
    manifest = files["imsmanifest.xml"]
    meta = next(v for k, v in files.items() if k.endswith("/assessment_meta.xml"))
    questions = next(v for k, v in files.items() if k.endswith(".xml") and "/" in k and not k.endswith("meta.xml"))
    return {"manifest": manifest, "meta": meta, "questions": questions}


def _fields(questions: bytes) -> list[tuple[str, str]]:
    """(question_type, points_possible) of every item, in order."""
    root = ET.fromstring(questions)
    out = []
    for item in root.iter():
        if _local(item.tag) != "item":
            continue
        fields = {f[0].text: f[1].text for f in item.iter() if _local(f.tag) == "qtimetadatafield"}
        out.append((fields["question_type"], fields["points_possible"]))
    return out


@pytest.fixture(scope="module")
def small_quiz(tmp_path_factory):
    path = tmp_path_factory.mktemp("quiz") / "quiz.yaml"
    path.write_text(SMALL_QUIZ)
    return load_quiz(path, COURSE_CODE)


@pytest.fixture(scope="module")
def text2qti_package(tmp_path_factory):
    """What text2qti makes of SMALL_MARKDOWN."""
    folder = tmp_path_factory.mktemp("text2qti")
    (folder / "quiz.md").write_text(SMALL_MARKDOWN)
    script = Path(sys.executable).with_name("text2qti")
    done = subprocess.run([str(script if script.exists() else shutil.which("text2qti")), "quiz.md"],
                          cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return _kinds(_files((folder / "quiz.zip").read_bytes()))


class TestStructureLikeText2qti:
    def test_zip_layout(self, small_quiz, text2qti_package):
        """imsmanifest.xml, a folder per assessment with its XML and assessment_meta.xml."""
        names = sorted(_files(qti.render(small_quiz, draws=2)))
        assert names[0] == "imsmanifest.xml" and names[-1] == "non_cc_assessments/"
        folder = names[1].split("/")[0]
        assert names[1:3] == [f"{folder}/assessment_meta.xml", f"{folder}/{folder}.xml"]

    @pytest.mark.parametrize("role", ["questions", "meta"])
    def test_same_elements_and_attributes(self, small_quiz, text2qti_package, role):
        """Every element path and attribute set matches text2qti's for the equivalent quiz."""
        ours = _kinds(_files(qti.render(small_quiz, draws=2)))
        assert _shape(ours[role]) == _shape(text2qti_package[role])

    def test_same_manifest_except_the_export_date(self, small_quiz, text2qti_package):
        """The manifest matches too, but for text2qti's lifeCycle date (left out: re-exports stay identical)."""
        ours = _kinds(_files(qti.render(small_quiz, draws=2)))
        assert _shape(ours["manifest"]) == _shape(text2qti_package["manifest"], skip="lifeCycle")

    def test_answers_shuffled_as_text2qti_writes_it(self, small_quiz, text2qti_package):
        """shuffle_answers is on, written as text2qti writes "Shuffle answers: true": Canvas orders the
        choices for each student; no item is pinned, so no render_choice carries a shuffle attribute."""
        ours = _kinds(_files(qti.render(small_quiz)))
        for meta in (ours["meta"], text2qti_package["meta"]):
            assert ET.fromstring(meta).findtext("{*}shuffle_answers") == "true"
        assert all("shuffle" not in e.attrib for e in ET.fromstring(ours["questions"]).iter()
                   if _local(e.tag) == "render_choice")

    def test_same_question_types_and_points(self, small_quiz, text2qti_package):
        """numerical, multiple choice, multiple answers and essay questions with the same points."""
        ours = _fields(_kinds(_files(qti.render(small_quiz, draws=2)))["questions"])
        assert ours == _fields(text2qti_package["questions"])
        assert [t for t, _ in ours] == ["numerical_question", "multiple_choice_question",
                                        "multiple_answers_question", "essay_question", "numerical_question",
                                        "numerical_question"]

    def test_essay_carries_the_rubric_escaped_and_no_score(self, small_quiz):
        """The written item: a free-text response, nothing that sets SCORE, the rubric (escaped) as feedback."""
        root = ET.fromstring(_kinds(_files(qti.render(small_quiz)))["questions"])
        essay = next(i for i in root.iter() if _local(i.tag) == "item" and i.get("title") == "Why")
        assert not [e for e in essay.iter() if _local(e.tag) == "setvar"]
        feedback = next(e for e in essay.iter() if _local(e.tag) == "mattext" and "Rubric" in (e.text or ""))
        assert feedback.text == ("<p>Rubric (3 points, graded by hand):</p>\n<ul><li>2 points: Names the "
                                 "&lt;constraint&gt;.</li><li>1 point: Names the cost.</li></ul>")


class TestContent:
    def test_reexport_is_byte_identical(self, course):
        """Identifiers are hashes of the content: exporting twice gives the same bytes."""
        assert qti.render(course.quiz, draws=3) == qti.render(course.quiz, draws=3)
        assert qti.render(course.quiz) != qti.render(course.quiz, seed=5)

    def test_every_wrong_choice_has_feedback_naming_its_misconception(self, course):
        """One respcondition per choice; a wrong choice's feedback names its mistake id."""
        questions = _kinds(_files(qti.render(course.quiz)))["questions"].decode()
        for item in course.quiz.items:
            for choice in item.choices:
                if not choice.correct:
                    assert f"Misconception: &lt;code&gt;{choice.mistake}&lt;/code&gt;" in questions

    def test_partial_credit_adds_plus_or_minus_100_over_n_per_choice(self, course):
        """Multiple answers: after the exact-match condition, one Add per choice, +100/n for a true statement and
        -100/n for a false one, positives first (Canvas' importer reads the sign as right or wrong)."""
        ns = f"{{{qti._QTI_NS['xmlns']}}}"
        root = ET.fromstring(_kinds(_files(qti.render(course.quiz)))["questions"])
        items = {i.title: i for i in course.quiz.items if i.kind.value == "multiple_answers"}
        assert items
        for element in root.iter(f"{ns}item"):
            item = items.get(element.get("title"))
            if item is None:
                continue
            n = sum(c.correct for c in item.choices)
            idents = [label.get("ident") for label in element.iter(f"{ns}response_label")]
            adds = [(c.find(f"{ns}conditionvar/{ns}varequal").text, float(c.find(f"{ns}setvar").text))
                    for c in element.iter(f"{ns}respcondition")
                    if c.find(f"{ns}setvar") is not None and c.find(f"{ns}setvar").get("action") == "Add"]
            expected = [(ident, 100 / n if choice.correct else -100 / n) for wanted in (True, False)
                        for ident, choice in zip(idents, item.choices) if choice.correct is wanted]
            assert adds == [(ident, pytest.approx(share)) for ident, share in expected]

    def test_groups_pick_one_of_distinct_draws(self, course):
        """--draws N: each item with params is a section selecting 1 of up to N distinct draws."""
        root = ET.fromstring(_kinds(_files(qti.render(course.quiz, draws=4)))["questions"])
        groups = [s for s in root.iter(f"{{{qti._QTI_NS['xmlns']}}}section") if s.get("ident") != "root_section"]
        assert len(groups) == sum(bool(i.params) for i in course.quiz.items)
        for group in groups:
            items = group.findall(f"{{{qti._QTI_NS['xmlns']}}}item")
            assert 2 <= len(items) <= 4 and len({i.get("title") for i in items}) == len(items)
            assert group.find(f".//{{{qti._QTI_NS['xmlns']}}}selection_number").text == "1"

    def test_numeric_range_is_rounded_outward_to_canvas_decimals(self, small_quiz):
        """Canvas keeps 4 decimals: the range never shrinks below the tolerance."""
        v = draw(small_quiz.item("add"), 0)
        assert qti.numeric_range(v) == ("5.0000", "4.9000", "5.1000")

    def test_answer_canvas_would_round_to_zero_is_an_error(self, tmp_path):
        """An answer below 1e-4 in magnitude cannot be held by Canvas: a spec error with its line."""
        path = tmp_path / "quiz.yaml"
        path.write_text(SMALL_QUIZ.replace("answer: 5\n    tolerance: 0.1", "answer: 0.00005\n    tolerance: 0.00001"))
        with pytest.raises(SpecError, match="Canvas rounds 5e-05 to 0"):
            qti.render(load_quiz(path, COURSE_CODE))

    def test_range_that_would_accept_a_known_wrong_value_is_an_error(self, tmp_path):
        """Rounding the range outward must not let in a known-wrong value."""
        path = tmp_path / "quiz.yaml"
        path.write_text(SMALL_QUIZ.replace("tolerance: 0.1", "tolerance: 0.00005").replace("{value: 6,", "{value: 5.00008,"))
        with pytest.raises(SpecError, match=r"range \[4.9999, 5.0001\] would accept the known-wrong value 5.00008"):
            qti.render(load_quiz(path, COURSE_CODE))


def test_cli_writes_the_zip(cli, tmp_path):
    """`mha export qti --out quiz.zip --draws 3` writes a readable zip; twice gives the same bytes."""
    out = tmp_path / "quiz.zip"
    assert cli("export", "qti", "--out", str(out), "--draws", "3").exit_code == 0
    first = out.read_bytes()
    assert cli("export", "qti", "--out", str(out), "--draws", "3").exit_code == 0
    assert out.read_bytes() == first and zipfile.is_zipfile(out)


def test_cli_variants_is_the_older_name_of_draws(cli, tmp_path):
    """`--variants N`, the option's older name, still works: the same bytes as `--draws N`."""
    draws, variants = tmp_path / "draws.zip", tmp_path / "variants.zip"
    assert cli("export", "qti", "--out", str(draws), "--draws", "3").exit_code == 0
    assert cli("export", "qti", "--out", str(variants), "--variants", "3").exit_code == 0
    assert variants.read_bytes() == draws.read_bytes()
    assert cli("export", "qti", "--out", str(tmp_path / "one.zip")).exit_code == 0
    assert (tmp_path / "one.zip").read_bytes() != draws.read_bytes()  # the option took effect


def test_cli_bad_draws_is_usage_error(cli, tmp_path):
    """--draws 1 is outside its range: exit 2."""
    assert cli("export", "qti", "--out", str(tmp_path / "q.zip"), "--draws", "1").exit_code == ExitCode.USAGE
