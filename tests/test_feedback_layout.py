"""The text report's layout (grader.reports.text, grader.reports.terminal), checked against golden
outputs built from hand-made results: no colour and a fixed width, so the text is the same on any
terminal. A few end-to-end checks run `mha check` itself on a syntax error and on a buggy softmax."""
from __future__ import annotations

import io
import re
import textwrap
from dataclasses import replace

import pytest

from grader.grading.results import CaseResult, CaseStatus, GradeResult, LoadError, ProblemResult, WeightGrid
from grader.reports import html, text
from grader.reports.terminal import Style, grid_lines, wrap

from .conftest import SOLUTIONS

PLAIN = Style(color=False, width=80)
IMPORT = "attention.py could not be imported"


def case(name: str, status: CaseStatus = CaseStatus.PASSED, **fields) -> CaseResult:
    return CaseResult(name=name, hidden=fields.pop("hidden", False), weight=1.0, status=status, **fields)


def golden(block: str) -> str:
    return textwrap.dedent(block).lstrip("\n")


def section(report: str, title: str) -> str:
    """The lines of one section (from its heading to the next blank line before a heading or the end)."""
    start = report.index(f"\n{title}\n") + 1
    end = report.find("\n\n", start)
    return report[start:] if end < 0 else report[start:end + 1]


def syntax_error_result() -> GradeResult:
    error = LoadError("syntax", "'(' was never closed", 14, 16, "    e = np.exp((x - x.max(axis=-1, keepdims=True))")
    problems = tuple(
        ProblemResult(pid, title, 10, tuple(case(n, CaseStatus.ERROR, summary=IMPORT, inputs="x=1") for n in "abc"),
                      hints=("A hint about axes, unrelated to syntax.",), message=error.describe())
        for pid, title in (("softmax", "A numerically stable softmax"), ("split_heads", "Split the width into heads")))
    quiz = (
        ProblemResult("pruning", "Pruning heads", 1, (case("answer"),), message="Right: redundancy in one model.",
                      quiz=True),
        ProblemResult("widen_values", "Wider values", 1,
                      (case("answer", CaseStatus.NOT_ANSWERED, summary="not answered yet"),), quiz=True),
        ProblemResult("head_count", "Head count", 2,
                      (case("answer", CaseStatus.NOT_ANSWERED, summary="not answered yet"),), quiz=True),
        ProblemResult("two_relations", "Two relations", 1, (case("answer format", CaseStatus.RECORDED),),
                      message="answer recorded; this hidden item is graded by `mha grade`", counted=False, quiz=True),
    )
    return GradeResult("Multi-head attention", "attention.py", problems + quiz, messages=(error.describe(),),
                       include_hidden=False, load_error=error)


AXIS = "Your weights are normalized down the first axis, so each column sums to 1 instead of each row."


def buggy_result() -> GradeResult:
    """A softmax over the wrong axis (the same mistake on three cases), a problem not started, one passed."""
    wrong = dict(status=CaseStatus.FAILED, summary="wrong values", mistake="softmax-wrong-axis", mistake_message=AXIS)
    softmax = ProblemResult("softmax", "A numerically stable softmax", 10, (
        case("worked example"),
        case("one distribution per row", inputs="scores=float64 array of shape (3, 3)",
             detail="9 of 9 element(s) differ; worst at [2, 0]: got 0.468311, expected 0.993262", **wrong),
        case("heads and queries", inputs="scores=float64 array of shape (2, 3, 4)",
             detail="24 of 24 element(s) differ; worst at [1, 2, 2]: got 0.885393, expected 0.068206", **wrong),
        case("random sizes", hidden=True, **wrong),
    ), hints=("Which axis do your max and sum run over?",))
    stub = ProblemResult("split_heads", "Split the width into heads", 10,
                         (case("worked example", CaseStatus.NOT_IMPLEMENTED, summary="not implemented yet"),))
    done = ProblemResult("merge_heads", "Merge the heads back together", 10, (case("worked example"),))
    return GradeResult("Multi-head attention", "attention.py", (softmax, stub, done), include_hidden=True)


class TestSyntaxError:
    def test_told_once_with_its_line_and_a_caret(self):
        """An unclosed parenthesis: one block with the line and a caret, no per-case lines, no hints; the
        quiz is still reported (a right answer on one line); the summary says what to fix first."""
        assert text.render(syntax_error_result(), PLAIN) == golden("""
            Multi-head attention
            ====================
            Public cases only: hidden cases and hidden quiz items are graded later by `mha
            grade`.

            FAIL  attention.py has a syntax error on line 14
                  '(' was never closed
                  14 |     e = np.exp((x - x.max(axis=-1, keepdims=True))
                     |                ^
                  No problem could run, so none was checked (2 problems, 0 of 20 points).
                  Fix this first; the cases then run as usual.

            Quiz (answers.yaml)
            PASS  pruning: Pruning heads  [1/1]
            TODO  not answered yet, 0 of 3 points: widen_values, head_count
            1 hidden item recorded: graded later by `mha grade`, not in this score

            Summary
              FAIL  2 problems not run, 0 of 20 points: fix attention.py line 14 first
              TODO  quiz      1/4  3 items: 1 right, 0 wrong, 2 not answered

            Score: 1/24 (4%), 0 of 2 problems and 1 of 3 quiz items fully correct (public
            cases only)
            """)

    def test_mha_check_on_an_unclosed_parenthesis(self, cli, tmp_path):
        """`mha check` itself: the error once, its caret under the parenthesis, short output, exit 1."""
        source = (SOLUTIONS / "attention.py").read_text().replace("np.exp(", "np.exp((", 1)
        (tmp_path / "attention.py").write_text(source)
        line = next(n for n, t in enumerate(source.splitlines(), 1) if "np.exp((" in t)
        result = cli("check", "--path", str(tmp_path / "attention.py"))
        out = result.stdout
        assert result.exit_code == 1
        assert out.count("was never closed") == 1 and out.count(IMPORT) == 0
        assert f"FAIL  attention.py has a syntax error on line {line}\n" in out
        shown = next(t for t in out.splitlines() if "np.exp((" in t)
        caret = out.splitlines()[out.splitlines().index(shown) + 1]
        assert caret.rstrip().endswith("^") and shown[len(caret.rstrip()) - 1] == "("
        assert "hint:" not in out and len(out.splitlines()) < 40


class TestProblems:
    def test_one_mistake_paragraph_per_problem_and_the_summary(self):
        """A mistake named on three cases is told once; passed cases share a line; a stub is one TODO line;
        the summary gives each problem's score and the first thing to fix."""
        assert text.render(buggy_result(), PLAIN) == golden("""
            Multi-head attention
            ====================

            Problems
            FAIL  softmax: A numerically stable softmax  [2.5/10]
                  FAIL  one distribution per row: wrong values
                        inputs: scores=float64 array of shape (3, 3)
                        9 of 9 element(s) differ; worst at [2, 0]: got 0.468311, expected
                          0.993262
                  FAIL  heads and queries: wrong values
                        inputs: scores=float64 array of shape (2, 3, 4)
                        24 of 24 element(s) differ; worst at [1, 2, 2]: got 0.885393,
                          expected 0.068206
                  hidden cases failing, 1 of 1: random sizes (wrong values)
                  passed: worked example
                  likely mistake (softmax-wrong-axis): Your weights are normalized down the
                    first axis, so each column sums to 1 instead of each row.
            TODO  split_heads: Split the width into heads  [0/10]  not implemented yet
            PASS  merge_heads: Merge the heads back together  [10/10]

            Summary
              FAIL  softmax       2.5/10  likely softmax-wrong-axis: Your weights are...
              TODO  split_heads     0/10  not implemented yet
              PASS  merge_heads    10/10

            Score: 12.5/30 (42%), 1 of 3 problems fully correct
            """)

    def test_a_mistake_on_some_cases_names_them(self):
        """When a mistake explains only some failing cases, its paragraph says which."""
        result = buggy_result()
        softmax = result.problems[0]
        other = case("a shift changes nothing", CaseStatus.FAILED, summary="not finite", detail="1 element is nan")
        report = text.render(GradeResult("t", "a.py", (ProblemResult(
            softmax.id, softmax.title, 10, softmax.cases + (other,)),)), PLAIN)
        assert report.count("likely mistake") == 1
        assert "likely mistake (softmax-wrong-axis), on 'one distribution per row', 'heads\n        and queries', " \
               "[hidden] 'random sizes': Your weights" in report

    def test_colour_only_when_the_style_has_it(self):
        """Marks are painted (FAIL red, PASS green, TODO yellow) with colour on, and nothing is without."""
        painted = text.render(buggy_result(), Style(color=True, width=80))
        assert "\033[31mFAIL\033[0m  softmax" in painted and "\033[32mPASS\033[0m  merge_heads" in painted
        assert "\033[33mTODO\033[0m  split_heads" in painted
        assert "\033[" not in text.render(buggy_result(), PLAIN)

    def test_printed_escape_codes_are_neutralised(self):
        """What student code printed cannot drive the terminal: control characters become '?'."""
        p = ProblemResult("softmax", "S", 10, (case("c", CaseStatus.FAILED, summary="wrong values"),),
                          stdout="\033[2Jcleared\n")
        report = text.render(GradeResult("t", "a.py", (p,)), PLAIN)
        assert "| ?[2Jcleared" in report and "\033" not in report


class TestOneCase:
    """text.one_case_lines: one case as `mha check` words it, for the pytest plugin's tests."""

    def test_a_named_mistake_follows_the_case(self):
        """A wrong answer: the case's lines of the report, then its likely mistake (no hint)."""
        result = buggy_result()
        softmax = result.problems[0]
        assert text.one_case_lines(result, softmax, softmax.cases[1], PLAIN) == [
            "      FAIL  one distribution per row: wrong values",
            "            inputs: scores=float64 array of shape (3, 3)",
            "            9 of 9 element(s) differ; worst at [2, 0]: got 0.468311, expected",
            "              0.993262",
            "      likely mistake (softmax-wrong-axis): Your weights are normalized down the",
            "        first axis, so each column sums to 1 instead of each row."]

    def test_without_a_named_mistake_the_hint(self):
        """A wrong answer no mistake explains gets the problem's first hint, as in the report."""
        result = buggy_result()
        softmax = result.problems[0]
        plain = replace(softmax.cases[2], mistake=None, mistake_message="")
        lines = text.one_case_lines(result, softmax, plain, PLAIN)
        assert lines[0] == "      FAIL  heads and queries: wrong values"
        assert lines[-1] == "      hint: Which axis do your max and sum run over?"
        assert not any("likely mistake" in line for line in lines)

    def test_an_import_failure_is_its_line_and_caret(self):
        """A case that could not run because attention.py did not import: the import failure, with
        its line and a caret, and nothing of the case."""
        result = syntax_error_result()
        assert text.one_case_lines(result, result.problems[0], result.problems[0].cases[0], PLAIN) == golden("""
            FAIL  attention.py has a syntax error on line 14
                  '(' was never closed
                  14 |     e = np.exp((x - x.max(axis=-1, keepdims=True))
                     |                ^
            """).splitlines()

    def test_a_quiz_item_is_its_block(self):
        """A quiz item is its block of the report, header first."""
        result = syntax_error_result()
        head_count = next(p for p in result.problems if p.id == "head_count")
        assert text.one_case_lines(result, head_count, head_count.cases[0], PLAIN) == [
            "FAIL  head_count: Head count  [0/2]", "      not answered yet"]


class TestWrapping:
    @pytest.mark.parametrize("width", [40, 57, 80, 100])
    def test_never_inside_a_word(self, width):
        """Every word of a long line comes out whole, each line within the width (unless one word is longer)."""
        words = ("attention.py multi_head_attention (num_heads, n, d_model) sqrt(d_k) 0.993262 well-known "
                 "normalized softmax-wrong-axis " * 6).split()
        lines = wrap(" ".join(words), width, "      ", "        ")
        assert " ".join(lines).split() == words
        assert all(len(line) <= width or " " not in line.strip() for line in lines)

    @pytest.mark.parametrize("line", ["fits as it is", "ends in a space ", "\ttab", "non-breaking\xa0space",
                                      "ideographic\u3000space", "carriage\rreturn", "", "two\nlines", "  leading"])
    def test_a_line_that_fits_comes_out_as_textwrap_gives_it(self, line):
        """Short lines skip textwrap (most feedback lines fit): only where that gives the same lines."""
        for indent, hanging in (("", None), ("    ", "      ")):
            expected = []
            for k, paragraph in enumerate(line.split("\n")):
                first = indent if k == 0 else (indent if hanging is None else hanging)
                expected += textwrap.wrap(paragraph, width=40, initial_indent=first, break_long_words=False,
                                          subsequent_indent=indent if hanging is None else hanging,
                                          break_on_hyphens=False) or [first.rstrip()]
            assert wrap(line, 40, indent, hanging) == expected

    def test_report_lines_fit_the_width(self):
        for width in (60, 80, 100):
            report = text.render(buggy_result(), Style(width=width))
            assert max(len(line) for line in report.splitlines()) <= width


class TestGrid:
    GRID = WeightGrid("", got=((1.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.34, 0.33, 0.33)),
                      expected=((1.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), shape=(3, 3))

    def test_shaded_grid_beside_the_expected_one(self):
        """Two characters per weight in five shades, framed; yours on the left, expected on the right."""
        assert grid_lines([self.GRID], PLAIN, "  ") == [
            "  yours     expected",
            "  │██    │  │██    │",
            "  │▒▒▒▒  │  │██    │",
            "  │░░░░░░│  │  ██  │"]

    def test_heads_side_by_side_and_a_cut_grid_says_so(self):
        """Two heads fit on one row at 80 columns; a grid cut to 8 rows says how large it was."""
        heads = [WeightGrid(f"head {k}", self.GRID.got, self.GRID.expected, (3, 3)) for k in (1, 2)]
        lines = grid_lines(heads, PLAIN, "")
        assert lines[0] == "head 1: yours  expected    head 2: yours  expected"
        assert len(lines) == 4
        cut = WeightGrid("", self.GRID.got, self.GRID.expected, shape=(12, 3))
        assert grid_lines([cut], PLAIN, "")[-1] == "(first 3 of 12 rows, 3 of 3 columns)"

    def test_ascii_shades_when_the_output_cannot_encode_blocks(self):
        lines = grid_lines([self.GRID], Style(unicode=False), "")
        assert lines[1:] == ["|##    |  |##    |", "|::::  |  |##    |", "|......|  |  ##  |"]

    def test_shown_for_a_failing_public_case_only(self):
        """The report draws the grid of a failing public case; a hidden case's grids never reach it."""
        failing = case("causal mask", CaseStatus.FAILED, summary="weights: wrong values", grids=(self.GRID,))
        secret = WeightGrid("", ((0.0, 1.0),) * 2, ((1.0, 0.0),) * 2, (2, 2))
        hidden = case("hidden one", CaseStatus.FAILED, summary="weights: wrong values", hidden=True, grids=(secret,))
        report = text.render(GradeResult("t", "a.py", (ProblemResult("scaled_dot_product_attention", "SDPA", 15,
                                                                      (hidden, failing)),)), PLAIN)
        assert "weights in 'causal mask' (row: query, column: key; darker = more weight):" in report
        assert "        │▒▒▒▒  │  │██    │" in report and report.count("yours") == 1
        page = html.fragment(GradeResult("t", "a.py", (ProblemResult("sdpa", "SDPA", 15, (failing,)),)))
        assert page.count("<svg") == 1 and page.count("<rect") == 18 and "query 1, key 0: 0.500" in page


class TestStyleDetect:
    class Stream(io.StringIO):
        def __init__(self, tty: bool, encoding: str = "utf-8"):
            super().__init__()
            self._tty, self._encoding = tty, encoding

        def isatty(self) -> bool:
            return self._tty

        @property
        def encoding(self):
            return self._encoding

    def test_terminal_gets_colour_unless_no_color(self):
        assert Style.detect(self.Stream(True), {"TERM": "xterm"}).color
        assert not Style.detect(self.Stream(True), {"TERM": "xterm", "NO_COLOR": "1"}).color

    def test_pipe_gets_no_colour_unless_force_color(self):
        assert not Style.detect(self.Stream(False), {}).color
        assert Style.detect(self.Stream(False), {"FORCE_COLOR": "1"}).color
        assert not Style.detect(self.Stream(False), {"FORCE_COLOR": "0"}).color
        assert not Style.detect(self.Stream(False), {"FORCE_COLOR": "1", "NO_COLOR": "1"}).color

    def test_width_from_columns_kept_in_bounds(self, monkeypatch):
        monkeypatch.setenv("COLUMNS", "72")
        assert Style.detect(self.Stream(False), {"COLUMNS": "72"}).width == 72
        monkeypatch.setenv("COLUMNS", "20")
        assert Style.detect(self.Stream(False), {"COLUMNS": "20"}).width == 40
        assert Style.detect(self.Stream(False), {}).width == 100

    def test_ascii_stream_gets_ascii_shades(self):
        assert not Style.detect(self.Stream(False, "ascii"), {}).unicode


def test_grading_keeps_grids_off_hidden_cases(course, tmp_path):
    """`mha grade` on scaled dot-product attention without the scale: the failing public cases carry
    the weights and the expected ones; no hidden case carries any."""
    from grader.grading.grade import grade
    from grader.sandbox.limits import Limits
    source = (SOLUTIONS / "attention.py").read_text().replace("Q @ K.T / math.sqrt(d_k)", "Q @ K.T", 1)
    (tmp_path / "attention.py").write_text(source)
    result = grade(course, tmp_path / "attention.py", problem_ids=["scaled_dot_product_attention"],
                   limits=Limits(problem_seconds=10))
    cases = result.problems[0].cases
    assert any(c.grids for c in cases if not c.hidden and not c.passed)
    assert all(c.grids == () for c in cases if c.hidden) and any(c.hidden and not c.passed for c in cases)
    grid = next(c for c in cases if c.grids).grids[0]
    assert len(grid.got) == len(grid.expected) and grid.got != grid.expected


def test_mha_check_on_a_wrong_axis_softmax_draws_no_hidden_grids(cli_everything, tmp_path):
    """`mha check --format html` on an attention with the softmax over the wrong axis: a picture for
    the failing public cases, none for hidden ones (check does not run them), one mistake paragraph."""
    source = (SOLUTIONS / "attention.py").read_text().replace("e.sum(axis=-1, keepdims=True)", "e.sum(axis=0, keepdims=True)", 1)
    (tmp_path / "attention.py").write_text(source)
    cli = cli_everything      # scaled_dot_product_attention is optional: switched on here
    plain = cli("check", "scaled_dot_product_attention", "--path", str(tmp_path / "attention.py"))
    assert plain.exit_code == 1
    assert re.sub(r"\n +", " ", plain.stdout).count("likely mistake") <= 1
    assert "│" in plain.stdout and "yours" in plain.stdout and "[hidden]" not in plain.stdout
    page = cli("check", "scaled_dot_product_attention", "--path", str(tmp_path / "attention.py"), "--format", "html")
    assert page.stdout.startswith('<div class="mha-report"') and page.stdout.count("<svg") >= 1


def test_mha_grade_html_page_draws_the_weights(cli_everything, tmp_path):
    """`mha grade --format html --output`: one page, the report text and an SVG per failing problem with weights."""
    source = (SOLUTIONS / "attention.py").read_text().replace("Q @ K.T / math.sqrt(d_k)", "Q @ K.T", 1)
    (tmp_path / "attention.py").write_text(source)
    out = tmp_path / "report.html"
    result = cli_everything("grade", str(tmp_path), "--problem", "scaled_dot_product_attention", "--format", "html",
                 "--output", str(out))
    page = out.read_text()
    assert result.exit_code == 0 and page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "FAIL  scaled_dot_product_attention" in page and page.count("<svg") == 1


class TestHiddenQuizItemsInCheck:
    def check(self, cli, tmp_path, answers: str):
        (tmp_path / "attention.py").write_text((SOLUTIONS / "attention.py").read_text())
        (tmp_path / "answers.yaml").write_text(answers)
        return cli("check", "two_relations", "precise_claim", "--path", str(tmp_path / "attention.py"))

    def test_a_wrong_hidden_answer_is_recorded_not_scored(self, cli, tmp_path):
        """A wrong answer to a hidden item: 'recorded', no PASS, no FAIL, not in the score; exit 0."""
        result = self.check(cli, tmp_path, "two_relations: a\nprecise_claim: a\n")
        assert result.exit_code == 0
        assert "1 hidden item recorded: graded later by `mha grade`, not in this score" in result.stdout
        assert "two_relations: " not in result.stdout and "Score: 1/1 (100%)" in result.stdout

    def test_a_hidden_answer_of_the_wrong_form_fails_check(self, cli, tmp_path):
        """An answer of the wrong form is told at once, even for a hidden item, and check exits 1."""
        result = self.check(cli, tmp_path, "two_relations: [c]\nprecise_claim: a\n")
        assert result.exit_code == 1
        assert "FAIL  two_relations: Two relations for one token  [hidden: graded by `mha grade`]" in result.stdout
        assert "Score: 1/1 (100%)" in result.stdout


def test_case_lists_are_split_by_semicolons():
    """Case names may hold commas, so lists of cases are split by semicolons."""
    p = ProblemResult("count", "Count", 10, (case("one head, width 2"), case("two heads, one query"),
                                             case("x", CaseStatus.FAILED, summary="wrong value", detail="got 2")))
    assert "passed: one head, width 2; two heads, one query\n" in text.render(GradeResult("t", "a.py", (p,)), PLAIN)


def test_a_timeout_is_told_once_and_the_cases_it_stopped_by_name():
    """An infinite loop: the case that ran out of time in full, those never run on one line, no hint."""
    late = "timed out (not run: an earlier case of this problem did not finish)"
    p = ProblemResult("attention_reading", "Reading values", 10, (
        case("worked example", CaseStatus.TIMEOUT, summary="timed out (time limit of 1 s for this problem)",
             inputs="weights=[0.8, 0.2]"),
        case("two heads", CaseStatus.TIMEOUT, summary=late, inputs="weights=[[0.8, 0.2]]"),
        case("one-hot", CaseStatus.TIMEOUT, summary=late, inputs="weights=[0, 1]"),
        case("many queries", CaseStatus.TIMEOUT, summary=late, hidden=True),
    ), hints=("Which numpy product computes that?",), message="timed out (time limit of 1 s for this problem)")
    assert section(text.render(GradeResult("t", "a.py", (p,)), PLAIN), "Problems") == golden("""
        Problems
        FAIL  attention_reading: Reading values  [0/10]
              FAIL  worked example: timed out (time limit of 1 s for this problem)
                    inputs: weights=[0.8, 0.2]
              also timed out (not run: an earlier case of this problem did not finish):
                    two heads; one-hot; [hidden] many queries
        """)


class TestLaterImportFailure:
    """A later process of the submission failing its import (after some problems ran): the text
    report counts only the problems it kept from running, and its counts agree with the score."""

    @staticmethod
    def result():
        from grader.grading.results import NOT_IMPORTED, CaseResult, CaseStatus, GradeResult, LoadError, ProblemResult
        passed = ProblemResult("softmax", "Softmax", 10.0, (CaseResult("a", False, 1.0, CaseStatus.PASSED),))
        unrun = tuple(ProblemResult(pid, pid, 5.0, (CaseResult("a", False, 1.0, CaseStatus.ERROR, summary=NOT_IMPORTED),),
                                    message="importing attention.py raised ImportError (line 3): later")
                      for pid in ("split_heads", "merge_heads"))
        return GradeResult("T", "sub", (passed, *unrun), load_error=LoadError("ImportError", "later", line=3))

    def test_counts_agree_with_the_score(self):
        """2 problems not run, 0 of 10 points; softmax shown as passed; Score: 10/20."""
        from grader.reports.text import render
        text = render(self.result())
        assert "2 problems not run, 0 of 10 points: fix attention.py line 3 first" in text
        assert "2 of 3 problems could not run (10 points); the others ran and are below." in text
        assert "PASS  softmax: Softmax  [10/10]" in text
        assert "Score: 10/20" in text
        assert "3 problems not run" not in text and "No problem could run" not in text
