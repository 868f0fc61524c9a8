"""Problems and quiz items as Markdown text, with one student's numbers filled in."""
from __future__ import annotations

from . import generators as gen
from .model import Course, Problem
from .quiz import render_item


def render_prompt(problem: Problem, seed: int) -> str:
    """The problem's prompt with this student's params filled in."""
    return gen.fill(problem.prompt, gen.draw_params(problem.params, problem.id, seed))


def render_problem(problem: Problem, seed: int) -> str:
    """Title, signature, the prompt with this seed's params, and the cases it will meet."""
    title = f"{problem.title} ({problem.points:g} points)"
    public = [c.name for c in problem.cases if not c.hidden]
    prompt = render_prompt(problem, seed)
    return (f"{title}\n{'=' * len(title)}\n\n    {problem.function.signature}\n\n{prompt}\n"
            f"Public cases ({len(public)}): {'; '.join(public)}\n"
            f"Hidden cases: {len(problem.cases) - len(public)} (graded by `mha grade`, details never shown)\n\n"
            f"Run `mha check {problem.id}` to test your code.\n")


def render_assignment(course: Course, seed: int) -> str:
    """The whole assignment for one student: every problem, then every quiz item."""
    parts = [f"# {course.title}\n"]
    parts += [render_problem(p, seed) for p in course.problems]
    if course.quiz is not None:
        parts += [render_item(item, seed) for item in course.quiz.items]
    return "\n\n".join(parts)
