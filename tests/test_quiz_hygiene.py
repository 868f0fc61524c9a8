"""The shipped quiz cannot be answered from its wording or brute-forced in `mha check`, and the problem
prompts ask before they tell.

Rules checked over exercises/quiz.yaml (the student's view: the default seed's text, params filled in),
optional items included: the right option is rarely the longest; hedges ("may", "can"...) and
absolutes ("always", "never"...) appear on right and wrong options at similar rates; a test-wise
student who always picks the most cautious option, or always the longest, scores no more than 15
percentage points above chance, over the core and over every item; public items, which `mha check`
grades as often as a student likes, are worth at most a third of the points, in the core and over
every item; a hidden item is no near-copy of a public one; and no known-wrong number ever collides
with the answer or with another known-wrong number, for any student's numbers.
"""
from __future__ import annotations

import difflib
import itertools
import math
import re
from fractions import Fraction

import pytest

from grader.course.model import QuizKind
from grader.course.quiz import DEFAULT_SEED, draw, draw_params
from grader.grading.scoring import choices_credit, in_range

HEDGES = ("may", "can", "might", "often", "usually", "not necessarily")
ABSOLUTES = ("always", "never", "only", "nothing")
MAX_RATE_RATIO = 2.0          # a word class is no more than twice as common on one side as on the other
MAX_LONGEST_SHARE = Fraction(1, 3)
MAX_PRACTICE_SHARE = Fraction(1, 3)
MAX_PROMPT_SIMILARITY = 0.6   # difflib ratio over words between a hidden and a public prompt
MAX_SEEDS = 5000              # enough to meet every combination of params of the shipped items
# The words a test-wise student takes for caution. "can" states what the architecture allows as
# often as it hedges, so the strategy is scored with it and without it.
CAUTIOUS = ("may", "might", "could", "suggest", "suggests", "possibly", "perhaps", "likely", "probably",
            "usually", "often", "some", "depends", "depend", "not necessarily", "not enough", "cannot tell",
            "cannot say", "unclear", "only where", "as stated")
MAX_ABOVE_CHANCE = Fraction(15, 100)  # a strategy may beat chance by at most 15 percentage points
MAX_CORE_ITEMS = 20


@pytest.fixture(scope="module")
def quiz(course):
    """Every item, the optional ones switched on: all of them are checked."""
    return course.with_optional().quiz


@pytest.fixture(scope="module")
def core(core_course):
    """The core: the items the packaged course asks unless an instructor switches more on."""
    return core_course.quiz


def _choices(quiz, right: bool) -> list[str]:
    """The text of every right (or every wrong) option of every choice item, as students read it."""
    return [c.text for item in quiz.items if item.choices
            for c in draw(item, DEFAULT_SEED).choices if c.correct is right]


def _rate(texts: list[str], words: tuple[str, ...]) -> float:
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
    return sum(bool(pattern.search(t)) for t in texts) / len(texts)


def _combinations(item) -> int:
    """How many different params an item can draw: the product of its choices and ranges."""
    sizes = [len(spec["choice"]) if "choice" in spec else spec["randint"][1] - spec["randint"][0] + 1
             for spec in item.params.values() if isinstance(spec, dict)]
    return math.prod(sizes)


def _every_draw(item):
    """One draw per combination of the item's params; fails if seeds do not reach them all."""
    seen = {}
    for seed in range(MAX_SEEDS):
        key = tuple(sorted(draw_params(item, seed).items()))
        seen.setdefault(key, seed)
        if len(seen) == _combinations(item):
            break
    assert len(seen) == _combinations(item), f"{item.id}: {len(seen)} of {_combinations(item)} params drawn"
    return [draw(item, seed) for seed in seen.values()]


class TestOptions:
    def test_right_option_is_rarely_the_longest(self, quiz):
        """In at most a third of the single-answer items is the right option the longest one."""
        items = [i for i in quiz.items if i.kind is QuizKind.MULTIPLE_CHOICE]
        longest = []
        for item in items:
            choices = draw(item, DEFAULT_SEED).choices
            right = next(len(c.text) for c in choices if c.correct)
            if right >= max(len(c.text) for c in choices if not c.correct):
                longest.append(item.id)
        assert len(items) >= 10
        assert Fraction(len(longest), len(items)) <= MAX_LONGEST_SHARE, longest

    def test_right_option_is_never_much_longer(self, quiz):
        """No right option is more than a fifth longer than the longest wrong option of its item."""
        for item in (i for i in quiz.items if i.kind is QuizKind.MULTIPLE_CHOICE):
            choices = draw(item, DEFAULT_SEED).choices
            right = next(len(c.text) for c in choices if c.correct)
            assert right <= 1.2 * max(len(c.text) for c in choices if not c.correct), item.id

    @pytest.mark.parametrize("words", [HEDGES, ABSOLUTES], ids=["hedges", "absolutes"])
    def test_word_classes_on_right_and_wrong_options_alike(self, quiz, words):
        """Hedges and absolutes are on right and wrong options, at rates within a factor of 2."""
        right, wrong = _rate(_choices(quiz, True), words), _rate(_choices(quiz, False), words)
        assert right > 0 and wrong > 0, (right, wrong)
        assert max(right, wrong) / min(right, wrong) <= MAX_RATE_RATIO, (right, wrong)

    def test_claim_evidence_wrong_options_open_differently(self, quiz):
        """The wrong options of the evidence item share no opening words that would single them out."""
        wrong = [c.text for c in draw(quiz.item("claim_evidence"), DEFAULT_SEED).choices if not c.correct]
        assert len({t.split()[0] for t in wrong}) == len(wrong)

    def test_right_options_are_not_the_lessons_list(self, quiz):
        """The evidence item's right options paraphrase the lesson's "model, task, input distribution and
        analysis method" instead of repeating its words."""
        right = " ".join(c.text for c in draw(quiz.item("claim_evidence"), DEFAULT_SEED).choices if c.correct)
        for phrase in ("trained model", "input distribution", "analysis method", "the task"):
            assert phrase not in right.lower(), phrase


def _cautious_words(with_can: bool) -> re.Pattern[str]:
    words = CAUTIOUS + (("can",) if with_can else ())
    return re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)


def _random_subset_credit(n: int, right: int, k: int) -> Fraction:
    """Expected credit of k options picked uniformly at random among n, `right` of them right."""
    total = Fraction(0)
    for r in range(max(0, k - (n - right)), min(k, right) + 1):
        ways = math.comb(right, r) * math.comb(n - right, k - r)
        total += ways * Fraction(max(0, r - (k - r)), right)
    return total / math.comb(n, k)


def _strategy(item, key) -> tuple[Fraction, Fraction]:
    """(what the strategy earns, what chance earns) as shares of the item's points. Multiple choice:
    the option that `key` ranks highest, ties shared out evenly; chance is one option picked at
    random. Multiple answers: every option the key ranks above 0 (cautious) or the longer half of
    the options (longest), graded as `mha grade` does; chance is as many options picked at random,
    so only the ranking, not the number picked, can beat it."""
    choices = draw(item, DEFAULT_SEED).choices
    ranks = [key(c.text) for c in choices]
    if item.kind is QuizKind.MULTIPLE_CHOICE:
        top = [c for c, r in zip(choices, ranks) if r == max(ranks)]
        return Fraction(sum(c.correct for c in top), len(top)), Fraction(1, len(choices))
    if key is len:
        picked = sorted(range(len(choices)), key=lambda i: -ranks[i])[:len(choices) // 2]
    else:
        picked = [i for i, r in enumerate(ranks) if r > 0]
    right = [c.letter for c in choices if c.correct]
    earned = choices_credit([choices[i].letter for i in picked], right)
    return earned, _random_subset_credit(len(choices), len(right), len(picked))


def _strategy_score(items, key) -> tuple[Fraction, Fraction]:
    """The strategy's and chance's score over the choice items, as shares of their points."""
    choice_items = [i for i in items if i.kind in (QuizKind.MULTIPLE_CHOICE, QuizKind.MULTIPLE_ANSWERS)]
    points = sum(Fraction(i.points) for i in choice_items)
    scored = [(Fraction(i.points), *_strategy(i, key)) for i in choice_items]
    return sum(p * s for p, s, _ in scored) / points, sum(p * c for p, _, c in scored) / points


class TestTestWiseStrategies:
    @pytest.mark.parametrize("scope", ["core", "quiz"], ids=["core", "every item"])
    @pytest.mark.parametrize("with_can", [False, True], ids=["without can", "with can"])
    def test_the_most_cautious_option_is_no_shortcut(self, request, scope, with_can):
        """Always picking the most cautious option (the most hedging words) scores at most 15
        percentage points above chance: the cautious option is right about as often as any other."""
        pattern = _cautious_words(with_can)
        score, chance = _strategy_score(request.getfixturevalue(scope).items, lambda t: len(pattern.findall(t)))
        assert score <= chance + MAX_ABOVE_CHANCE, f"cautious {float(score):.0%}, chance {float(chance):.0%}"

    @pytest.mark.parametrize("scope", ["core", "quiz"], ids=["core", "every item"])
    def test_the_longest_option_is_no_shortcut(self, request, scope):
        """Always picking the longest option scores at most 15 percentage points above chance."""
        score, chance = _strategy_score(request.getfixturevalue(scope).items, len)
        assert score <= chance + MAX_ABOVE_CHANCE, f"longest {float(score):.0%}, chance {float(chance):.0%}"

    @pytest.mark.parametrize("scope", ["core", "quiz"], ids=["core", "every item"])
    def test_the_cautious_option_is_sometimes_right_and_sometimes_wrong(self, request, scope):
        """In the multiple-choice items where one option hedges most, it is right in some and wrong in
        others, so avoiding caution is no shortcut either."""
        pattern = _cautious_words(False)
        verdicts = []
        for item in (i for i in request.getfixturevalue(scope).items if i.kind is QuizKind.MULTIPLE_CHOICE):
            choices = draw(item, DEFAULT_SEED).choices
            counts = [len(pattern.findall(c.text)) for c in choices]
            if counts.count(max(counts)) == 1 and max(counts) > 0:
                verdicts.append(choices[counts.index(max(counts))].correct)
        assert True in verdicts and False in verdicts, verdicts

    def test_the_strategies_are_scored_as_described(self):
        """Chance for multiple answers is a random pick of the same size: 2 of 4 options, 2 right,
        earns 1/6 x 1 + 4/6 x 0 + 1/6 x 0 = 1/6 on average."""
        assert _random_subset_credit(4, 2, 2) == Fraction(1, 6)
        assert _random_subset_credit(4, 4, 2) == Fraction(1, 2)
        assert _random_subset_credit(5, 1, 1) == Fraction(1, 5)


class TestPracticeAndHidden:
    def test_the_core_is_short(self, core):
        """The core asks at most 20 items; the rest are optional (assignment.yaml)."""
        assert len(core.items) <= MAX_CORE_ITEMS, [i.id for i in core.items]

    @pytest.mark.parametrize("scope", ["core", "quiz"], ids=["core", "every item"])
    def test_practice_items_are_at_most_a_third_of_the_points(self, request, scope):
        """Public items, retried freely in `mha check`, carry at most a third of the quiz's points,
        in the core and with every optional item switched on."""
        scored = [i for i in request.getfixturevalue(scope).items if not i.manual]  # written: graded by hand
        public = sum(Fraction(i.points) for i in scored if not i.hidden)
        total = sum(Fraction(i.points) for i in scored)
        assert public / total <= MAX_PRACTICE_SHARE, f"{public} of {total} points are public"
        assert public > 0

    def test_hidden_items_are_no_near_copies_of_public_ones(self, quiz):
        """A hidden item's prompt differs from every public prompt (a new situation, not new numbers)."""
        public = [i for i in quiz.items if not i.hidden]
        for hidden, shown in itertools.product([i for i in quiz.items if i.hidden], public):
            ratio = difflib.SequenceMatcher(None, hidden.prompt.split(), shown.prompt.split()).ratio()
            assert ratio <= MAX_PROMPT_SIMILARITY, f"{hidden.id} is {ratio:.2f} similar to {shown.id}"

    def test_items_with_numbers_draw_them_per_student(self, quiz):
        """Every numeric item has params, and two students can get different numbers."""
        for item in (i for i in quiz.items if i.kind is QuizKind.NUMERIC):
            assert _combinations(item) > 1, item.id


class TestKnownWrongValues:
    @pytest.mark.parametrize("item_id", ["distributions_one_head", "attention_budget", "head_count",
                                         "two_head_reading", "double_width_budget", "two_head_reading_practice",
                                         "own_reading",
                                         "your_previous_head", "your_head_ablation", "wide_vs_narrow",
                                         "head_count_sweep", "removable_heads",
                                         "roles_emerge_step", "roles_emerge_heads"])
    def test_no_collision_for_any_students_numbers(self, quiz, item_id):
        """For every combination of params: no known-wrong value is accepted as the answer, and no two
        known-wrong values are close enough for one answer to match both."""
        item = quiz.item(item_id)
        for v in _every_draw(item):
            for w in v.wrong:
                assert not in_range(w.value, v.answer, item.tolerance), (item_id, v.params, w.mistake)
            for a, b in itertools.combinations(v.wrong, 2):
                assert abs(a.value - b.value) > 2 * item.tolerance, (item_id, v.params, a.mistake, b.mistake)

    def test_every_numeric_item_is_checked(self, quiz):
        """The list above names every numeric item of the shipped quiz."""
        checked = {"distributions_one_head", "attention_budget", "head_count", "two_head_reading",
                   "double_width_budget", "two_head_reading_practice", "own_reading",
                   "your_previous_head", "your_head_ablation", "wide_vs_narrow", "head_count_sweep",
                   "removable_heads", "roles_emerge_step", "roles_emerge_heads"}
        assert {i.id for i in quiz.items if i.kind is QuizKind.NUMERIC} == checked


# Phrases that handed the student the rule, the construction or the code; none may come back in a
# prompt or a hint of its problem (the named mistakes' messages, shown after a wrong answer, may).
# The counting rule is stated nowhere before a wrong count: neither the prompt nor a hint multiplies it out.
COUNTING_RULE = ["Widths add no rows", "The number of keys is the length of a row", "A causal mask shortens rows",
                 "Rows come from query positions, heads, layers", "each query of each head of each layer"]
GIVE_AWAY = {
    "count_routing_distributions": ["Widths create no rows", "Keys set the length of a row",
                                    "Independent rows come from heads", *COUNTING_RULE],
    "parameter_count": ["does not depend on h", "as many numbers as one d_model x d_model",
                        "re-partitions a fixed capacity", "They do not:"],
    "sink_head": ["has T\n  competitors", "has T competitors", "a direction that all rows of W_Q share",
                  "only row 0 of W_K", "9 (T - 1). Choose", "c times the first one-hot", "ln(9 (T - 1))",
                  "e^g / (e^g + T - 1)"],
    "previous_token_head": ["one-hot vector of position j + 1", "e^g >= 9 i", "g >= 4.1"],
    "two_head_layer": ["np.hstack"],
    "split_heads": [".transpose(1, 0, 2)", "reshape(n, num_heads", "Reshape to (n, h, d_k) first"],
    "merge_heads": ["H.transpose(1, 0, 2)", "Move the\n  head axis next to the width first"],
    "multi_head_attention": ["merge_heads(...) @ W_O", "d_model // num_heads", "1. Project", "scores / sqrt(d_k)",
                             "reshape(L, h, d_k)", "transpose(1, 0, 2)"],
    "scaled_dot_product_attention": ["np.where(mask, scores, -np.inf)", "Q.shape[-1]"],
    "multi_head_reading": ["np.concatenate"],
    "head_contributions": ["W_O.reshape(h, d_v, d_model)", "weights @ values", "(i - 1) * d_v to i * d_v - 1",
                           "W_O[(i - 1) * d_v : i * d_v]", "output minus"],
    "head_scores": ["queries i = 2, ..., T - 1", "start at query 2"],
    "ablation_deltas": ["setting z^(k) to zero", "reading replaced by zeros"],
    "one_head_both_designs": ["p = s =", "the last query", "T - 2"],
    "softmax": ["x.max(axis=-1, keepdims=True)", "Subtract each row's own largest", "along the **last** axis",
                "subtract each row's maximum"],
}


class TestProblemText:
    @pytest.mark.parametrize("problem_id", sorted(GIVE_AWAY))
    def test_no_give_away_in_prompt_or_hints(self, course, problem_id):
        """The prompt and hints guide without stating the rule, the construction or the code."""
        problem = course.problem(problem_id)
        for text in (problem.prompt, *problem.hints):
            for phrase in GIVE_AWAY[problem_id]:
                assert phrase not in text, f"{problem_id}: {phrase!r}"

    def test_counting_hints_lead_without_the_product(self, course):
        """The counting hints ask questions (which arguments add rows) and never multiply the count out."""
        problem = course.problem("count_routing_distributions")
        assert len(problem.hints) >= 2 and "?" in problem.hints[0]
        for hint in problem.hints:
            assert not any(phrase in hint for phrase in COUNTING_RULE), hint

    def test_one_notation_in_every_prompt(self, course):
        """L, S, N and d_k throughout; a head's reading is z^(i); no 0-based W_O blocks."""
        for problem in course.problems:
            text = problem.prompt
            for old in ("d_head", "z_i ", "z_1", "(n, ", "n queries", "i*d_v to (i+1)*d_v", "i*d_k to (i+1)*d_k"):
                assert old not in text, f"{problem.id}: {old!r}"

    @pytest.mark.parametrize("problem_id", ["multi_head_reading"])
    def test_w_o_blocks_match_the_lessons_head_numbers(self, course, problem_id):
        """Heads are numbered from 1 as in the lesson, and W_O^(i) is rows (i - 1) * d_v to i * d_v - 1."""
        prompt = course.problem(problem_id).prompt
        assert "(i - 1) * d_v to i * d_v - 1" in " ".join(prompt.split())
        assert "W_O[(i - 1) * d_v : i * d_v]" in prompt and "z^(i)" in prompt

    def test_a_query_sees_itself_only_in_self_attention(self, course):
        """No text says every query sees itself without saying it is self-attention."""
        problem = course.problem("count_routing_distributions")
        for text in (problem.prompt, *problem.hints):
            flat = " ".join(text.split())
            if "sees itself" in flat or "see itself" in flat:
                assert "self-attention every query" in flat
