"""The concept quiz: quiz.yaml validation, seeded draws, grading answers.yaml, and the commands."""
from __future__ import annotations

import json
import re
import shutil
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.commands import main
from grader.course.loader import load_course
from grader.course.model import QuizKind
from grader.course.quiz import (
    DEFAULT_SEED,
    answer_key,
    answers_template,
    check_quiz,
    draw,
    draw_params,
    fill,
    load_quiz,
)
from grader.course.yamlio import load_yaml
from grader.errors import ExitCode, SpecErrors
from grader.grading.answers import MAX_BYTES, grade_quiz, your_numbers
from grader.grading.grade import grade
from grader.grading.results import CaseStatus

from .conftest import COURSE, COURSE_CODE, EXERCISES, SOLUTIONS

GOOD = """\
title: Q
items:
  - id: pick
    title: Pick one
    kind: multiple_choice
    points: 1
    visibility: public
    prompt: Which?
    choices:
      - text: Right
        correct: true
        feedback: Because.
      - text: Wrong
        mistake: wrong_pick
        feedback: Not so.
  - id: width
    title: Width
    kind: numeric
    points: 2
    visibility: hidden
    params:
      W: {choice: [2, 4]}
    prompt: Width {W}?
    answer: one_head_distributions
    feedback: One.
    wrong:
      - value: W
        mistake: counted_width
        feedback: That is {W}.
"""


@pytest.fixture(scope="module")
def quiz():
    """Every item of the shipped quiz, the optional ones switched on: all are graded and checked here."""
    return load_course(EXERCISES).with_optional().quiz


def write(tmp_path: Path, text: str, name: str = "quiz.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_quiz(path, COURSE_CODE)
    return [str(e) for e in info.value.errors]


def graded(quiz, tmp_path: Path, text: str | None, *, seed: int = DEFAULT_SEED, include_hidden: bool = True):
    """Grade an answers.yaml with `text` (None: no file); returns {item id: ProblemResult}."""
    path = tmp_path / "answers.yaml"
    if text is not None:
        path.write_text(text)
    outcome = grade_quiz(quiz, path, seed=seed, include_hidden=include_hidden)
    return {r.id: r for r in outcome.items}


class TestLoadQuiz:
    def test_good_file_loads(self, tmp_path):
        """A valid quiz file becomes items with lettered choices, params and known-wrong values."""
        quiz = load_quiz(write(tmp_path, GOOD), COURSE_CODE)
        pick, width = quiz.items
        assert [c.letter for c in pick.choices] == ["a", "b"] and pick.choices[1].mistake == "wrong_pick"
        assert width.kind is QuizKind.NUMERIC and width.hidden and width.wrong[0].value == "W"
        assert quiz.max_score == 3.0 and width.line == 16

    @pytest.mark.parametrize("old,new,message", [
        ("kind: multiple_choice", "kind: essay",
         ":5: 'kind' must be one of multiple_choice, multiple_answers, numeric, written (got 'essay')"),
        ("    title: Pick one\n", "    title: Pick one\n    colour: red\n",
         ":5: unknown key 'colour' in a quiz item (allowed: answer, choices, feedback, hint, id, kind, params, "
         "points, prompt, rubric, shuffle, title, tolerance, visibility, wrong)"),
        ("    title: Pick one\n", "    title: Pick one\n    shuffle: sometimes\n",
         ":5: 'shuffle' must be true or false (got 'sometimes')"),
        ("    answer: one_head_distributions\n", "    answer: one_head_distributions\n    shuffle: false\n",
         ":25: 'shuffle' does not apply to a numeric item (only to multiple_choice and multiple_answers items)"),
        ("visibility: public", "visibility: secret", ":7: 'visibility' must be public or hidden (got 'secret')"),
        ("        mistake: wrong_pick\n", "        correct: true\n",
         ":9: a multiple_choice item needs exactly one correct choice (got 2: a, b)"),
        ("        mistake: wrong_pick\n", "",
         ":13: wrong choice b needs 'mistake': a short id of the misconception it shows"),
        ("prompt: Which?", "prompt: Which {X}?",
         ":8: 'prompt' uses {X}, which is not a parameter (params: none defined; write {{ and }} for literal braces)"),
        ("    prompt: Which?\n", "    prompt: Which?\n    answer: 1\n", ":9: 'answer' does not apply to a multiple_choice item"),
        ("    answer: one_head_distributions\n", "    answer: one_head_distributions\n    choices: []\n",
         ":25: 'choices' does not apply to a numeric item"),
        ("    answer: one_head_distributions\n", "    answer: one_head_distributions\n    tolerance: -1\n",
         ":25: 'tolerance' must be 0 or more (got -1)"),
        ("answer: one_head_distributions", "answer: __import__('os')",
         ":24: 'answer' must be a number, a parameter (params: W) or an answer function of the "
         "course code (course.py) (got \"__import__('os')\")"),
        ("answer: one_head_distributions", "answer: head_count",
         ":24: answer function 'head_count' needs parameter 'd_model', which 'params' does not define"),
        ("    answer: one_head_distributions\n", "", ":16: a numeric item is missing required key 'answer'"),
        ("W: {choice: [2, 4]}", "W: {randint: [4, 2]}",
         ":22: params.W: 'randint' must be [low, high] ints with low <= high (got [4, 2])"),
        ("mistake: counted_width", "mistake: Counted Width",
         ":28: 'mistake' must be a short id like counted_value_width (got 'Counted Width')"),
        ("id: width", "id: pick", ":16: duplicate quiz item id 'pick' (first on line 3)"),
        ("prompt: Which?", "prompt: [Which?", ":8: invalid YAML: expected ',' or ']', but got '?'"),
    ])
    def test_bad_file_gives_exact_message(self, tmp_path, old, new, message):
        """Each kind of mistake in quiz.yaml is one line: path:line: what is wrong (got X)."""
        assert old in GOOD
        path = write(tmp_path, GOOD.replace(old, new, 1))
        assert errors_of(path) == [f"{path}{message}"]

    def test_several_errors_reported_together(self, tmp_path):
        """Independent errors in one quiz file are all listed, in file order."""
        path = write(tmp_path, GOOD.replace("points: 1", "points: 0").replace("kind: numeric", "kind: number"))
        assert errors_of(path) == [f"{path}:6: 'points' must be greater than 0 (got 0)",
                                   f"{path}:18: 'kind' must be one of multiple_choice, multiple_answers, numeric, "
                                   "written (got 'number')"]

    def test_course_reports_a_missing_quiz_file(self, tmp_path):
        """A `quiz:` key naming no file is an error on that key's line."""
        shutil.copytree(EXERCISES, tmp_path / "ex")
        course = tmp_path / "ex" / "assignment.yaml"
        course.write_text(course.read_text().replace("quiz: quiz.yaml", "quiz: quizz.yaml"))
        with pytest.raises(SpecErrors) as info:
            load_course(tmp_path / "ex")
        assert str(info.value) == f"{course}:4: quiz file 'quizz.yaml' not found beside assignment.yaml"

    def test_quiz_ids_must_not_be_problem_ids(self, tmp_path):
        """A quiz item named like a problem would be ambiguous in reports and `mha show`."""
        shutil.copytree(EXERCISES, tmp_path / "ex")
        quiz = tmp_path / "ex" / "quiz.yaml"
        quiz.write_text(quiz.read_text().replace("id: pruning", "id: softmax"))
        with pytest.raises(SpecErrors) as info:
            load_course(tmp_path / "ex")
        line = next(i for i, text in enumerate(quiz.read_text().splitlines(), 1) if "id: softmax" in text)
        assert str(info.value) == f"{quiz}:{line}: quiz item id 'softmax' is also a problem id"

    def test_shipped_quiz_covers_the_lesson(self, quiz):
        """The shipped quiz has 10-40 items of every kind, public and hidden, with feedback everywhere."""
        assert 10 <= len(quiz.items) <= 40
        assert {i.kind for i in quiz.items} == set(QuizKind)
        assert {i.hidden for i in quiz.items} == {True, False}
        for item in quiz.items:
            assert all(c.feedback and (c.correct or c.mistake) for c in item.choices), item.id
            assert item.kind is not QuizKind.NUMERIC or (item.feedback and item.params), item.id

    def test_shipped_quiz_passes_the_draw_check(self, quiz):
        """Every draw's numbers compute and no known-wrong value equals the answer."""
        assert check_quiz(quiz) is None


class TestDraws:
    def test_same_seed_same_numbers(self, quiz):
        """Drawing twice with one seed gives the same params and the same rendered prompt."""
        for item in quiz.items:
            assert draw_params(item, 7) == draw_params(item, 7)
            assert draw(item, 7).prompt == draw(item, 7).prompt

    def test_a_let_name_draws_from_its_own_generator_kept_or_not(self):
        """A `let:` integer is what the generator of (seed, name) draws, the first time and when the
        draw is read back from what the process kept (generators._let_draw): a student's numbers do
        not depend on what was drawn before them."""
        import zlib

        import numpy as np

        from grader.course.generators import _let_draw, realize_let
        let = {"T": {"randint": [3, 9]}, "h": {"choice": [1, 2, 4, 8]}, "n": "$T*$h"}
        _let_draw.cache_clear()
        for seed in (0, 7, 123456789, 2**40 + 3):  # one seed's kept draws are never another's
            drawn = [realize_let(let, seed) for _ in range(2)]  # the second one read back from the kept draws
            T = int(np.random.default_rng([seed, zlib.crc32(b"let:T")]).integers(3, 10))
            h = [1, 2, 4, 8][int(np.random.default_rng([seed, zlib.crc32(b"let:h")]).integers(4))]
            assert drawn == [{"T": T, "h": h, "n": T * h}] * 2
        assert _let_draw.cache_info().hits >= 2

    def test_two_seeds_differ_somewhere(self, quiz):
        """Two seeds give different numbers for at least one item, and so different answer keys."""
        assert any(draw_params(i, 0) != draw_params(i, 1) for i in quiz.items)
        assert answer_key(quiz, 0) != answer_key(quiz, 1)

    def test_fill_replaces_only_placeholders(self):
        """{name} becomes the param; {{ and }} become braces; nothing else changes."""
        assert fill("W={W}, set {{W}}, d_{k}", {"W": 64, "k": 2}) == "W=64, set {W}, d_2"

    def test_answers_come_from_the_reference(self):
        """The lesson's numbers: one distribution per head and query, 768/64 = 12 heads, head 2 reads [0.1, 0.9, 1, 18],
        and joined head after head the two readings are [0.8, 0.2, 8, 4, 0.1, 0.9, 1, 18]."""
        assert [COURSE.one_head_distributions(W) for W in (2, 128)] == [1, 1]
        assert COURSE.head_count(768, 64) == 12
        assert [COURSE.head2_reading(c) for c in (1, 2, 3, 4)] == pytest.approx([0.1, 0.9, 1, 18])
        assert [COURSE.concat_reading(8, 1, c) for c in range(1, 9)] == pytest.approx([0.8, 0.2, 8, 4, 0.1, 0.9, 1, 18])
        assert [COURSE.concat_interleaved(8, 1, c) for c in range(1, 9)] == pytest.approx(
            [0.8, 0.1, 0.2, 0.9, 8, 1, 4, 18])

    def test_check_catches_a_wrong_value_equal_to_the_answer(self, tmp_path):
        """A known-wrong value that equals the right answer is reported on its line."""
        quiz = load_quiz(write(tmp_path, GOOD.replace("value: W", "value: 1")), COURSE_CODE)
        drawn = draw_params(quiz.items[1], 0)["W"]
        with pytest.raises(SpecErrors) as info:
            check_quiz(quiz)
        assert str(info.value) == f"{quiz.path}:27: known-wrong value 1 equals the answer when W={drawn}"

    def test_check_tries_params_that_no_checked_seed_draws(self, tmp_path):
        """A known-wrong value equal to the answer for one set of params only is reported even when
        none of the 64 seeds checked draws that set (a student's seed may)."""
        quiz = load_quiz(write(tmp_path, GOOD.replace("W: {choice: [2, 4]}", "W: {randint: [1, 250]}")), COURSE_CODE)
        assert 1 not in {draw_params(quiz.items[1], seed)["W"] for seed in range(64)}  # W = 1: the only clash
        with pytest.raises(SpecErrors) as info:
            check_quiz(quiz)
        assert str(info.value) == f"{quiz.path}:27: known-wrong value 1 equals the answer when W=1"

    def test_check_of_many_params_uses_the_seeds_draws(self, tmp_path):
        """An item with more sets of params than are tried one by one is checked on what the seeds
        draw, and a clash is reported as the first seed draws it."""
        text = GOOD.replace("W: {choice: [2, 4]}", "W: {randint: [2, 100000]}").replace("value: W", "value: 1")
        quiz = load_quiz(write(tmp_path, text), COURSE_CODE)
        drawn = draw_params(quiz.items[1], 0)["W"]
        with pytest.raises(SpecErrors) as info:
            check_quiz(quiz)
        assert str(info.value) == f"{quiz.path}:27: known-wrong value 1 equals the answer when W={drawn}"


class TestAnswerFiles:
    def test_template_lists_every_item_blank_with_its_form(self):
        """exercises/answers.yaml is the generated template: every item the core asks,
        blank, with the expected form."""
        quiz = load_course(EXERCISES).quiz
        text = (EXERCISES / "answers.yaml").read_text()
        assert text == answers_template(quiz)
        assert load_yaml(EXERCISES / "answers.yaml") == {i.id: None for i in quiz.items}
        assert "# one letter, like b" in text and "# a list of letters, like [a, c]" in text

    def test_solutions_hold_the_answer_key(self, quiz):
        """solutions/answers.yaml parses to the answer key of the default seed, for every item (an
        optional one switched on finds its model answer there)."""
        answers = load_yaml(SOLUTIONS / "answers.yaml")
        written = {i.id for i in quiz.items if i.manual}  # graded by hand: a model answer, no key
        assert {k: v for k, v in answers.items() if k not in written} == answer_key(quiz, DEFAULT_SEED)
        assert all(isinstance(answers[i], str) and 200 < len(answers[i]) < 500 for i in written)


class TestGradeQuiz:
    def test_answer_key_gets_full_marks(self, quiz, tmp_path):
        """The key scores every point, with the right answer's feedback as the message."""
        results = graded(quiz, tmp_path, (SOLUTIONS / "answers.yaml").read_text())
        assert all(r.passed and r.score == r.max_score for r in results.values() if r.counted)
        assert results["widen_values"].message.startswith("Right. d_v sets how much content")

    def test_blank_template_gets_zero(self, quiz, tmp_path):
        """Every blank answer is 0 points and 'not answered yet'."""
        results = graded(quiz, tmp_path, (EXERCISES / "answers.yaml").read_text())
        assert sum(r.score for r in results.values()) == 0
        assert {(c.status, c.summary) for r in results.values() for c in r.cases} == {
            (CaseStatus.NOT_ANSWERED, "not answered yet")}

    def test_missing_file_is_not_answered(self, quiz, tmp_path):
        """Without answers.yaml every item is 0 and says so."""
        results = graded(quiz, tmp_path, None)
        assert {r.cases[0].summary for r in results.values()} == {"not answered yet (no answers.yaml beside attention.py)"}

    def test_each_wrong_choice_gets_its_feedback(self, quiz, tmp_path):
        """Choosing any wrong choice of a multiple-choice item fails with that choice's feedback and mistake id."""
        checked = 0
        for item in (i for i in quiz.items if i.kind is QuizKind.MULTIPLE_CHOICE):
            for choice in (c for c in draw(item, DEFAULT_SEED).choices if not c.correct):  # params filled in
                case = graded(quiz, tmp_path, f"{item.id}: {choice.letter}\n")[item.id].cases[0]
                assert (case.status, case.summary) == (CaseStatus.FAILED, f"you chose {choice.letter}")
                assert (case.mistake, case.mistake_message) == (choice.mistake, choice.feedback)
                checked += 1
        assert checked >= 20

    def test_each_known_wrong_value_gets_its_feedback(self, quiz, tmp_path):
        """A known-wrong number fails with its misconception; the feedback has the drawn numbers filled in."""
        for item in (i for i in quiz.items if i.wrong):
            v = draw(item, DEFAULT_SEED)
            for wrong in v.wrong:
                case = graded(quiz, tmp_path, f"{item.id}: {wrong.value!r}\n")[item.id].cases[0]
                numbers = your_numbers(v)
                assert case.status is CaseStatus.FAILED and case.summary == \
                    f"{wrong.value:g} is not the answer" + (f" ({numbers})" if numbers else "")
                assert (case.mistake, case.mistake_message) == (wrong.mistake, wrong.feedback)
                assert "{" not in case.mistake_message

    def test_unknown_wrong_number_gets_the_hint(self, quiz, tmp_path):
        """A wrong number that no misconception explains names no mistake and shows the item's hint."""
        result = graded(quiz, tmp_path, "distributions_one_head: 7\n")["distributions_one_head"]
        w = draw(quiz.item("distributions_one_head"), DEFAULT_SEED).params["W"]
        assert result.cases[0].summary == f"7 is not the answer (your numbers: W={w})"  # the numbers it was judged on
        assert result.cases[0].mistake is None
        assert result.hints == ("Count softmax normalizations, not coordinates.",)

    def test_multiple_answers_name_false_choices_and_count_missing_ones(self, quiz, tmp_path):
        """[b, c] on the heads item: c's feedback, its mistake id, and one true statement left out."""
        case = graded(quiz, tmp_path, "more_heads_fixed_width: [b, c]\n")["more_heads_fixed_width"].cases[0]
        item = quiz.item("more_heads_fixed_width")
        assert case.summary == "you chose [b, c]; 1 true statement left out"
        assert (case.mistake, case.mistake_message) == ("narrow_heads_more_expressive", f"(c) {item.choices[2].feedback}")
        partial = graded(quiz, tmp_path, "more_heads_fixed_width: [d]\n")["more_heads_fixed_width"]
        assert (partial.cases[0].mistake, partial.cases[0].summary) == \
            ("heads_keep_width", "you chose [d]; 1 true statement left out; partial credit 50%")
        assert (partial.passed, partial.score) == (False, 1.0)  # one of two true statements: half of 2 points

    @pytest.mark.parametrize("answer,score", [("[b, d]", 2.0), ("[d]", 1.0), ("[b]", 1.0), ("[b, c]", 0.0),
                                              ("[b, c, d]", 1.0), ("[a, b, c, d]", 0.0), ("[c]", 0.0)])
    def test_multiple_answers_partial_credit_with_penalty(self, quiz, tmp_path, answer, score):
        """Each true statement chosen earns 1/n of the points, each false one takes 1/n away, never below 0."""
        result = graded(quiz, tmp_path, f"more_heads_fixed_width: {answer}\n")["more_heads_fixed_width"]
        assert result.score == score

    @pytest.mark.parametrize("answer,passed", [("0.25", True), ("0.2501", True), ("0.24991", True),
                                               ("0.2502", False), ("0.2498", False)])
    def test_numeric_range_is_rounded_outward_to_4_decimals(self, quiz, tmp_path, answer, passed):
        """A tolerance of 1e-6 accepts what Canvas accepts: [0.2499, 0.2501] around 0.25, bounds included."""
        from dataclasses import replace
        item = replace(quiz.item("distributions_one_head"), params={}, prompt="How much?", feedback="Right.",
                       answer=0.25, tolerance=1e-6, wrong=())
        (tmp_path / "answers.yaml").write_text(f"{item.id}: {answer}\n")
        result = grade_quiz(replace(quiz, items=(item,)), tmp_path / "answers.yaml", seed=0).items[0]
        assert result.passed is passed

    def test_answers_are_read_leniently_where_unambiguous(self, quiz, tmp_path):
        """Upper-case letters, 'b, d' as text and a quoted number are all accepted."""
        results = graded(quiz, tmp_path, "widen_values: B\nmore_heads_fixed_width: d, b\nhead_count: '10'\n")
        assert results["widen_values"].passed and results["more_heads_fixed_width"].passed and results["head_count"].passed

    @pytest.mark.parametrize("item,answer,message", [
        ("widen_values", "[a, b]",
         "answer must be one letter from a to d (got a list ['a', 'b']); this item has one correct choice"),
        ("widen_values", "3", "answer must be one letter from a to d (got the number 3)"),
        ("widen_values", "f", "answer must be one letter from a to d (got 'f': there is no choice f)"),
        ("widen_values", "maybe b", "answer must be one letter from a to d (got 'maybe b')"),
        ("widen_values", "true", "answer must be one letter from a to d (got true)"),
        ("more_heads_fixed_width", "2", "answer must be a list of letters from a to e, like [a, c] (got the number 2)"),
        ("more_heads_fixed_width", "[a, z]",
         "answer must be a list of letters from a to e, like [a, c] (got 'z' in the list: there is no choice z)"),
        ("more_heads_fixed_width", "[a, 1]",
         "answer must be a list of letters from a to e, like [a, c] (got the number 1 in the list)"),
        ("more_heads_fixed_width", "[b, b]", "answer lists choice b twice"),
        ("head_count", "twelve", "answer must be a number, like 0.25 (got 'twelve')"),
        ("head_count", "[12]", "answer must be a number, like 0.25 (got a list [12])"),
        ("head_count", "{h: 12}", "answer must be a number, like 0.25 (got a mapping {'h': 12})"),
        ("head_count", ".inf", "answer must be a finite number (got inf)"),
        ("attention_budget", "10%", "answer must be a number, like 0.25 (got '10%')"),
    ])
    def test_wrong_type_answers_get_exact_messages(self, quiz, tmp_path, item, answer, message):
        """An answer of the wrong form is an error naming the line, what was expected and what was got."""
        case = graded(quiz, tmp_path, f"# my answers\n{item}: {answer}\n")[item].cases[0]
        assert (case.status, case.summary) == (CaseStatus.ERROR, f"answers.yaml:2: {message}")

    @pytest.mark.parametrize("text,message", [
        ("pruning: [a\nhead_count: 3\n", "answers.yaml:2: invalid YAML: expected ',' or ']', but got ':'"),
        ("- pruning: a\n",
         "answers.yaml:1: must map quiz item ids to answers, like `pruning: b` (got a list [{'pruning': 'a'}])"),
        ("pruning: !!python/object:os.system a\n",
         "answers.yaml:1: invalid YAML: could not determine a constructor for the tag "
         "'tag:yaml.org,2002:python/object:os.system'"),
        ("x" * (MAX_BYTES + 1), f"answers.yaml is too large (more than {MAX_BYTES} bytes)"),
    ])
    def test_unusable_file_fails_every_item_with_its_reason(self, quiz, tmp_path, text, message):
        """An unreadable answers file is an error on every item, never a traceback."""
        results = graded(quiz, tmp_path, text)
        assert {(r.cases[0].status, r.cases[0].summary) for r in results.values()} == {(CaseStatus.ERROR, message)}

    def test_a_duplicate_key_costs_its_item_only(self, quiz, tmp_path):
        """An item answered twice is an error naming both lines; the other items are graded."""
        results = graded(quiz, tmp_path, "pruning: a\nhead_count: 12\npruning: b\n")
        case = results["pruning"].cases[0]
        assert (case.status, case.summary) == (CaseStatus.ERROR, "answers.yaml:3: duplicate key 'pruning', on lines "
                                                                 "1 and 3: answer each item once (keep one line)")
        assert results["head_count"].cases[0].status is not CaseStatus.ERROR
        assert results["head_count"].cases[0].summary != case.summary

    def test_a_duplicate_key_inside_an_answer_is_the_files_error(self, quiz, tmp_path):
        """A key written twice inside one answer (a mapping) leaves the file's meaning unclear: every item says so."""
        results = graded(quiz, tmp_path, "pruning: {a: 1, a: 2}\n")
        assert {r.cases[0].summary for r in results.values()} == {"answers.yaml:1: duplicate key 'a'"}

    def test_alias_bomb_is_described_briefly(self, quiz, tmp_path):
        """A YAML alias bomb as an answer is rejected fast with a short message."""
        lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
        start = time.monotonic()
        results = grade_quiz(quiz, write(tmp_path, "\n".join(lines + ["more_heads_fixed_width: *l8\n"]), "answers.yaml"),
                             seed=DEFAULT_SEED)
        case = next(r for r in results.items if r.id == "more_heads_fixed_width").cases[0]
        assert time.monotonic() - start < 2
        assert case.status is CaseStatus.ERROR and len(case.summary) < 300

    def test_unknown_item_is_a_note_with_a_suggestion(self, quiz, tmp_path):
        """A misspelt item id is reported with its line and the likely intended id."""
        outcome = grade_quiz(quiz, write(tmp_path, "pruning: a\nwiden_value: b\n", "answers.yaml"), seed=DEFAULT_SEED)
        assert outcome.messages == ("answers.yaml:2: unknown quiz item 'widen_value' (did you mean 'widen_values'?)",)

    def test_hidden_items_are_only_checked_for_form_without_include_hidden(self, quiz, tmp_path):
        """`mha check` mode: a hidden item's well-formed answer is 'recorded' (never passed, never in the
        score), right or wrong; a bad form is still an error."""
        right = graded(quiz, tmp_path, "pruning: a\n", include_hidden=False)["pruning"]
        wrong = graded(quiz, tmp_path, "pruning: b\n", include_hidden=False)["pruning"]
        for result in (right, wrong):
            assert result.cases[0].status is CaseStatus.RECORDED and not result.passed and not result.counted
            assert result.cases[0].name == "answer format" and not result.cases[0].hidden
            assert result.message == "answer recorded; this hidden item is graded by `mha grade`"
        bad = graded(quiz, tmp_path, "pruning: [a]\n", include_hidden=False)["pruning"].cases[0]
        assert bad.status is CaseStatus.ERROR

    def test_hidden_items_are_graded_with_include_hidden(self, quiz, tmp_path):
        """`mha grade` mode: a hidden item is graded, with its feedback, as a hidden case."""
        case = graded(quiz, tmp_path, "two_relations: a\n")["two_relations"].cases[0]
        assert case.hidden and case.status is CaseStatus.FAILED and case.mistake == "width_adds_routes"
        assert case.detail == "" and case.inputs == ""

    def test_seed_picks_the_numbers_that_are_graded(self, quiz, tmp_path):
        """The default key fails a seed whose head count differs, and that seed's own key passes."""
        seed = next(s for s in range(1, 50) if answer_key(quiz, s)["head_count"] != answer_key(quiz, 0)["head_count"])
        key = (SOLUTIONS / "answers.yaml").read_text()
        assert not graded(quiz, tmp_path, key, seed=seed)["head_count"].passed
        assert graded(quiz, tmp_path, answers_template(quiz, answer_key(quiz, seed)), seed=seed)["head_count"].passed


class TestGradingAndCommands:
    def test_grade_solutions_is_full_marks_with_the_quiz(self, cli):
        """`mha grade solutions` reports 100%, every quiz item included and passed."""
        result = cli("grade", str(SOLUTIONS), "--format", "json")
        data = json.loads(result.stdout)
        quiz_ids = [i.id for i in load_course(EXERCISES).quiz.items]
        assert result.exit_code == 0
        assert data["score"] == data["max_score"] > 0
        assert [p["id"] for p in data["problems"]][-len(quiz_ids):] == quiz_ids
        assert all(p["passed"] for p in data["problems"] if not p.get("manual"))

    def test_grade_stubs_is_zero_with_not_answered(self, cli):
        """`mha grade exercises` is 0 and every quiz item says 'not answered yet'."""
        result = cli("grade", str(EXERCISES))
        assert result.exit_code == 0
        assert "Score: 0/" in result.stdout
        every = load_course(EXERCISES).quiz.items
        items = [i for i in every if not i.manual]
        # the scored items on one line; the written items on one line of their own, under "Written answers";
        # the summary's quiz line (TODO, as the items are)
        assert result.stdout.count("not answered yet") == 3
        assert re.search(r"^  TODO  quiz +0/\d+  \d+ items not answered yet$", result.stdout, re.M)
        written = ", ".join(i.id for i in every if i.manual)
        assert f"not answered yet, {sum(i.points for i in every if i.manual):g} points by hand: {written}" \
            in result.stdout
        assert f"not answered yet, 0 of {sum(i.points for i in items):g} points: " + ", ".join(i.id for i in items) \
            in re.sub(r"\n +", " ", result.stdout)

    def test_gradescope_tags_name_the_misconception(self, cli, tmp_path):
        """A wrong choice's mistake id becomes a Gradescope tag of the quiz item's test."""
        shutil.copy(SOLUTIONS / "attention.py", tmp_path / "attention.py")
        (tmp_path / "answers.yaml").write_text("two_relations: a\n")
        out = tmp_path / "results.json"
        assert cli("grade", str(tmp_path), "--format", "gradescope", "--output", str(out)).exit_code == 0
        test = next(t for t in json.loads(out.read_text())["tests"] if t["name"].startswith("two_relations:"))
        assert test["tags"] == ["two_relations", "width_adds_routes"] and test["score"] == 0

    def test_check_one_quiz_item_with_feedback(self, cli, tmp_path):
        """`mha check ITEM` grades just that public item and shows the chosen choice's feedback; exit 1."""
        shutil.copy(SOLUTIONS / "attention.py", tmp_path / "attention.py")
        (tmp_path / "answers.yaml").write_text("precise_claim: b\n")
        result = cli("check", "precise_claim", "--path", str(tmp_path / "attention.py"))
        assert result.exit_code == ExitCode.FAILED
        assert "FAIL  precise_claim: A precise claim about heads  [0/1]" in result.stdout
        assert "likely mistake (heads_are_rules): Too strong." in result.stdout
        assert "Score: 0/1 (0%)" in result.stdout
        assert "softmax" not in result.stdout

    def test_check_solutions_records_hidden_items(self, cli):
        """`mha check` on the model answers passes and says hidden items are only recorded."""
        result = cli("check", "--path", str(SOLUTIONS / "attention.py"))
        hidden = [i for i in load_course(EXERCISES).quiz.items if i.hidden]
        assert result.exit_code == 0
        assert f"{len(hidden)} hidden items recorded: graded later by `mha grade`, not in this score" \
            in result.stdout
        assert "PASS  two_relations:" not in result.stdout

    def test_show_renders_a_quiz_item(self, cli, quiz):
        """`mha show ITEM` prints the prompt with the default seed's numbers, the choices and how to answer."""
        numeric = cli("show", "head_count")
        d = draw_params(quiz.item("head_count"), DEFAULT_SEED)
        assert numeric.exit_code == 0
        assert f"d_model = {d['d_model']}" in numeric.stdout and "{" not in numeric.stdout
        choice = cli("show", "two_relations")
        assert "  d) " in choice.stdout and "Answer in answers.yaml as `two_relations: ...`, with one letter" in choice.stdout

    def test_list_and_validate_include_the_quiz(self, cli):
        """`mha list` names every quiz item; `mha validate` counts those the assignment asks."""
        quiz = load_course(EXERCISES).quiz
        listing = cli("list").stdout
        assert all(item.id in listing for item in quiz.items)
        result = cli("validate")
        assert result.exit_code == 0
        assert result.stdout.rstrip().endswith(f"quiz: {len(quiz.items)} items "
                                               f"({sum(not i.hidden for i in quiz.items)} public, "
                                               f"{sum(i.hidden for i in quiz.items)} hidden)")

    def test_validate_reports_a_broken_quiz(self, tmp_path):
        """An invalid quiz.yaml makes `mha validate` exit 3 with path:line."""
        shutil.copytree(EXERCISES, tmp_path / "ex")
        quiz = tmp_path / "ex" / "quiz.yaml"
        quiz.write_text(quiz.read_text().replace("answer: head_count", "answer: head_count()"))
        result = CliRunner().invoke(main, ["--course", str(tmp_path / "ex"), "validate"])
        line = next(i for i, text in enumerate(quiz.read_text().splitlines(), 1) if "head_count()" in text)
        assert result.exit_code == ExitCode.INVALID_SPEC
        assert result.stderr.startswith(f"{quiz}:{line}: 'answer' must be a number")

    def test_quiz_is_graded_without_running_student_code(self, course, tmp_path):
        """Grading only quiz items starts no sandbox and takes well under a second."""
        (tmp_path / "attention.py").write_text("import os\nos._exit(1)\n")
        (tmp_path / "answers.yaml").write_text((SOLUTIONS / "answers.yaml").read_text())
        start = time.monotonic()
        result = grade(course, tmp_path / "attention.py", problem_ids=[i.id for i in course.quiz.items])
        assert time.monotonic() - start < 1
        assert result.score == result.max_score == course.quiz.max_score and result.messages == ()
