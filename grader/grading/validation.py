"""Deeper checks of loaded problems that need the reference: explicit answers must agree with it."""
from __future__ import annotations

from collections.abc import Iterable

from ..assignment.model import Problem
from ..errors import SpecError, SpecErrors
from .checks import check
from .grade import build_args, literal_expected, reference_answer


def check_against_reference(problems: Iterable[Problem]) -> None:
    """Every `expect` must match the reference, and every `raises` case must raise in it."""
    errors: list[SpecError] = []
    for problem in problems:
        fn = problem.function
        parts = fn.outputs if fn.returns.value == "array_pair" else ()
        for case in problem.cases:
            args = build_args(problem, case)
            try:
                answer = reference_answer(fn, args)
            except Exception as exc:
                if case.raises and type(exc).__name__ == case.raises:
                    continue
                errors.append(SpecError(str(problem.path), case.line,
                                        f"case {case.name!r}: the reference raised {type(exc).__name__}: {exc}"))
                continue
            if case.raises:
                errors.append(SpecError(str(problem.path), case.line,
                                        f"case {case.name!r} expects {case.raises}, but the reference returned normally"))
            elif case.has_expect:
                verdict = check(problem.compare, answer, literal_expected(fn, case.expect), parts)
                if not verdict.passed:
                    errors.append(SpecError(str(problem.path), case.line,
                                            f"case {case.name!r}: 'expect' disagrees with the reference ({verdict.detail})"))
    if errors:
        raise SpecErrors(errors)
