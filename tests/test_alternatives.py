"""Fair tolerances: correct answers written in other styles earn full marks."""
from __future__ import annotations

import pytest

from grader.grading.grade import grade

from .conftest import ROOT

SUBMISSIONS = ROOT / "tests" / "submissions"

ARRAYS = ["softmax", "attention_reading", "scaled_dot_product_attention", "split_heads", "merge_heads",
          "multi_head_attention"]
HEADS = ["previous_token_head", "sink_head"]
SEVERAL_HEADS = ["multi_head_reading", "head_contributions", "two_head_layer"]
COUNTS = ["count_routing_distributions", "parameter_count"]
REASONING = ["padded_batch_attention", "one_head_both_designs"]
TRAINED = ["run_model", "head_scores", "ablation_deltas"]
WIDTH = ["thin_head", "one_wide_head"]
BRIDGE = ["from_torch_layout"]

# each correct alternative submission and the problems it answers
CORRECT = {
    "correct_float32.py": ARRAYS + HEADS + SEVERAL_HEADS,
    "correct_einsum.py": ARRAYS,
    "correct_loops.py": ARRAYS + HEADS + COUNTS,
    "correct_python_types.py": ARRAYS + HEADS + COUNTS + ["predict_shapes"],
    # `from __future__ import annotations`, type hints, float32, no `assert`, shared helpers
    "correct_future_float32.py": ARRAYS + HEADS + SEVERAL_HEADS + COUNTS + REASONING + ["predict_shapes"] + TRAINED
                                   + WIDTH + BRIDGE,
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_alternative_gets_full_marks(course, name):
    """Every case of every problem the alternative answers passes."""
    result = grade(course, SUBMISSIONS / name, problem_ids=CORRECT[name])
    graded = {p.id: p for p in result.problems if p.id in CORRECT[name]}
    failures = [f"{p.id} / {c.name}: {c.summary} {c.detail}" for p in graded.values() for c in p.cases if not c.passed]
    assert sorted(graded) == sorted(CORRECT[name])
    assert failures == []
    assert all(p.score == p.max_score for p in graded.values())


def test_the_modern_alternative_answers_every_problem(course):
    """correct_future_float32.py is a complete submission: its list is the assignment's whole list of problems."""
    assert sorted(CORRECT["correct_future_float32.py"]) == sorted(p.id for p in course.problems)
