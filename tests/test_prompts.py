"""Every prompt renders with `mha show` and teaches the idea before it states the task."""
from __future__ import annotations

import pytest

from grader.course.render import render_prompt
from grader.course.seeds import DEFAULT_SEED

from .conftest import EXERCISES

PROBLEM_IDS = sorted(path.stem for path in (EXERCISES / "problems").glob("*.yaml"))
TASK = "**Task.**"


@pytest.mark.parametrize("problem_id", PROBLEM_IDS)
def test_show_renders_signature_and_prompt(cli_everything, course, problem_id):
    """`mha show` exits 0 and prints the title, the signature and the whole prompt (optional problems
    switched on)."""
    problem = course.problem(problem_id)
    result = cli_everything("show", problem_id)
    assert result.exit_code == 0, result.output
    assert problem.title in result.stdout
    assert problem.function.signature in result.stdout
    assert render_prompt(problem, DEFAULT_SEED).strip() in result.stdout
    assert "{" not in render_prompt(problem, DEFAULT_SEED).replace("{{", "")  # every param filled in


@pytest.mark.parametrize("problem_id", PROBLEM_IDS)
def test_prompt_teaches_before_the_task(course, problem_id):
    """A prompt explains the idea in a few paragraphs, then states the task once, last."""
    prompt = course.problem(problem_id).prompt
    teaching, _, task = prompt.partition(TASK)
    assert prompt.count(TASK) == 1, f"{problem_id}: expected one {TASK!r} paragraph"
    assert teaching.count("\n\n") >= 2, f"{problem_id}: expected at least 3 paragraphs before the task"
    assert 500 <= len(teaching) <= 3000, f"{problem_id}: teaching text is {len(teaching)} characters"
    assert 80 <= len(task) <= 900, f"{problem_id}: task text is {len(task)} characters"
    assert f"`{problem_id}(" in task, f"{problem_id}: the task names no `{problem_id}(...)`"
