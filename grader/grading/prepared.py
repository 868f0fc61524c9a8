"""A case made ready to grade: its inputs built for a seed and its expected answer computed
with the course's reference (and the named mistakes' answers), shared by a batch's submissions.

A case's inputs and expected answer depend only on the problem, the case and the seed, never
on the submission, so `PreparedCases` computes them once per seed.
"""
from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

import numpy as np

from ..course.functions import FunctionSpec, ReturnKind
from ..course.model import Case, Draw, Problem, QuizItem
from ..course.seeds import DEFAULT_SEED
from ..errors import InternalError, SpecError
from ..records import record

__all__ = ["PreparedCase", "PreparedCases", "build_args", "literal_expected", "reference_answer", "prepare",
           "summarize_inputs"]


@record
class PreparedCase:
    case: Case
    args: tuple[Any, ...]   # positional arguments, pristine: never handed to student code
    expected: Any           # reference answer (or the literal 'expect'); unused for 'raises'
    # (mistake id, the bug's answer) computed ahead of time, as in the student bundle;
    # None: run the course code's bugs when a case fails
    wrong_answers: tuple[tuple[str, Any], ...] | None = None
    inputs: str | None = None  # summarize_inputs of a public case, computed once (None: not yet)
    # a withheld case of a student's seed cases (seed_cases.withheld): the form of its answer
    # (seed_cases.form_of), whose value is not known here (`expected` is None); None: it is
    form: dict | None = None
    # wrong answers computed on demand (wrong_answers is None), kept for the next student of a batch
    computed: dict = field(default_factory=dict, compare=False, repr=False)


def build_args(problem: Problem, case: Case, seed: int = DEFAULT_SEED) -> tuple[Any, ...]:
    """Positional arguments up to the last one the case gives; gaps take the API default.

    `seed` is the student's seed: it draws the problem's params and, unless the case fixes
    its own `seed`, the case's random inputs, so each student gets their own numbers."""
    from ..course import generators as gen  # not needed to grade on a seed cache file
    inputs_seed = gen.case_seed(problem.id, case.name, case.seed, seed)
    env = gen.realize_let(case.let, inputs_seed, base=gen.draw_params(problem.params, problem.id, seed))
    fn = problem.function
    last = max(i for i, p in enumerate(fn.params) if p.name in case.args or p.required)

    def course_fn(name: str) -> Callable | None:
        from ..course.code import course_function
        return course_function(problem.code, name)
    try:
        return tuple(gen.realize(case.args[p.name], p.kind, env, inputs_seed, p.name, course_fn) if p.name in case.args
                     else p.default for p in fn.params[: last + 1])
    except ValueError as exc:  # a course generator that failed: the problem file's or the course code's fault
        raise SpecError(str(problem.path), case.line, f"case {case.name!r}: {exc}") from exc


def literal_expected(fn: FunctionSpec, expect: Any) -> Any:
    """An explicit `expect` from YAML, in the form the reference returns."""
    if fn.returns is ReturnKind.ARRAY:
        return np.asarray(expect, dtype=np.float64)
    if fn.returns is ReturnKind.ARRAY_PAIR:
        return tuple(np.asarray(e, dtype=np.float64) for e in expect)
    if fn.returns is ReturnKind.SHAPES:
        return {k: tuple(v) for k, v in expect.items()}
    return expect


def reference_answer(fn: FunctionSpec, args: tuple[Any, ...], code: Path | None) -> Any:
    """The course reference's answer (`code`: the course module holding it; autograder side only)."""
    if fn.returns in (ReturnKind.HEAD, ReturnKind.HEAD_PAIR):
        return args[0]  # the check computes the pattern the student's matrices make for this seq_len
    from ..course.code import course_function
    reference = course_function(code, fn.name)
    if reference is None:
        raise InternalError(f"{fn.name}: the course code has no reference for it")
    return reference(*copy.deepcopy(args))


def prepare(problem: Problem, case: Case, seed: int = DEFAULT_SEED) -> PreparedCase:
    args = build_args(problem, case, seed)
    inputs = "" if case.hidden else summarize_inputs(problem.function, args)  # once per batch, not per student
    if case.raises:
        return PreparedCase(case, args, None, inputs=inputs)
    try:
        expected = literal_expected(problem.function, case.expect) if case.has_expect \
            else reference_answer(problem.function, args, problem.code)
    except Exception as exc:  # a case the reference cannot answer is the problem file's fault (as mha validate says)
        raise SpecError(str(problem.path), case.line, f"case {case.name!r}: the reference raised "
                        f"{type(exc).__name__}: {exc}") from exc
    return PreparedCase(case, args, expected, inputs=inputs)


def _frozen(value: Any) -> Any:
    """`value` with its arrays made read-only: a shared prepared case cannot be changed by mistake."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for item in value:
            _frozen(item)
    elif isinstance(value, dict):
        for item in value.values():
            _frozen(item)
    return value


class PreparedCases:
    """Prepared cases (and drawn quiz items) shared by the submissions of a batch, for one assignment.

    A case's inputs and expected answer depend only on the problem, the case and the seed,
    never on the submission, so a class on one seed computes them once; so do quiz items. The last `seeds`
    seeds are kept (with per-student seeds, one per student graded at the same time), so
    memory stays bounded whatever the class size. Thread-safe; the arrays are read-only."""

    def __init__(self, seeds: int = 8, store: Any = None):
        self._seeds = seeds
        self._by_seed: OrderedDict[int, dict[tuple[str, str], Any]] = OrderedDict()  # cases, quiz items
        self._lock = threading.Lock()
        self._store = store  # prepared_store.PreparedStore: each seed's cases kept on disk between runs

    def get(self, problem: Problem, case: Case, seed: int) -> PreparedCase:
        if self._store is not None:
            self._from_store(seed)
        return self._kept(seed, (problem.id, case.name), lambda: self._prepare(problem, case, seed))

    _STORED = ("", "\0stored")  # the seed's cases were read from the store (or prepared for it); no quiz id has a NUL

    def _from_store(self, seed: int) -> None:
        """Every case and quiz draw of the seed, read from the store, or prepared and stored there (once
        per seed)."""
        with self._lock:
            if self._STORED in self._by_seed.get(seed, {}):
                return
        store = self._store
        found: dict[tuple[str, str], Any] | None = store.load(seed)  # cases, and quiz draws by ("", id)
        if found is None:
            from ..course.quiz import draw
            try:
                made: dict[tuple[str, str], Any] = {
                    key: self._prepare(problem, case, seed) for key, (problem, case) in store.cases.items()}
                made.update((key, draw(item, seed)) for key, item in store.items.items())
            except Exception:  # a case that cannot be prepared: each case is prepared when asked, and says why
                made = {}
            if made:
                store.save(seed, made)
            found = dict(made)
        with self._lock:
            kept = self._by_seed.setdefault(seed, {})
            self._by_seed.move_to_end(seed)
            while len(self._by_seed) > self._seeds:
                self._by_seed.popitem(last=False)
            for key, prepared in found.items():
                if prepared is not None:  # None: prepared when asked
                    kept.setdefault(key, prepared)
            kept[self._STORED] = True

    def quiz_item(self, item: QuizItem, seed: int) -> Draw:
        """The quiz item with the seed's numbers drawn and its answers computed (once)."""
        from ..course.quiz import draw
        if self._store is not None:
            self._from_store(seed)
        return self._kept(seed, ("", item.id), lambda: draw(item, seed))  # "": no problem has that id

    @staticmethod
    def _prepare(problem: Problem, case: Case, seed: int) -> PreparedCase:
        prepared = prepare(problem, case, seed)
        _frozen((prepared.args, prepared.expected, prepared.wrong_answers))
        return prepared

    def _kept(self, seed: int, key: tuple[str, str], make: Callable[[], Any]) -> Any:
        with self._lock:
            known = self._by_seed.get(seed, {}).get(key)
        if known is not None:
            return known
        made = make()
        with self._lock:
            kept = self._by_seed.setdefault(seed, {})
            self._by_seed.move_to_end(seed)
            while len(self._by_seed) > self._seeds:
                self._by_seed.popitem(last=False)
            return kept.setdefault(key, made)


def summarize_inputs(fn: FunctionSpec, args: tuple[Any, ...]) -> str:
    parts = []
    for param, value in zip(fn.params, args):
        if isinstance(value, np.ndarray):
            shown = (np.array2string(value, precision=4, separator=", ", suppress_small=True).replace("\n", "")
                     if value.size <= 8 else f"{value.dtype.name} array of shape {value.shape}")
        else:
            shown = repr(value)
        parts.append(f"{param.name}={shown}")
    return ", ".join(parts)
