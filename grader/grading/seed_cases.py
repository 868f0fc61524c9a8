"""Seed cases: a seed's cases and quiz items computed ahead by the reference, as plain JSON.

Public seed cases are what the student bundle's `mha check` needs. One JSON file per seed
holds, for every problem, its rendered text, comparison and public cases (inputs, expected
answers, and what each named mistake's bug answers), and for the quiz, each public
item with its numbers and feedback and each hidden item without its answer. Hidden cases,
hidden answers, the reference and the bugs never go in. Nor does the expected answer of a
*withheld* case (`withheld`): a public case whose expected value the grader never shows (one
with `reveal: false`, or one compared by shapes, whose answer is its form). It goes in with its
inputs and the form of its answer only (`form_of`), so `mha check` checks the type and shape and
says that the value is graded on submission.

Full seed cases (`hidden=True`) hold every case and every answer, without the texts: the
autograder's seed cache (seed_cache.py), which only the grader's user can read. They hold no
bug's answer: the grader has the course code, and runs a problem's bugs on a case only once a
submission fails it (diagnosis.py), as grade-all does.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..course.functions import FunctionSpec, Param, ParamKind, ReturnKind
from ..course.model import (
    Case,
    Choice,
    CompareKind,
    Comparison,
    Draw,
    DrawnWrongValue,
    Mistake,
    Problem,
    QuizItem,
    QuizKind,
    RubricEntry,
    Visibility,
    WrongValue,
)
from ..errors import SubmissionError

FORMAT = 4  # format 4: a withheld case holds its form, never its expected answer
READABLE = (2, 3, FORMAT)  # format 2 names the seed's label and a mistake's function "variant"
# In the student bundle, the seed cases live inside its grader package (grader/_seed_cases/), so
# they are installed with it and found from any folder; index.json says whose numbers they hold.
BUNDLE_FOLDER = "_seed_cases"  # the folder the otter export's student wheel uses too (grading/otter_checks.py)
INDEX = "index.json"


RAISED = "raised"  # a wrong answer that is the error a bug raised: {"raised": [type name, message]}


def encode(value: Any, binary: bool = False, arrays: Callable[[np.ndarray], Any] | None = None) -> Any:
    """Plain JSON for an input or an expected answer (arrays keep their dtype and shape); with
    `binary`, arrays as the base64 of their bytes (exact, and ten times faster to read back);
    with `arrays`, each array as what it returns (prepared_store.py: its bytes kept elsewhere)."""
    if isinstance(value, np.ndarray):
        if arrays is not None:
            return arrays(value)
        if binary:  # exactly: an array in Fortran order is read back in Fortran order
            fortran = value.flags.f_contiguous and not value.flags.c_contiguous
            data = value.tobytes(order="F" if fortran else "C")
            return {"b64": base64.b64encode(data).decode(), "shape": list(value.shape),
                    "dtype": value.dtype.str, **({"order": "F"} if fortran else {})}
        return {"nd": value.ravel().tolist(), "shape": list(value.shape), "dtype": value.dtype.name}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, binary, arrays) for v in value]}
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v, binary, arrays) for k, v in value.items()}}
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        # binary: exactly, a numpy scalar read back as the same numpy type
        return {"scalar": value.item(), "dtype": value.dtype.str} if binary or arrays else value.item()
    return value


_DTYPES: dict[str, np.dtype] = {}


def _dtype(name: str) -> np.dtype:
    known = _DTYPES.get(name)
    if known is None:
        known = _DTYPES[name] = np.dtype(name)
    return known


def decode(data: Any, blob: memoryview | None = None, named: Callable[[str], Any] | None = None) -> Any:
    """The value `encode` wrote; `blob`: the bytes of the arrays of a packed file (`unpack`);
    `named`: what an array kept elsewhere ({"blob": name}: prepared_store.py's blobs) is."""
    if isinstance(data, dict):
        if "nd" in data:
            return np.array(data["nd"], dtype=data["dtype"]).reshape(data["shape"])
        if "b64" in data:
            return np.frombuffer(base64.b64decode(data["b64"], validate=True),
                                 dtype=_dtype(data["dtype"])).reshape(data["shape"], order=data.get("order", "C"))
        if "at" in data:
            at, size = data["at"], data["nbytes"]
            if blob is None or not (isinstance(at, int) and isinstance(size, int) and 0 <= at <= len(blob) - size):
                raise ValueError("an array whose bytes are not in the file")
            return np.frombuffer(blob[at:at + size], dtype=_dtype(data["dtype"])).reshape(
                data["shape"], order=data.get("order", "C"))
        if "scalar" in data:
            return _dtype(data["dtype"]).type(data["scalar"])
        if "tuple" in data:
            return tuple(decode(v, blob, named) for v in data["tuple"])
        if "dict" in data:
            return {k: decode(v, blob, named) for k, v in data["dict"].items()}
        if "blob" in data and named is not None:
            return named(str(data["blob"]))
    return data


PACKED = b"mha-exercises seed cases"  # the first word of a packed file
ALIGN = 16  # every array's bytes start at a multiple of this in the file (and so in memory)


def pack(data: dict) -> bytes:
    """`data` (build's JSON, arrays written as base64) as one file whose arrays are their raw
    bytes after the JSON: reading it back (`unpack`) parses a fifth of the JSON and decodes no
    base64. The first line says how long the JSON and the bytes are, so a truncated file is refused."""
    blob = bytearray()

    def raw(node: Any) -> Any:
        if isinstance(node, dict):
            if "b64" in node:
                data = base64.b64decode(node["b64"], validate=True)
                blob.extend(bytes(-len(blob) % ALIGN))
                at = len(blob)
                blob.extend(data)
                return {**{k: v for k, v in node.items() if k != "b64"}, "at": at, "nbytes": len(data)}
            return {k: raw(v) for k, v in node.items()}
        if isinstance(node, list):
            return [raw(v) for v in node]
        return node
    return packed(raw(data), blob)


def array_bytes(value: np.ndarray, data: bytearray) -> dict:
    """`value`'s bytes appended to `data` (at a multiple of ALIGN), and the JSON that names them
    there, as `pack` writes it: decode(node, the packed file's bytes) is `value` exactly (its dtype,
    shape and memory order; an array in Fortran order is read back in Fortran order)."""
    fortran = value.flags.f_contiguous and not value.flags.c_contiguous
    raw = value.tobytes(order="F" if fortran else "C")
    data.extend(bytes(-len(data) % ALIGN))
    node = {"shape": list(value.shape), "dtype": value.dtype.str, **({"order": "F"} if fortran else {}),
            "at": len(data), "nbytes": len(raw)}
    data.extend(raw)
    return node


def packed(header: Any, data: bytes | bytearray) -> bytes:
    """One packed file: `header` (JSON whose arrays name their place in `data`, as `pack` and
    `array_bytes` write them), then `data`."""
    text = json.dumps(header, separators=(",", ":")).encode()
    first = b"%s %d %d\n" % (PACKED, len(text), len(data))
    padding = bytes(-(len(first) + len(text)) % ALIGN)
    return first + text + padding + bytes(data)


def unpack(raw: bytes) -> tuple[Any, memoryview]:
    """The JSON and the arrays' bytes of a file `pack` wrote; ValueError for anything else
    (another kind of file, a truncated one)."""
    end = raw.find(b"\n", 0, 100)
    words = raw[:end].split(b" ") if end > 0 else []
    if len(words) != 5 or b" ".join(words[:3]) != PACKED or not all(w.isdigit() for w in words[3:]):
        raise ValueError("not a packed seed cases file")
    header_end = end + 1 + int(words[3])
    start = header_end + -header_end % ALIGN
    if len(raw) != start + int(words[4]):
        raise ValueError("a packed seed cases file of the wrong length")
    return json.loads(raw[end + 1:header_end]), memoryview(raw)[start:]


def plain(value: Any) -> Any:
    """A dataclass as JSON stores it: dicts of its fields, lists for tuples, recursively. Every
    dict and list is new, as with dataclasses.asdict; the other values (strings, numbers, enums:
    all immutable here) are not deep-copied one by one as asdict does."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _shown_params(v: Draw) -> dict[str, int]:
    """The params a hidden item's text shows; the others (a product of two, say) may be its answer."""
    from ..course.generators import PLACEHOLDER  # instructor side: the bundle's seed cases are built here
    texts = (v.item.prompt, *(c.text for c in v.item.choices))
    named = {m.group(1) for text in texts for m in PLACEHOLDER.finditer(text) if m.group(1)}
    return {k: value for k, value in v.params.items() if k in named}


def _item_data(v: Draw, keep_answers: bool = False) -> dict:
    """A quiz item as the bundle stores it: hidden items lose their answer, feedback, hint and the
    params their text does not show (unless `keep_answers`: the autograder's own copy)."""
    item = replace(v.item, prompt=v.prompt, params={}, code=None)  # numbers resolved: no course code needed
    if v.item.hidden and not keep_answers:
        choices = tuple(replace(c, correct=False, feedback="", mistake=None) for c in v.choices)
        item = replace(item, choices=choices, answer=None, feedback="", wrong=(), hint=None)
        v = replace(v, item=item, choices=choices, answer=None, feedback="", wrong=(), hint=None,
                    params=_shown_params(v))
    else:
        item = replace(item, choices=v.choices, answer=v.answer, feedback=v.feedback, wrong=v.wrong, hint=v.hint)
        v = replace(v, item=item)
    if v.item.rubric and not keep_answers:  # a written item's rubric is the grader's, not the student's
        v = replace(v, item=replace(v.item, rubric=()))
    data = plain(v)
    data["item"]["kind"] = v.item.kind.value
    data["item"]["visibility"] = v.item.visibility.value
    return data


def _item_from(data: dict) -> Draw:
    raw = dict(data["item"])
    raw["kind"] = QuizKind(raw["kind"])
    raw["visibility"] = Visibility(raw["visibility"])
    raw["choices"] = tuple(Choice(**c) for c in raw["choices"])
    raw["wrong"] = tuple(WrongValue(**w) for w in raw["wrong"])
    raw["rubric"] = tuple(RubricEntry(**r) for r in raw.get("rubric", ()))
    item = QuizItem(**raw)
    return Draw(item=item, seed=data["seed"], params=data["params"], prompt=data["prompt"],
                   choices=item.choices, answer=data["answer"], feedback=data["feedback"],
                   wrong=tuple(DrawnWrongValue(**w) for w in data["wrong"]), hint=data["hint"])


def _function_data(fn: FunctionSpec) -> dict:
    """A function's declaration as plain data (the seed cases carry it: the bundle has no course code)."""
    return {"name": fn.name, "signature": fn.signature, "returns": fn.returns.value, "outputs": list(fn.outputs),
            "params": [{"name": p.name, "kind": p.kind.value, "default": p.default, "required": p.required}
                       for p in fn.params]}


def _function_from(data: dict) -> FunctionSpec:
    params = tuple(Param(p["name"], ParamKind(p["kind"]), default=p["default"], required=p["required"])
                   for p in data["params"])
    return FunctionSpec(data["name"], params, ReturnKind(data["returns"]), data["signature"], tuple(data["outputs"]))


def withheld(problem: Problem, case: Case) -> bool:
    """Whether the grader never shows this case's expected value, so a student's seed cases hold
    its form only: `reveal: false`, or a comparison by shapes (the shapes are the answer, and a
    wrong shape is told without the right one). A case that must raise shows what it expects
    ("should raise ValueError"), and a designed head's expected value is an input (its seq_len)."""
    if case.raises or problem.compare.kind in (CompareKind.HEAD_PATTERN, CompareKind.HEAD_PAIR):
        return False
    return not case.reveal or problem.compare.kind is CompareKind.SHAPES


def form_of(problem: Problem, expected: Any) -> dict:
    """The form of an expected answer, with no value in it: the shape of each array (an array's
    shape is not its values), the keys of a dict of shapes (named in the prompt; the shapes
    themselves are the answer), nothing for an integer (its type is the form)."""
    kind = problem.compare.kind
    if kind is CompareKind.ALLCLOSE:
        arrays = expected if problem.function.returns is ReturnKind.ARRAY_PAIR else (expected,)
        return {"arrays": [list(np.shape(a)) for a in arrays]}
    if kind is CompareKind.SHAPES:
        return {"keys": [str(k) for k in expected]}
    return {}


def _case_data(case: Case, prepared, binary: bool) -> dict:
    return {"name": case.name, "visibility": case.visibility.value, "weight": case.weight, "raises": case.raises,
            "reveal": case.reveal, "inputs": prepared.inputs, "args": [encode(a, binary) for a in prepared.args]}


def _withheld_case(problem: Problem, case: Case, prepared) -> dict:
    """A withheld case as a student's seed cases hold it: its inputs and the form of its answer,
    without the expected answer and without the bugs' answers (a bug's answer can equal the
    right one, or differ from it in one entry)."""
    return {**_case_data(case, prepared, False), "form": form_of(problem, prepared.expected), "wrong_answers": []}


def build(course, seed: int, label: str, *, hidden: bool = False) -> dict:
    """The public seed cases of one seed, or with `hidden` the full ones (autograder side: runs
    the reference and the bugs)."""
    from ..course.quiz import draw as quiz_draw
    from ..course.render import render_problem
    from .diagnosis import wrong_answer
    from .prepared import prepare
    problems = []
    for problem in course.problems:
        cases = []
        for case in problem.visible_cases(include_hidden=hidden):
            prepared = prepare(problem, case, seed)
            if not hidden and withheld(problem, case):
                cases.append(_withheld_case(problem, case, prepared))
                continue
            wrong: list | None = None  # full seed cases: the bugs run when a case fails (diagnosis.py), as in grade-all
            if not hidden:  # the bundle has no bugs to run: what each answers, computed here
                wrong = []
                for mistake in problem.mistakes:
                    try:
                        wrong.append([mistake.id, encode(wrong_answer(mistake, prepared.args, problem.code), False)])
                    except Exception as exc:  # the bug does not apply to these inputs (or is a detector)
                        if not mistake.detector:  # the error it raised, which a student's may repeat (diagnosis.py)
                            wrong.append([mistake.id, {RAISED: [type(exc).__name__, str(exc)[:500]]}])
            cases.append({**_case_data(case, prepared, hidden), "expected": encode(prepared.expected, hidden),
                          "wrong_answers": wrong})
        problems.append({
            "id": problem.id, "title": problem.title, "points": problem.points,
            "function": _function_data(problem.function),
            "code": str(problem.code) if hidden and problem.code else None,  # the detectors' course code
            "compare": {**plain(problem.compare), "kind": problem.compare.kind.value},
            "hints": list(problem.hints), "timeout": problem.timeout,
            "hidden_cases": sum(c.hidden for c in problem.cases),  # how many, as `mha list` says (never which)
            "text": "" if hidden else render_problem(problem, seed),
            "mistakes": [{"id": m.id, "message": m.message, "bug": m.bug, "detector": m.detector}
                         for m in problem.mistakes],
            "cases": cases,
        })
    quiz = None
    if course.quiz is not None:
        quiz = {"ids": [i.id for i in course.quiz.items], "off": [i.id for i in course.quiz.optional],
                "title": course.quiz.title,
                "items": [_item_data(quiz_draw(i, seed), keep_answers=hidden) for i in course.quiz.items]}
    return {"format": FORMAT, "title": course.title, "seed": label, "problems": problems, "quiz": quiz}


def _mistake(data: dict) -> Mistake:
    """A named mistake as stored; format 2 names its function "variant"."""
    data = dict(data)
    if "variant" in data:  # format 2
        data["bug"] = data.pop("variant")  # format 2
    return Mistake(**data)


class SeedCases:
    """One seed's prepared cases, loaded for checking (student side: no reference needed)."""

    def __init__(self, data: dict, path: Path, *, lazy: bool = False, blob: memoryview | None = None):
        """`lazy`: each problem's cases are decoded when first used (for data the grader wrote
        itself, the seed cache); otherwise here, so that a damaged file is refused at once.
        `blob`: the arrays' bytes of a packed file (`unpack`)."""
        if not isinstance(data, dict) or data.get("format") not in READABLE:
            raise SubmissionError(f"{path}: not a seed cases file of this version of mha-exercises")
        self.path = path
        self.title: str = data["title"]
        self.problems: list[tuple[Problem, Sequence]] = [self._problem(p, lazy, blob) for p in data["problems"]]
        quiz = data.get("quiz")
        self.quiz_ids: list[str] = quiz["ids"] if quiz else []
        self.quiz_off: list[str] = quiz.get("off", []) if quiz else []  # switched off: an answer is ignored
        self.quiz_title: str | None = quiz.get("title") if quiz else None
        self.quiz: list[Draw] = [_item_from(i) for i in quiz["items"]] if quiz else []
        self.texts = {p["id"]: p["text"] for p in data["problems"]}
        self.hidden_cases: dict[str, int] = {p["id"]: p["hidden_cases"] for p in data["problems"] if "hidden_cases" in p}

    @classmethod
    def load(cls, path: Path) -> SeedCases:
        try:
            return cls(json.loads(Path(path).read_text(encoding="utf-8")), Path(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SubmissionError(f"{path}: cannot read the seed cases ({exc})") from None

    @staticmethod
    def _problem(p: dict, lazy: bool = False, blob: memoryview | None = None):
        compare = dict(p["compare"])
        compare["kind"] = CompareKind(compare["kind"])
        cases = tuple(Case(name=c["name"], args={}, visibility=Visibility(c.get("visibility", "public")),
                           weight=c["weight"], raises=c["raises"], reveal=c.get("reveal", True)) for c in p["cases"])
        problem = Problem(id=p["id"], title=p["title"], points=p["points"], function=_function_from(p["function"]),
                          prompt="", compare=Comparison(**compare), cases=cases, hints=tuple(p["hints"]),
                          mistakes=tuple(_mistake(m) for m in p["mistakes"]), timeout=p["timeout"],
                          code=Path(p["code"]) if p.get("code") else None)
        prepared = _Prepared(cases, p["cases"], blob)
        if not lazy:
            prepared.decoded()
        return problem, prepared


def _wrong_answers(stored: list | None, blob: memoryview | None) -> tuple[tuple[str, Any], ...] | None:
    """What each named mistake's bug answers on a case, as stored; None (full seed cases): run the
    bugs when the case fails."""
    return None if stored is None else tuple((m, decode(out, blob)) for m, out in stored)


class _Prepared(Sequence):
    """A problem's prepared cases, decoded from their JSON when first used (a cold `mha grade`
    decodes each problem's arrays while the student process works on an earlier problem)."""

    def __init__(self, cases: tuple[Case, ...], data: list[dict], blob: memoryview | None = None):
        self._cases, self._data, self._blob = cases, data, blob
        self._decoded: list | None = None

    def decoded(self) -> list:
        if self._decoded is None:
            from .prepared import PreparedCase
            blob = self._blob
            self._decoded = [PreparedCase(case, tuple(decode(a, blob) for a in c["args"]), decode(c.get("expected"), blob),
                                          wrong_answers=_wrong_answers(c["wrong_answers"], blob),
                                          inputs=c.get("inputs"), form=c.get("form"))
                             for case, c in zip(self._cases, self._data)]
            self._data, self._blob = [], None
        return self._decoded

    def __len__(self) -> int:
        return len(self._cases)

    def __getitem__(self, index):  # type: ignore[override]
        return self.decoded()[index]

    def __iter__(self):
        return iter(self.decoded())
