"""What a problem's failures show: at most one named mistake per problem, and which of the
student's own failing functions a problem calls.

**One mistake per problem.** Each named mistake is weighed against every case of the problem
together, never against one case alone:

- a *bug* (a function of the course code) **explains** a failing case when its answer differs
  from the right one and the student's answer matches it (where the bug's own answer is
  nan or inf, any answer fits it: the match is then *loose*), or when the bug raises the
  very error the student's code raised (a 3-D array transposed with `.T`); it is
  **contradicted** by a case where its answer differs from the right one and the student's does
  not match it (a passing case included: the student got right what the mistake gets wrong);
  it is **neutral** on a case where it answers right or does not apply (with one head,
  averaging the heads' patterns is not told apart from one wide head, so those bugs do
  not apply there);
- one odd case does not rule a bug out: a case the student's code raised on (inputs it
  cannot take, such as masks it never handles) and a case where the student's answer is nan or
  inf where the bug's is finite (a second error, an overflow) are **excused**: neither
  explained nor contradicting, and listed as not explained when the mistake is named;
- a *detector* explains a failing case it recognizes and is neutral elsewhere; it only looks at
  an answer the comparison found of the expected form (a wrong shape is told as such, at the
  cost of a shape check, whatever the answer's size);
- three mistakes of no problem file are recognized from the run itself: `assert` where a
  ValueError is expected, float16 answers that are right to float16 precision, and a mask
  tested as a truth value (`if mask:`), which numpy refuses for an array.

**Two at once.** When no single mistake accounts for every failing case, the course code may
say which two of a problem's bugs can run together (its `combine_bugs(first, second)` hook returns
the function with both mistakes, or None): each such pair is weighed as one mistake that names
both ("a + b"), so a layer scaled by sqrt(d_model) *and* merged without the transpose is told
both. No pair is tried when one mistake explains everything, or without course code.

A mistake is a candidate when it explains at least one failing case and nothing contradicts
it. The one named is, in this order: the candidate that accounts for every failing case
(explained or excused) and explains the most of them (then the most exactly); else the one
candidate that explains more than half of the failing cases, or the only candidate at all. It
is shown on the cases it explains, and the failing cases it does not explain are listed. When
two candidates fit equally well, or several fit parts and none most, both are named in a
note ("several causes fit"), and none is shown as the mistake.

**Cascades.** A function that calls the student's own failing function (scaled dot-product
attention calling a broken softmax) inherits its failures. Which functions a function may call
is read from the submission's source by static inspection (`ast.parse` only: the source is
never executed in the grader). When a failing problem's function may call another graded
function that fails its own cases on valid inputs, the problem says so and points at that
function first (the root of a chain). Its own mistakes are not taken from this run, which the
callee may have caused: cascade.py grades it again in the sandbox, on its public cases, with the
course's reference answering (from the grader) for the failing callees, and that run names its
own mistake or shows it right on those cases. Without that run (no course code, as in the student
bundle) the pointer stands alone.
"""
from __future__ import annotations

import ast
import copy
import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from ..course.functions import ReturnKind
from ..course.model import Mistake, Problem
from ..records import record
from ..sandbox.session import CaseRun, RunStatus
from .checks import as_array, check, wrong_form
from .results import CaseResult, CaseStatus, ProblemResult
from .student_files import PARSE_BYTES, open_folder, read_student_file

__all__ = ["BOTH", "Fit", "Diagnosis", "diagnose", "wrong_answer", "GENERIC_MISTAKES", "ASSERT_INSTEAD_OF_RAISE",
           "FLOAT16_ANSWER", "MASK_TESTED_AS_TRUTH", "SEVERAL_CAUSES", "several_causes", "not_explained",
           "name_mistakes", "read_source", "calls", "failing_callees", "point_at_callees"]

ASSERT_INSTEAD_OF_RAISE = Mistake(
    id="assert-instead-of-raise", bug="",
    message="You check the input with `assert`, which raises AssertionError (and is skipped entirely "
            "under `python -O`). A caller expects a ValueError here: write "
            "`if ...: raise ValueError(\"...\")` with a message that names the numbers.")
FLOAT16_ANSWER = Mistake(
    id="float16-answer", bug="",
    message="Your answer is a float16 array: its values are right to about 3 significant digits, which "
            "is all float16 keeps. Compute and return float32 or float64 (np.asarray(x, dtype=np.float64)).")
MASK_TESTED_AS_TRUTH = Mistake(
    id="mask-tested-with-if", bug="",
    message="Your code asks whether the mask is true (`if mask:`, `mask and ...`, `not mask`): numpy refuses "
            "that for an array of more than one element, so every case with a mask raises ValueError ('the "
            "truth value of an array ... is ambiguous'). Ask whether a mask was given: `if mask is not None:`.")
GENERIC_MISTAKES = (ASSERT_INSTEAD_OF_RAISE, FLOAT16_ANSWER, MASK_TESTED_AS_TRUTH)
_AMBIGUOUS = "truth value of an array with more than one element is ambiguous"

SEVERAL_CAUSES = "Several causes fit these failures"  # how the note naming them begins


def several_causes(fits: Sequence[tuple[Mistake, Sequence[str]]]) -> str:
    """The note naming the mistakes that fit parts of the failures, each with the cases it explains."""
    named = [f"{m.id} (on {_names([repr(c) for c in cases])})" for m, cases in fits]
    return (f"{SEVERAL_CAUSES}, and no one known mistake explains them all: {_names(named, 'or')}. "
            "Check each against your code.")


def not_explained(mistake: Mistake, cases: Sequence[str], second: Mistake | None = None,
                  otherwise: str = "") -> str:
    """The note listing the failing cases a named mistake does not explain, and the mistake that
    explains them when one does, or the other reason they fail when it is known (`otherwise`)."""
    cause = (f"{second.id} fits them: a second mistake" if second is not None
             else f"they fail for another reason: {otherwise}" if otherwise else "look there for a second cause")
    return f"{mistake.id} does not explain {_names([repr(c) for c in cases])}: {cause}."


def _other_reason(problem: Problem, prepared: Sequence[Any], runs: Sequence[CaseRun], rest: Iterable[int]) -> str:
    """Why the cases `rest` fail when every one of them raised the same kind of error: a function
    that takes no mask, given one, says so; "" when they fail in different ways or return answers."""
    errors = [runs[i].error for i in rest]
    if not errors or any(e is None for e in errors) or any(runs[i].status is not RunStatus.RAISED for i in rest):
        return ""
    kinds = {e.type for e in errors if e is not None}
    if len(kinds) != 1:
        return ""
    kind = kinds.pop()
    names = [p.name for p in problem.function.params]
    if kind == "TypeError" and "mask" in names:
        at = names.index("mask")
        if all(at < len(prepared[i].args) and prepared[i].args[at] is not None for i in rest):
            return "your code takes no mask, so every case given one raises TypeError"
    # a built-in exception's name only: the student's own class names and messages (hidden cases'
    # among them) stay out of this note
    import builtins
    named = kind if isinstance(getattr(builtins, kind, None), type) else "an exception"
    return f"your code raised {named} on {'it' if len(errors) == 1 else 'them'}"


# a float16 answer is "right to float16 precision" within these (float16 has an 11-bit significand)
_FLOAT16_RTOL, _FLOAT16_ATOL = 4e-3, 1e-3
_SOURCE_LIMIT = 1 << 20  # bytes of source read for the static call graph; a longer file is not inspected


class Fit(Enum):
    NEUTRAL = "neutral"
    EXPLAINS = "explains"
    LOOSE = "explains where the mistake's answer is defined"
    EXCUSED = "neither explains nor contradicts (the student's code raised, or answered nan or inf)"
    CONTRADICTS = "contradicts"


@record
class Diagnosis:
    mistake: Mistake | None = None
    explained: frozenset[int] = frozenset()  # indices of the cases the named mistake explains
    note: str = ""                            # several_causes(...), not_explained(...), or ""


def wrong_answer(mistake: Mistake, args: tuple[Any, ...], code: Path | None) -> Any:
    """What the mistake's bug (a function of the course code `code`) answers on these
    inputs (raises if it does not apply, or if the mistake is a detector)."""
    from ..course.code import course_function
    fn = None if mistake.detector else _COMPOSED.get(mistake.bug) or course_function(code, mistake.bug)
    if fn is None:
        raise LookupError(f"{mistake.bug!r} is not a bug of the course code")
    with np.errstate(all="ignore"):
        return fn(*copy.deepcopy(args))


def _parts(problem: Problem) -> Sequence[str]:
    return problem.function.outputs if problem.function.returns is ReturnKind.ARRAY_PAIR else ()


def _bug_answer(mistake: Mistake, problem: Problem, prepared: Any) -> tuple[bool, Any, bool]:
    """(applies, the bug's answer, whether it differs from the right answer) on this case,
    computed once per prepared case (it does not depend on the submission). A bug that
    raises does not apply; its answer is then (exception type name, message)."""
    key = ("bug", mistake.id)
    if key not in prepared.computed:
        if prepared.wrong_answers is not None and mistake.bug not in _COMPOSED:  # computed ahead (the bundle's cases)
            known = dict(prepared.wrong_answers)
            applies, wrong = mistake.id in known, known.get(mistake.id)
            if isinstance(wrong, dict) and list(wrong) == ["raised"]:  # the error it raised (seed_cases.py)
                applies, wrong = False, tuple(wrong["raised"])
        else:
            try:
                applies, wrong = True, wrong_answer(mistake, prepared.args, problem.code)
            except Exception as exc:  # the bug does not apply to these inputs
                applies, wrong = False, (type(exc).__name__, str(exc))
        differs = False
        if applies:
            if prepared.case.raises:
                differs = True  # the bug returns where the right answer raises
            else:
                try:
                    with np.errstate(all="ignore"):
                        differs = not check(problem.compare, wrong, prepared.expected, _parts(problem)).passed
                except Exception:
                    applies, differs, wrong = False, False, None
        prepared.computed[key] = (applies, wrong, differs)
    return prepared.computed[key]


def _raised_alike(wrong: Any, run: CaseRun) -> bool:
    """Whether the student's code raised the very error (type and message) the bug raised:
    a numpy error names the shapes it met, so the same message means the same wrong operation.
    A bug that declines to apply (ValueError "does not apply", "indistinguishable") never
    matches."""
    if not (isinstance(wrong, tuple) and len(wrong) == 2 and isinstance(wrong[0], str)
            and run.status is RunStatus.RAISED and run.error is not None):
        return False
    kind, message = wrong
    if not message or "does not apply" in message or "indistinguishable" in message:
        return False
    said = run.error.message  # the worker keeps at most 500 characters of it
    return run.error.type == kind and len(said) >= min(len(message), 40) and said == message[:len(said)]


def _mask_refused(problem: Problem, prepared: Any, run: CaseRun) -> bool:
    """The case gives an array as the `mask` argument and the student's code raised numpy's
    "truth value ... is ambiguous" ValueError: the mask was tested as a truth value."""
    names = [p.name for p in problem.function.params]
    if "mask" not in names or run.status is not RunStatus.RAISED or run.error is None:
        return False
    at = names.index("mask")
    mask = prepared.args[at] if at < len(prepared.args) else None
    return (isinstance(mask, np.ndarray) and mask.size > 1 and "ValueError" in run.error.bases
            and _AMBIGUOUS in run.error.message)


def _is_float16(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype == np.float16
    return isinstance(value, (tuple, list)) and any(_is_float16(v) for v in value)


def _close_at_float16(problem: Problem, expected: Any, got: Any) -> bool:
    values = got if _parts(problem) else (got,)
    wanted = expected if _parts(problem) else (expected,)
    if not isinstance(values, (tuple, list)) or len(values) != len(wanted):
        return False
    for exp, value in zip(wanted, values):
        arr, exp = as_array(value), np.asarray(exp, dtype=np.float64)
        if arr is None or arr.shape != exp.shape or not np.allclose(arr, exp, rtol=_FLOAT16_RTOL, atol=_FLOAT16_ATOL):
            return False
    return True


def _fit(mistake: Mistake, problem: Problem, prepared: Any, run: CaseRun, result: CaseResult) -> Fit:
    """How one mistake fits one case."""
    if mistake is ASSERT_INSTEAD_OF_RAISE:
        raised = run.error.bases if run.status is RunStatus.RAISED and run.error is not None else ()
        return Fit.EXPLAINS if (not result.passed and prepared.case.raises and "AssertionError" in raised) \
            else Fit.NEUTRAL
    if mistake is MASK_TESTED_AS_TRUTH:
        return Fit.EXPLAINS if not result.passed and _mask_refused(problem, prepared, run) else Fit.NEUTRAL
    if mistake is FLOAT16_ANSWER:
        if result.passed or prepared.case.raises or run.status is not RunStatus.RETURNED \
                or not _is_float16(run.value):
            return Fit.NEUTRAL
        return Fit.EXPLAINS if _close_at_float16(problem, prepared.expected, run.value) else Fit.NEUTRAL
    if mistake.detector:
        # a detector computes with the answer itself (a head's weights from W_Q W_K^T): only on
        # an answer the comparison found of the expected form, whose size the case sets
        if result.passed or run.status is not RunStatus.RETURNED or wrong_form(result.summary) \
                or problem.code is None:  # a student bundle: no course code, so no detector to run
            return Fit.NEUTRAL
        try:
            from ..course.code import course_function
            detector = course_function(problem.code, mistake.bug)
            with np.errstate(all="ignore"):
                found = detector is not None and detector(copy.deepcopy(prepared.args), run.value)
        except Exception:  # the detector does not apply to this answer
            return Fit.NEUTRAL
        return Fit.EXPLAINS if found else Fit.NEUTRAL
    applies, wrong, differs = _bug_answer(mistake, problem, prepared)
    if not applies:
        return Fit.EXPLAINS if not result.passed and _raised_alike(wrong, run) else Fit.NEUTRAL
    if not differs:
        return Fit.NEUTRAL
    if result.passed:
        return Fit.CONTRADICTS
    if run.status is not RunStatus.RETURNED:
        # inputs the student's code cannot take (it raised, or ran out of time) say nothing of
        # this mistake; a case that must raise is weighed by what the bug does there
        return Fit.CONTRADICTS if prepared.case.raises else Fit.EXCUSED
    parts = _parts(problem)
    try:
        with np.errstate(all="ignore"):
            if check(problem.compare, wrong, run.value, parts).passed:
                return Fit.EXPLAINS
            if check(problem.compare, wrong, _where_defined(wrong, run.value, parts), parts).passed:
                return Fit.LOOSE
            return Fit.EXCUSED if _undefined_where_finite(wrong, run.value, parts) else Fit.CONTRADICTS
    except Exception:
        return Fit.CONTRADICTS


def _undefined_where_finite(wrong: Any, got: Any, parts: Sequence[str]) -> bool:
    """Whether the student's answer has nan or inf where the bug's answer is finite (a
    second error, such as an overflow, on top of the mistake): then the case does not rule it out."""
    if parts:
        return isinstance(got, (tuple, list)) and len(got) == len(parts) \
            and any(_undefined_where_finite(w, g, ()) for w, g in zip(wrong, got))
    w, g = as_array(wrong), as_array(got)
    if w is None or g is None or w.shape != g.shape:
        return False
    return bool((~np.isfinite(g) & np.isfinite(w)).any())


def _where_defined(wrong: Any, got: Any, parts: Sequence[str]) -> Any:
    """`got` with the bug's own nan/inf copied in: where the mistake's answer is undefined
    (a row with every key masked, an overflow), any answer fits it (-1e9 or -inf alike). A
    bug with no finite element at all is matched strictly: it would fit anything."""
    if parts:
        if not isinstance(got, (tuple, list)) or len(got) != len(parts):
            return got
        return tuple(_where_defined(w, g, ()) for w, g in zip(wrong, got))
    w, g = as_array(wrong), as_array(got)
    if w is None or g is None or w.shape != g.shape:
        return got
    finite = np.isfinite(w)
    if finite.all() or not finite.any():
        return got
    return np.where(finite, g, w)


_COMPOSED: dict[str, Any] = {}  # "bug+bug" -> the layer with both bugs' steps (the course's combine_bugs)
BOTH = " + "  # joins the ids of two mistakes named together


def _pairs(problem: Problem) -> list[Mistake]:
    """Every two of the problem's bugs that the course code can run together (its `combine_bugs`
    hook, given two bugs, returns the function with both mistakes, or None), as one mistake each
    that names both. None without course code (a student bundle) or without the hook."""
    if problem.code is None:  # a student bundle: no course code, and no module to read it with
        return []
    from ..course.code import course_function
    combine = course_function(problem.code, "combine_bugs")
    if combine is None:
        return []
    bugs = [m for m in problem.mistakes if not m.detector]
    found = []
    for i, first in enumerate(bugs):
        for second in bugs[i + 1:]:
            name = f"{first.bug}+{second.bug}@{problem.code}"  # the course's own: two courses may share names
            if name not in _COMPOSED:
                a, b = course_function(problem.code, first.bug), course_function(problem.code, second.bug)
                try:
                    _COMPOSED[name] = combine(a, b) if a is not None and b is not None else None
                except Exception:
                    _COMPOSED[name] = None
            if _COMPOSED[name] is not None:
                found.append(Mistake(id=f"{first.id}{BOTH}{second.id}", bug=name,
                                     message=f"Two mistakes at once. {first.message} And: {second.message}"))
    return found


def diagnose(problem: Problem, prepared: Sequence[Any], runs: Sequence[CaseRun],
             results: Sequence[CaseResult]) -> Diagnosis:
    """The one mistake the problem's cases show together, or a note naming the several that fit."""
    failing = frozenset(i for i, r in enumerate(results) if not r.passed
                        and r.status not in (CaseStatus.NOT_IMPLEMENTED, CaseStatus.ON_SUBMISSION))
    if not failing:
        return Diagnosis()
    def weigh(mistakes: Iterable[Mistake]) -> list:
        found = []  # (mistake, explained, explained exactly, excused)
        for mistake in mistakes:
            fits: dict[Fit, set[int]] = {fit: set() for fit in Fit}
            for i, (case, run, result) in enumerate(zip(prepared, runs, results)):
                try:
                    fit = _fit(mistake, problem, case, run, result)
                except Exception:  # an answer of a form the mistake cannot weigh: no evidence either way
                    fit = Fit.NEUTRAL
                fits[fit].add(i)
                if fit is Fit.CONTRADICTS:
                    break
            explained = frozenset((fits[Fit.EXPLAINS] | fits[Fit.LOOSE]) & failing)
            if explained and not fits[Fit.CONTRADICTS]:
                found.append((mistake, explained, len(fits[Fit.EXPLAINS]), frozenset(fits[Fit.EXCUSED])))
        return found

    def accounts(c) -> bool:
        return c[1] | c[3] >= failing

    candidates = weigh((*problem.mistakes, *GENERIC_MISTAKES))
    if not any(accounts(c) for c in candidates):
        both = [c for c in weigh(_pairs(problem)) if accounts(c)]  # two mistakes at once
        if both:
            candidates = both
    if not candidates:
        return Diagnosis()

    def rank(c):
        return len(c[1]), c[2]

    complete = [c for c in candidates if accounts(c)]
    most = [c for c in candidates if 2 * len(c[1]) > len(failing)]
    for group in (complete, most, candidates if len(candidates) == 1 else []):
        if not group:
            continue
        best = max(map(rank, group))
        top = [c for c in group if rank(c) == best]
        if len(top) > 1 and all(c[1] == top[0][1] and c[3] == top[0][3] for c in top):
            # the same cases, each exactly: the student's answers are every one of these bugs' on
            # this problem (softmax over the first axis, with or without the global max), so any
            # name is right: the one the problem file declares first, the common form of the idea
            top = top[:1]
        if len(top) == 1:
            mistake, explained = top[0][0], top[0][1]
            rest = failing - explained
            if not rest:
                return Diagnosis(mistake, explained)
            # a second candidate that explains exactly the rest is the second mistake
            second = next((c[0] for c in candidates if c[1] == rest), None)
            otherwise = "" if second is not None else _other_reason(problem, prepared, runs, sorted(rest))
            return Diagnosis(mistake, explained, not_explained(mistake, [results[i].name for i in sorted(rest)],
                                                               second, otherwise))
        candidates = top  # two that fit equally well: both are named below
        break
    fitting = sorted(candidates, key=rank, reverse=True)[:2]
    return Diagnosis(note=several_causes([(m, [results[i].name for i in sorted(e)]) for m, e, _, _ in fitting]))


def name_mistakes(results: Sequence[CaseResult], diagnosis: Diagnosis) -> tuple[CaseResult, ...]:
    """The case results with the diagnosed mistake on the cases it explains, and on no other."""
    mistake = diagnosis.mistake
    return tuple(replace(r, mistake=mistake.id, mistake_message=mistake.message)
                 if mistake is not None and i in diagnosis.explained
                 else replace(r, mistake=None, mistake_message="") if r.mistake else r
                 for i, r in enumerate(results))


# --- cascades --------------------------------------------------------------------------------

def read_source(path: Path) -> str | None:
    """The submission's text for static inspection, read as any student file (student_files: a
    regular file, never through a link, at most _SOURCE_LIMIT bytes); None when it cannot be."""
    path = Path(path)
    try:
        folder = open_folder(path.parent, follow=True)
    except OSError:
        return None
    try:
        file = read_student_file(folder, path.name, _SOURCE_LIMIT)
    finally:
        os.close(folder)
    return None if file.data is None else file.data.decode("utf-8", errors="replace")


def calls(source: str, names: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each of `names` defined at the top of `source`, the others of `names` it may call,
    directly or through helpers defined at the top of the module (any reference by name
    counts). Parsed only, never run; {} when the source does not parse, or is longer than the
    grader parses (PARSE_BYTES: then no problem points at its callees)."""
    return dict(_calls(source, tuple(names)))


@functools.lru_cache(maxsize=4)  # one submission asks twice (its feedback, then its regrading)
def _calls(source: str, names: tuple[str, ...]) -> dict[str, frozenset[str]]:
    if len(source) > PARSE_BYTES:
        return {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    defined: dict[str, ast.AST] = {}
    for node in tree.body:  # the last top-level definition of a name wins, as at import time
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = node
    refers = {name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & defined.keys()
              for name, node in defined.items()}
    wanted = set(names)
    found = {}
    for name in wanted & defined.keys():
        seen: set[str] = set()
        todo = [name]
        while todo:  # every function reachable from `name`, each visited once
            for callee in refers[todo.pop()] - seen:
                seen.add(callee)
                todo.append(callee)
        found[name] = frozenset((seen & wanted) - {name})
    return found


def _names(items: Sequence[str], last: str = "and") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]


def _failing(problems: Sequence[Problem], results: Sequence[ProblemResult]) -> dict[str, ProblemResult]:
    """function name -> the result of each problem that fails on valid inputs: a callee fails for
    its callers only there (one that merely does not raise ValueError on bad ones, an `assert`,
    cannot break a caller's cases)."""
    function_of = {p.id: p.function.name for p in problems}
    must_raise = {(p.id, c.name) for p in problems for c in p.cases if c.raises}
    return {function_of[r.id]: r for r in results if r.id in function_of
            and any(not c.passed and c.status is not CaseStatus.ON_SUBMISSION and (r.id, c.name) not in must_raise
                    for c in r.cases)}


def failing_callees(problems: Sequence[Problem], results: Sequence[ProblemResult],
                    source: str | None) -> dict[str, list[str]]:
    """problem id -> the student's own failing functions that the problem's function may call,
    in the problems' order, for each failing problem that calls any."""
    failing = _failing(problems, results)
    if source is None or not failing:
        return {}
    order = [p.function.name for p in problems]
    graph = calls(source, order)
    function_of = {p.id: p.function.name for p in problems}
    found = {}
    for result in results:
        name = function_of.get(result.id)
        culprits = sorted((f for f in graph.get(name, ()) if f in failing), key=order.index) \
            if name and not result.passed else []
        if culprits:
            found[result.id] = culprits
    return found


def _behind(name: str, helpers: Sequence[str], result: ProblemResult, again: ProblemResult | None
            ) -> tuple[str, tuple]:
    """What the re-run with the course's helpers shows (its sentence, and the cases with the
    problem's own mistake on the failing public ones it explains); ("", cases) without a re-run.
    The re-run ran the public cases only (cascade.py): its sentence counts those alone, and a hidden
    case gets no mistake from it."""
    public = [c.name for c in result.cases if not c.hidden]
    by_name = {c.name: c for c in again.cases} if again is not None else {}
    if again is None or not public or sorted(by_name) != sorted(public) or len(again.cases) != len(public):
        return "", result.cases
    instead = f"Graded again with the course's {_names(helpers)} in place of yours, {name}"
    failed = [c for c in again.cases if not c.passed]
    if not failed:
        return f"{instead} passes every public case: its own code is right.", result.cases
    count = f"{len(failed)} of {len(again.cases)} public cases"
    mistakes = again.mistakes
    if len(mistakes) == 1:
        own = next(c for c in again.cases if c.mistake)

        def told(case: CaseResult) -> CaseResult:
            rerun = by_name.get(case.name)
            if rerun is not None and not case.passed and rerun.mistake:
                return replace(case, mistake=own.mistake, mistake_message=own.mistake_message)
            return replace(case, mistake=None, mistake_message="")
        return f"{instead} still fails {count}: its own mistake is {mistakes[0]}.", \
            tuple(told(c) for c in result.cases)
    note = f" {again.message}" if again.message.startswith(SEVERAL_CAUSES) else ""
    return f"{instead} still fails {count}: check it too.{note}", result.cases


def point_at_callees(problems: Sequence[Problem], results: Sequence[ProblemResult], source: str | None,
                     again: dict[str, ProblemResult] | None = None) -> tuple[ProblemResult, ...]:
    """Results where a failing problem that calls the student's own failing functions says so
    first. Its own mistakes are named only from `again` (problem id -> the problem graded again
    with the course's reference in place of those functions, cascade.py): they may otherwise
    be caused by the callee."""
    results = tuple(results)
    behind = failing_callees(problems, results, source)
    if not behind:
        return results
    failing = _failing(problems, results)
    graph = calls(source or "", [p.function.name for p in problems])
    function_of = {p.id: p.function.name for p in problems}
    again = again or {}
    out = []
    for result in results:
        culprits = behind.get(result.id)
        if not culprits:
            out.append(result)
            continue
        name = function_of[result.id]
        # point at the roots: a failing callee that itself calls a failing callee is a symptom too
        roots = [f for f in culprits if not any(g in failing for g in graph.get(f, ()))] or culprits
        unimplemented = all(failing[f].message == "not implemented yet" for f in roots)
        state = "not implemented yet" if unimplemented else "fails its own cases" if len(roots) == 1 \
            else "fail their own cases"
        it = "it" if len(roots) == 1 else "them"
        pointer = (f"{name} calls your {_names(roots)}, which {'is' if len(roots) == 1 else 'are'} "
                   f"{state}: implement {it} first." if unimplemented else
                   f"{name} calls your {_names(roots)}, which {state}: fix {it} first; "
                   f"{'its' if len(roots) == 1 else 'their'} failures can cause these.")
        told, cases = _behind(name, culprits, result, again.get(result.id))
        if told:  # the re-run says what the callee's failures cause, and what they do not
            which = f"{'is' if len(roots) == 1 else 'are'} {state}" if unimplemented else state
            pointer = f"{name} calls your {_names(roots)}, which {which}. {told}"
        cleared = tuple(replace(c, mistake=None, mistake_message="") for c in result.cases)
        superseded = result.message in ("", "not implemented yet") or result.message.startswith(SEVERAL_CAUSES) \
            or " does not explain " in result.message
        message = pointer if superseded else f"{pointer} {result.message}"
        right = tuple(roots) if told.endswith("its own code is right.") else ()
        out.append(replace(result, message=message, cases=cases if cases is not result.cases else cleared,
                           right_once=right))
    return tuple(out)
