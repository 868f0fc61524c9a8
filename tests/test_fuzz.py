"""Every edge where student bytes enter the grader, fuzzed with Hypothesis.

Properties:
- any JSON line the student process could put on the answer pipe (tags, dtypes, shapes, sizes,
  nesting, numbers at the edges) is read as a case's run (a value, or an unreadable answer),
  never another exception;
- any Unicode in every student text field, through every report format: the renderer never
  raises, its output parses with its own parser, no control character the student put there
  survives, and no line the student made starts a line of the report;
- any answers.yaml and any notebook is read, or refused with a SubmissionError;
- random return values through a real student process never make the grader fail.

The "ci" profile (tests/conftest.py, the default) is derandomized: the same examples every run.
`--hypothesis-profile=long` tries 25 times as many, at random (CONTRIBUTING.md, "Fuzzing").
"""
from __future__ import annotations

import html.parser
import json
import math
import re
from xml.etree import ElementTree

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from grader.course.quiz import draw
from grader.course.seeds import DEFAULT_SEED
from grader.errors import SubmissionError
from grader.grading.answers import grade_draws
from grader.grading.checks import describe
from grader.grading.grade import grade
from grader.grading.notebook_submission import notebook_parts
from grader.grading.results import CaseResult, CaseStatus, GradeResult, LoadError, ProblemResult, WeightGrid, one_line
from grader.grading.student_files import StudentFile, shown_name
from grader.reports import names, render
from grader.sandbox.codec import ALLOWED_DTYPES, MAX_ELEMENTS, Opaque, decode_value, read_event
from grader.sandbox.limits import Limits
from grader.sandbox.runs import CaseRun
from grader.sandbox.session import _case_run
from grader.sandbox.student_text import StudentText, student_text

BUDGET = settings.default.max_examples  # the profile's: 200 in "ci"


def examples(share: float) -> settings:
    """A property's budget: `share` of the profile's (a real student process costs ~0.5 s)."""
    return settings(max_examples=max(5, int(BUDGET * share)))


# ---------------------------------------------------------------- the answer pipe

EDGE_INTS = st.sampled_from([0, 1, -1, 2 ** 31, 2 ** 63 - 1, 2 ** 63, -(2 ** 63), 2 ** 64, 10 ** 39, 10 ** 40,
                             MAX_ELEMENTS, MAX_ELEMENTS + 1, 1 << 30])
NUMBERS = st.one_of(st.integers(), EDGE_INTS, st.floats(), st.sampled_from(["nan", "inf", "-inf", "NaN", "1e999"]),
                    st.booleans(), st.none())
SHAPES = st.one_of(st.lists(st.integers(0, 4), max_size=4), st.lists(st.one_of(EDGE_INTS, st.integers()), max_size=40),
                   st.lists(st.one_of(NUMBERS, st.text(max_size=3)), max_size=3), NUMBERS)
DTYPES = st.one_of(st.sampled_from(sorted(ALLOWED_DTYPES)), st.sampled_from(["object", "complex128", "U3", "V8", ""]),
                   st.text(max_size=8), NUMBERS)
B64 = st.one_of(st.sampled_from(["", "AA==", "AAAAAAAAAAA=", "AAAAAAAAAAAAAAAA", "!!!!", "=" * 8]),
                st.binary(max_size=48).map(lambda b: __import__("base64").b64encode(b).decode()), st.text(max_size=12))
TAGS = st.sampled_from(["none", "bool", "int", "float", "str", "list", "tuple", "dict", "array", "object", "set", ""])


def _tagged(children: st.SearchStrategy) -> st.SearchStrategy:
    """A tagged value as the worker writes it, each field right, wrong or missing."""
    fields = {
        "t": st.one_of(TAGS, NUMBERS),
        "v": st.one_of(NUMBERS, st.text(max_size=20), st.lists(children, max_size=6),
                       st.lists(st.lists(children, max_size=3), max_size=4), st.lists(NUMBERS, max_size=12)),
        "dtype": DTYPES, "shape": SHAPES, "b64": B64, "type": st.one_of(st.text(max_size=30), NUMBERS),
    }
    return st.fixed_dictionaries({"t": fields["t"]}, optional={k: v for k, v in fields.items() if k != "t"})


WIRE_VALUES = st.recursive(st.one_of(NUMBERS, st.text(max_size=10)), _tagged, max_leaves=30)


def _case_event(value, ok, seconds) -> dict:
    return {"event": "case", "id": 0, "seq": 1, "ok": ok, "value": value, "seconds": seconds,
            "error": value if not ok else None}


class TestAnswerPipe:
    @examples(1)
    @given(value=WIRE_VALUES, ok=st.one_of(st.booleans(), NUMBERS), seconds=NUMBERS)
    def test_any_answer_line_is_a_run(self, value, ok, seconds):
        """An answer line, read and decoded as the session does: a CaseRun, never another exception."""
        line = json.dumps(_case_event(value, ok, seconds)).encode()
        event = read_event(line)
        run = _case_run(event) if event.get("event") == "case" else None
        assert run is None or isinstance(run, CaseRun)

    @examples(1)
    @given(value=WIRE_VALUES)
    def test_a_decoded_value_describes_and_checks(self, value):
        """Whatever decodes is described in one inert line (what a report shows of it)."""
        try:
            decoded = decode_value(value)
        except ValueError:  # DecodeError, the only refusal
            return
        said = describe(decoded)
        assert one_line(said) == said or isinstance(decoded, str)
        if isinstance(decoded, Opaque):
            assert isinstance(decoded.type_name, StudentText)

    @examples(1)
    @given(raw=st.binary(max_size=200))
    def test_any_bytes_are_an_event(self, raw):
        assert isinstance(read_event(raw.replace(b"\n", b" ")), dict)


# ---------------------------------------------------------------- student text in every report

FORGED = "FORGED"
# every character that breaks a line somewhere: str.splitlines, a terminal, XML, Markdown
BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40)
NASTY = st.lists(st.sampled_from([*BREAKS, "\x1b[2J", "\x9b", "\u202e", "\ud800", "\udfff", "\x00", "\t", "`", "::",
                                  "<", "&", "]]>", "--", "\ufffe", " ", "a", "é", "\U0001f600"]), max_size=12).map("".join)
STUDENT = st.builds(lambda a, brk, b: a + brk + FORGED + b, st.one_of(ANY_TEXT, NASTY), st.sampled_from(BREAKS),
                    st.one_of(ANY_TEXT, NASTY))


WEIGHTS = st.one_of(st.floats(), st.sampled_from([1e308, -1e308, 5e-324, math.nan, math.inf, -math.inf, 0.25]))
ROWS = st.lists(st.lists(WEIGHTS, max_size=9).map(tuple), max_size=9).map(tuple)  # ragged, empty, any size
GRIDS = st.lists(st.builds(WeightGrid, st.one_of(ANY_TEXT, NASTY), ROWS, ROWS,
                           st.tuples(st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))), max_size=3).map(tuple)


def _result(texts: list[str], fmt_case: int, grids: tuple[WeightGrid, ...] = ()) -> GradeResult:
    """A result whose every student text field holds one of `texts`, made as the grader makes them:
    cleaned once by student_text where they enter, composed with the grader's words after that."""
    kind, message, name, printed, written, label, notebook, source, key = texts
    type_name = Opaque(student_text(name, 80))
    raised = one_line(f"raised {student_text(kind, 80)} at line 3: {student_text(message)}")
    cases = (
        CaseResult("public", False, 1.0, CaseStatus.ERROR, summary=raised),
        CaseResult("returned", False, 1.0, CaseStatus.FAILED, summary="wrong type",
                   detail=f"expected an array, got {describe(type_name)}", inputs="weights (3, 3)", grids=grids),
        CaseResult("hidden", True, 1.0, CaseStatus.ERROR, summary="raised ValueError"),
    )
    code = ProblemResult("softmax", "Softmax", 10, cases, hints=("use the last axis",),
                         stdout=student_text(printed, 4000, lines=True), message="")
    essay = ProblemResult("why", "Why?", 2, (CaseResult("written answer", False, 1.0, CaseStatus.RECORDED,
                                                         summary="recorded (12 characters)"),),
                          quiz=True, counted=False, manual=True, written=student_text(written, 4000, lines=True))
    item = ProblemResult("pruning", "Pruning", 5, (CaseResult("answer", False, 1.0, CaseStatus.ERROR,
                                                             summary=f"answers.yaml:3: answer must be one letter "
                                                                     f"(got {student_text(key, 60)})"),), quiz=True)
    load = LoadError(student_text(kind, 60), student_text(message), line=3, column=2,
                     source=student_text(source, 200)) if fmt_case else None
    notes = (f"{shown_name(notebook)} is missing",
             f"answers.yaml:4: unknown quiz item {one_line(repr(key))} (see `mha list`)")
    return GradeResult("Course", student_text(label, 300), (code, essay, item), messages=notes, load_error=load)


class _Strict(html.parser.HTMLParser):
    """An HTML parser that records every start and end tag, to check they balance."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "rect"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag != "rect":
            assert self.open and self.open.pop() == tag, tag

    def handle_data(self, data):
        self.text.append(data)


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    return [s for v in node for s in _strings(v)] if isinstance(node, list) else []


def _unfenced(markdown: str) -> str:
    """Markdown without its fenced code blocks (what is inside one shows as code, never as a line of its own)."""
    out, fence = [], None
    for line in markdown.split("\n"):
        run = re.match(r"`{3,}", line)
        if fence is None and run:
            fence = run.group()
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def readable(fmt: str, output: str) -> list[str]:
    """The text a reader of `output` sees, parsed with the format's own parser (a failure raises)."""
    if fmt == "json":
        json.loads(output)
        return [output]  # data: its strings are never shown as lines; its own lines are JSON's
    if fmt in ("gradescope", "github", "prairielearn"):
        data = json.loads(output)
        texts = _strings(data)
        return [_unfenced(t) for t in texts] if fmt == "gradescope" else texts
    if fmt == "junit":
        root = ElementTree.fromstring(output.encode("utf-8"))
        return [t for e in root.iter() for t in (e.text or "", e.tail or "", *e.attrib.values())]
    if fmt == "autolab":  # the text report, then Tango's scores line: JSON with one number per problem
        body, _, last = output.rstrip("\n").rpartition("\n")
        scores = json.loads(last)["scores"]
        assert all(isinstance(v, (int, float)) for v in scores.values())
        return [body]
    if fmt == "html":
        parser = _Strict()
        parser.feed(output)
        parser.close()
        assert parser.open == [], parser.open
        return ["".join(parser.text)]
    return [output]


class TestStudentTextInEveryReport:
    @examples(0.5)
    @given(texts=st.lists(STUDENT, min_size=9, max_size=9), load=st.integers(0, 1), grids=GRIDS)
    def test_every_format_parses_and_holds_no_student_line_or_control(self, texts, load, grids):
        """Every format renders (weights of any value and shape drawn), parses with its own parser,
        holds no control character and no line that starts where a student's line break was."""
        result = _result(texts, load, tuple(WeightGrid(student_text(g.label, 40), g.got, g.expected, g.shape)
                                            for g in grids))
        for fmt in names():
            output = render(fmt, result)
            output.encode("utf-8")  # writable as UTF-8: no lone surrogate
            shown = readable(fmt, output)
            assert CONTROLS.findall("".join(shown)) == [], fmt
            starts = [line for text in shown for line in text.splitlines() if line.lstrip().startswith(FORGED)]
            assert starts == [], (fmt, starts)

    @examples(1)
    @given(raw=st.one_of(ANY_TEXT, NASTY, st.binary(max_size=40)), limit=st.integers(0, 50), lines=st.booleans())
    def test_student_text_is_inert_and_idempotent(self, raw, limit, lines):
        """Cleaned text holds no control but \\n and \\t (on several lines), encodes as UTF-8,
        and cleaning it again changes nothing."""
        text = student_text(raw, limit, lines=lines)
        assert isinstance(text, StudentText) and CONTROLS.findall(text) == []
        assert text.encode("utf-8") is not None and ("\n" not in text or lines) and ("\t" not in text or lines)
        assert student_text(text, len(text), lines=lines) == text


# ---------------------------------------------------------------- answers.yaml and notebooks

QUIZ_IDS = ["pruning", "why_several_heads", "distributions_one_head"]
YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.dictionaries(st.one_of(st.sampled_from(QUIZ_IDS), st.text(max_size=8)),
                    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
                                 lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=4), c,
                                                                                            max_size=3)),
                                 max_leaves=10), max_size=5).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    st.lists(st.sampled_from(["pruning: ", "b", "\n", '"\\ud800"', "&a ", "*a", "[", "]", "{", "}", "- ", ": ",
                              "!!python/object:os.system ", "why_several_heads: ", "1e999", "'", "\t", "%YAML 1.1\n",
                              "---\n", "? "]), max_size=40).map("".join),
)


@pytest.fixture(scope="module")
def quiz_draws(course):
    return [draw(item, DEFAULT_SEED) for item in course.quiz.items]


class TestStudentFiles:
    @examples(0.5)
    @given(text=YAML_TEXT, encoding=st.sampled_from(["utf-8", "utf-16", "latin-1", "surrogates"]))
    def test_any_answers_file_is_graded(self, quiz_draws, text, encoding):
        """Any answers.yaml gives a result per item (an error saying why, at worst); every format renders."""
        raw = text.encode("utf-8", "surrogatepass") if encoding == "surrogates" else \
            text.encode(encoding, "replace")
        quiz = grade_draws(quiz_draws, StudentFile("answers.yaml", data=raw), [v.item.id for v in quiz_draws])
        assert len(quiz.items) == len(quiz_draws)
        result = GradeResult("Quiz", student_text("a.py"), quiz.items, messages=quiz.messages)
        for fmt in names():
            assert CONTROLS.findall("".join(readable(fmt, render(fmt, result)))) == []

    @examples(0.5)
    @given(cells=st.lists(st.fixed_dictionaries(
        {"cell_type": st.one_of(st.sampled_from(["code", "raw", "markdown"]), NUMBERS)},
        optional={"source": st.one_of(STUDENT, st.lists(STUDENT, max_size=3), NUMBERS,
                                      st.just("def f(:\n  pass"), st.just("%%time\nx = 1")),
                  "metadata": st.one_of(st.just({"tags": ["mha-answers"]}), st.just({"tags": "mha-answers"}),
                                        st.dictionaries(st.text(max_size=4), NUMBERS, max_size=2), NUMBERS)}),
        max_size=5), top=st.one_of(st.just("cells"), st.text(max_size=5)), name=st.one_of(STUDENT, NASTY))
    def test_any_notebook_is_read_or_refused(self, cells, top, name):
        """A notebook's code, answers and broken cells, or a SubmissionError; every part encodes as UTF-8."""
        raw = json.dumps({top: cells, "nbformat": 4}).encode()
        try:
            code, answers, broken = notebook_parts(raw, shown_name(name))
        except SubmissionError as exc:
            assert CONTROLS.findall(str(exc)) == []
            return
        code.encode("utf-8")
        assert answers is None or answers.encode("utf-8") is not None
        assert all(CONTROLS.findall(b.note()) == [] for b in broken)

    @examples(1)
    @given(raw=st.binary(max_size=300))
    def test_any_bytes_are_a_notebook_or_refused(self, raw):
        try:
            notebook_parts(raw, "attention.ipynb")
        except SubmissionError:
            pass


# ---------------------------------------------------------------- a real student process

def _literal(leaf: st.SearchStrategy) -> st.SearchStrategy:
    """Python source of a value built from `leaf` sources: lists, tuples, dicts of them."""
    return st.recursive(leaf, lambda c: st.one_of(
        st.lists(c, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(c, max_size=3).map(lambda xs: "(" + "".join(x + ", " for x in xs) + ")"),
        st.lists(st.tuples(c, c), max_size=3).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
    ), max_leaves=8)


FLOATS_SRC = st.floats().map(lambda x: f"float({str(x)!r})")
ARRAYS_SRC = st.builds(lambda shape, dtype, fill: f"np.full({shape!r}, {fill}).astype({dtype!r})",
                       st.lists(st.integers(0, 3), max_size=3).map(tuple),
                       st.sampled_from(["float64", "float32", "float16", "int8", "uint64", "bool", "longdouble",
                                        "complex128", "U2", "datetime64[s]"]),
                       st.sampled_from(["1e308", "-1e308", "float('nan')", "float('inf')", "0.5", "1", "-1"]))
ODD_SRC = st.one_of(
    st.text(max_size=20).map(lambda name: f"type({name!r}, (), {{}})()"),
    STUDENT.map(lambda name: f"type({name!r}, (ValueError,), {{}})({name!r})"),
    st.just("np.zeros((0, 10 ** 6))"), st.just("np.float64(1e308) * 10"), st.just("b'\\x9b'"),
    st.just("range(10)"), st.just("{1, 2}"), st.just("print"), st.just("10 ** 100"),
)
RETURNED = _literal(st.one_of(st.integers().map(repr), FLOATS_SRC, st.one_of(ANY_TEXT, STUDENT).map(repr),
                              st.sampled_from(["None", "True", "False"]), ARRAYS_SRC, ODD_SRC))


@pytest.mark.slow
class TestRealStudentProcess:
    @examples(0.06)
    @given(value=RETURNED, printed=STUDENT, raises=st.booleans())
    def test_random_return_values_never_fail_the_grader(self, course, tmp_path_factory, value, printed, raises):
        """softmax returning (or raising) a random value in a real student process: a result for every
        case and every format rendered, never "the autograder failed"."""
        folder = tmp_path_factory.mktemp("fuzzed")
        body = f"raise {value}" if raises else f"return {value}"
        (folder / "attention.py").write_text(
            "import numpy as np\n\n\ndef softmax(scores):\n"
            f"    print({printed!r})\n    {body}\n", encoding="utf-8", errors="surrogatepass")
        result = grade(course, folder / "attention.py", problem_ids=["softmax"],
                       limits=Limits(problem_seconds=5, submission_seconds=30, load_seconds=10))
        problem = result.problems[0]
        assert problem.score == 0 and len(problem.cases) > 0
        for fmt in names():
            shown = readable(fmt, render(fmt, result))
            assert CONTROLS.findall("".join(shown)) == [], fmt
            assert [line for text in shown for line in text.splitlines() if line.lstrip().startswith(FORGED)] == []
        assert math.isfinite(result.score)
