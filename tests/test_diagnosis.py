"""Diagnoses (grader/grading/diagnosis.py): one named mistake per problem at most, weighed over all
its cases; a failing function of the student's own is pointed at before what calls it."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from grader.grading.cascade import ReferenceServer, helper_references
from grader.grading.checks import check
from grader.grading.diagnosis import calls, read_source
from grader.grading.grade import grade
from grader.grading.prepared import PreparedCases
from grader.reports import json_report, text

from .conftest import COURSE, COURSE_CODE, EXERCISES, solution_source
from .test_mistakes import BUGS, buggy_submission
from .test_real_bugs import SUBMISSIONS

SQRT_QUERIES = """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.T / math.sqrt(Q.shape[0])   # the number of queries, not d_k
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights
"""


def with_function(source: str) -> str:
    """The model answers with one function redefined (the later definition wins)."""
    return solution_source() + "\n\n" + textwrap.dedent(source)


@pytest.fixture(scope="module")
def prepared():
    """The course's cases prepared once for the many submissions graded below, as grade-all
    shares them across a class (the same inputs and expected answers as preparing them afresh)."""
    return PreparedCases()


class TestOneMistakePerProblem:
    @pytest.mark.parametrize("include_hidden", [True, False], ids=["grade", "check"])
    @pytest.mark.parametrize("source", [b.source for b in BUGS] + [SQRT_QUERIES],
                             ids=[b.mistake for b in BUGS] + ["sqrt-number-of-queries"])
    def test_no_problem_is_told_two_mistakes(self, course, write_submission, prepared, source, include_hidden):
        """Every buggy submission, graded on every problem (all cases, and the public ones as
        `mha check` does): at most one mistake id per problem."""
        result = grade(course, write_submission(with_function(source)), include_hidden=include_hidden, cache=prepared)
        told = {p.id: p.mistakes for p in result.problems if len(p.mistakes) > 1}
        assert told == {}

    def test_sqrt_of_the_number_of_queries_is_told_so(self, course, write_submission):
        """Its sizes once made it 'no scaling', 'scaled by d_k' and 'scaled by d_v' in one report;
        its own mistake now fits every failing case, and no other is told."""
        result = grade(course, write_submission(with_function(SQRT_QUERIES)),
                       problem_ids=["scaled_dot_product_attention"]).problems[0]
        assert result.score < result.max_score
        assert result.mistakes == ("attention-scaled-by-sqrt-queries",)
        assert result.message == ""

    def test_public_cases_of_attention_keep_their_sizes_apart(self, course):
        """n, m, d_k, d_v and sqrt(d_k) pairwise distinct in every public case; only the worked
        example has one query (where dividing by sqrt(n) looks like no scaling, and the
        problem-level rule keeps that coincidence from naming anything)."""
        from grader.grading.prepared import build_args
        problem = course.problem("scaled_dot_product_attention")
        public = [c for c in problem.cases if not c.hidden]
        for case in public:
            Q, K, V = build_args(problem, case)[:3]
            sizes = [Q.shape[0], K.shape[0], Q.shape[1], V.shape[1], np.sqrt(Q.shape[1])]
            assert len(set(sizes)) == 5, (case.name, sizes)
        assert [c.name for c in public if build_args(problem, c)[0].shape[0] == 1] == ["worked example"]

    def test_averaged_heads_are_not_named_on_the_one_head_case(self, course, write_submission):
        """With one head, averaging the patterns cannot be told from one wide head: that case names
        nothing, the two-head cases name the averaging."""
        bug = next(b for b in BUGS if b.mistake == "mha-weights-averaged")
        result = grade(course, write_submission(buggy_submission(bug)),
                       problem_ids=["multi_head_attention"]).problems[0]
        one_head = next(c for c in result.cases if c.name == "one head is plain attention")
        assert (one_head.passed, one_head.mistake) == (False, None)
        assert result.mistakes == ("mha-weights-averaged",)

    def test_two_bugs_in_one_function_name_the_larger_and_list_the_rest(self, course, write_submission):
        """A split without transpose that also asserts: the reshape explains most failing cases and
        is named; the cases the `assert` fails are listed as not explained, with the mistake that fits them."""
        result = grade(course, write_submission(with_function("""
            def split_heads(X, num_heads):
                n, d_model = X.shape
                assert d_model % num_heads == 0
                return X.reshape(num_heads, n, d_model // num_heads)
        """)), problem_ids=["split_heads"]).problems[0]
        assert result.mistakes == ("split-without-transpose",)
        assert result.message == ("split-without-transpose does not explain 'width not divisible by heads', "
                                  "'not divisible, hidden' and 'more heads than columns': "
                                  "assert-instead-of-raise fits them: a second mistake.")
        assert not any(c.mistake for c in result.cases if "divisible" in c.name or "more heads" in c.name)

    def test_an_inverted_mask_is_named_whatever_fills_a_row_with_nothing_left(self, course, write_submission):
        """Inverting a causal mask leaves a query no key: -inf gives nan there, -1e9 a uniform row
        (test_mistakes uses -1e9). Where the mistake's own answer is undefined, any answer fits it."""
        result = grade(course, write_submission(with_function("""
            def scaled_dot_product_attention(Q, K, V, mask=None):
                scores = Q @ K.T / math.sqrt(Q.shape[1])
                if mask is not None:
                    scores = np.where(mask, -np.inf, scores)
                weights = softmax(scores)
                return weights @ V, weights
        """)), problem_ids=["scaled_dot_product_attention"]).problems[0]
        assert result.score < result.max_score
        assert result.mistakes == ("attention-mask-inverted",)

    @pytest.mark.parametrize("formula", [
        "4 * num_heads * d_model * d_model + (4 * d_model if bias else 0)",
        "4 * num_heads * (d_model * d_model + (d_model if bias else 0))",
        "3 * num_heads * d_model * d_model + d_model * d_model + (4 * d_model if bias else 0)",
    ])
    def test_every_count_that_grows_with_heads_is_named(self, course, write_submission, formula):
        """The 'parameters grow with heads' mistake knows the family, 4h d^2 + 4d included."""
        result = grade(course, write_submission(with_function(f"""
            def parameter_count(d_model, num_heads, bias=True):
                return {formula}
        """)), problem_ids=["parameter_count"]).problems[0]
        assert result.score < result.max_score
        assert result.mistakes == ("params-grow-with-heads",)


class TestCascade:
    WRONG_AXIS_SOFTMAX = """
        def softmax(scores):
            e = np.exp(scores - scores.max(axis=0, keepdims=True))
            return e / e.sum(axis=0, keepdims=True)
    """

    def test_a_correct_caller_of_a_broken_softmax_points_at_softmax(self, course, write_submission):
        """scaled_dot_product_attention is right but calls a broken softmax: it says so, first,
        is not told 'softmax over queries', and is told it passes with the course's softmax;
        softmax is told its own mistake."""
        result = grade(course, write_submission(with_function(self.WRONG_AXIS_SOFTMAX)),
                       problem_ids=["softmax", "scaled_dot_product_attention", "multi_head_attention"])
        by_id = {p.id: p for p in result.problems}       # the core first, then the optional problems
        softmax, sdpa, mha = (by_id[i] for i in ("softmax", "scaled_dot_product_attention", "multi_head_attention"))
        assert softmax.mistakes == ("softmax-wrong-axis",)
        assert sdpa.score < sdpa.max_score and sdpa.mistakes == ()
        assert sdpa.message == ("scaled_dot_product_attention calls your softmax, which fails its own cases. "
                                "Graded again with the course's softmax in place of yours, "
                                "scaled_dot_product_attention passes every public case: its own code is right.")
        # the model multi-head attention calls softmax itself (it runs in the core, without the
        # optional helpers): the root is named there too
        assert mha.message == ("multi_head_attention calls your softmax, which fails its own cases. "
                               "Graded again with the course's softmax in place of yours, "
                               "multi_head_attention passes every public case: its own code is right.")
        assert mha.mistakes == ()

    def test_what_the_rerun_prints_is_never_shown(self, course, write_submission):
        """A caller that prints which softmax it was handed: the re-run's (the course's, defined in
        the reference's factory) never reaches the report; its own first run's does."""
        source = self.WRONG_AXIS_SOFTMAX + """
        def scaled_dot_product_attention(Q, K, V, mask=None):
            print("SOFTMAX-IS", softmax.__qualname__)
            scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return weights @ V, weights
    """
        result = grade(course, write_submission(with_function(source)),
                       problem_ids=["softmax", "scaled_dot_product_attention"])
        sdpa = result.problems[1]
        assert sdpa.message.endswith("scaled_dot_product_attention passes every public case: its own code is right.")
        assert "SOFTMAX-IS softmax" in sdpa.stdout  # its own run, with its own softmax
        shown = text.render(result) + json_report.render(result)
        # the re-run's own print never arrives; the text report gives a caller that is right once
        # its helper is fixed one line, without its cases or printed output
        assert "_mha_course_reference" not in shown + sdpa.stdout and sdpa.stdout.count("SOFTMAX-IS") >= 1
        assert sdpa.right_once == ("softmax",) and "right once your softmax is fixed" in text.render(result)
        assert sdpa.score < sdpa.max_score  # the re-run's passes are not points

    def test_an_unimplemented_callee_is_named(self, course, write_submission):
        """A softmax left as the stub: scaled dot-product attention says to implement it first
        (with nothing of the student's softmax to replace, it is not graded again)."""
        stub = "def softmax(scores):\n    raise NotImplementedError('softmax')\n"
        result = grade(course, write_submission(with_function(stub)),
                       problem_ids=["softmax", "scaled_dot_product_attention"])
        assert result.problems[1].message == ("scaled_dot_product_attention calls your softmax, which is not "
                                              "implemented yet: implement it first.")

    def test_its_own_mistake_is_found_behind_a_broken_helper(self, course, write_submission, tmp_path):
        """softmax overflowing and attention unscaled: attention is graded again with the course's
        softmax, and told its own mistake (which the class report counts); softmax is told its own."""
        from grader.classroom.analysis import analyse
        from grader.classroom.batch import Submission, result_record, row_of
        source = (SUBMISSIONS / "bug_cascade_overflow_unscaled.py").read_text()
        result = grade(course, write_submission(with_function(source)),
                       problem_ids=["softmax", "scaled_dot_product_attention"])
        softmax, sdpa = result.problems
        assert softmax.mistakes == ("softmax-overflow",)
        assert sdpa.score == 0 and sdpa.mistakes == ("attention-no-scale",)
        assert sdpa.message == ("scaled_dot_product_attention calls your softmax, which fails its own cases. "
                                "Graded again with the course's softmax in place of yours, scaled_dot_product_attention "
                                "still fails 4 of 4 public cases: its own mistake is attention-no-scale.")
        message = next(m.message for m in course.problem("scaled_dot_product_attention").mistakes
                       if m.id == "attention-no-scale")
        assert {c.mistake_message for c in sdpa.cases if c.mistake} == {message}
        record = result_record(Submission("ada", tmp_path, None, None), result, "graded", 0, "k")
        made = analyse([row_of(record)], {p.id: p.max_score for p in result.problems}).mistakes
        assert ("scaled_dot_product_attention", "attention-no-scale", 1) in made

    def test_only_a_failing_caller_of_a_failing_helper_is_graded_again(self, course, write_submission,
                                                                      monkeypatch):
        """One re-run, of the one problem that fails and calls a failing helper; none for a
        right submission, nor for a failing function that calls no failing helper."""
        import grader.grading.grade as grading
        seen = []
        again = grading._graded_again
        monkeypatch.setattr(grading, "_graded_again", lambda data, problems, *rest: (
            seen.append([p.id for p in problems]), again(data, problems, *rest))[1])
        ids = ["softmax", "scaled_dot_product_attention", "split_heads", "multi_head_attention"]
        grade(course, write_submission(solution_source()), problem_ids=ids)
        grade(course, write_submission(with_function(next(b for b in BUGS if b.mistake == "mha-one-wide-head")
                                                         .source)), problem_ids=ids)
        assert seen == []
        grade(course, write_submission(with_function(self.WRONG_AXIS_SOFTMAX)),
              problem_ids=["softmax", "scaled_dot_product_attention", "split_heads"])
        assert seen == [["scaled_dot_product_attention"]]

    PROBE = """
import gc, inspect, sys
import numpy as np

def probe(x):
    course = {root!r}
    found = []
    for obj in gc.get_objects():  # every function and code object the process holds
        code = obj if type(obj).__name__ == "code" else getattr(obj, "__code__", None)
        if code is not None and course in str(getattr(code, "co_filename", "")):
            found.append(code.co_name)
    found += [name for name, module in list(sys.modules.items()) if course in str(getattr(module, "__file__", ""))]
    try:
        source = inspect.getsource(softmax)
    except Exception as exc:
        source = type(exc).__name__
    code = softmax.__code__
    seen = repr(code.co_consts) + repr(code.co_names) + code.co_filename + " ".join(softmax.__globals__)
    return [sorted(set(found))[:5], course in seen or course in source, "exp" in code.co_names,
            softmax(x).tolist()]
"""

    def test_a_rerun_holds_no_course_code(self, tmp_path):
        """The student process of a re-run, looking for the course's softmax (every code object it holds,
        its modules, inspect.getsource, __code__ and __globals__ of its helper), finds none: its softmax
        is a stand-in, answered with the reference's numbers by the grader."""
        from grader.sandbox.session import Limits, Session, StandIns
        references = helper_references(COURSE_CODE.path, ["softmax"])
        assert references is not None
        x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
        source = self.PROBE.format(root=str(EXERCISES.resolve())).encode()
        with ReferenceServer(COURSE_CODE.path, ["softmax"], Limits()) as server, \
                Session(source, stand_ins=StandIns(("softmax",), server)) as session:
            run = session.run("probe", [(x,)], 10.0)
        value = run.cases[0].value
        assert run.cases[0].status.name == "RETURNED", run.cases[0]
        assert value[:3] == [[], False, False]
        assert np.allclose(value[3], references["softmax"](x))

    def test_a_stand_in_refuses_arguments_out_of_bounds(self):
        """A call with an array beyond the grader's bounds, or an object, raises in the student process;
        the grader computes nothing for it."""
        from grader.sandbox.session import CALL_DIM, Session, StandIns
        seen = []
        stand_ins = StandIns(("softmax",), lambda name, args, kwargs, deadline: seen.append(name))
        source = f"""
import numpy as np
def probe(x):
    told = []
    for arg in (np.zeros((2, {CALL_DIM + 1})), object()):
        try:
            softmax(arg)
        except RuntimeError as exc:
            told.append(str(exc)[:60])
    return told
""".encode()
        with Session(source, stand_ins=stand_ins) as session:
            run = session.run("probe", [(1.0,)], 10.0)
        told = run.cases[0].value
        assert told[0].startswith("softmax: an array of shape (2, 257)") and told[1].startswith("softmax: a object")
        assert seen == []

    def test_a_call_the_reference_cannot_afford_costs_only_that_call(self):
        """Arguments within the bounds that would take the course's code too far (a routing count over
        65536 heads, queries and keys): the reference's own process hits its memory limit or the
        deadline, and the call is refused; the grader computes nothing of it."""
        import time

        from grader.sandbox.session import CallRefused, Limits
        with ReferenceServer(COURSE_CODE.path, ["count_routing_distributions"], Limits()) as server:
            with pytest.raises(CallRefused, match="the course's count_routing_distributions"):
                server("count_routing_distributions", [65536, 65536, 65536], {}, time.monotonic() + 5)

    def test_a_rerun_that_fails_on_purpose_tells_no_hidden_count(self, course, write_submission):
        """A caller that fails whenever its softmax is not its own (the re-run) is graded again on the public
        cases only: the sentence counts public cases, and no report holds a count over all the cases."""
        source = self.WRONG_AXIS_SOFTMAX + """
        def scaled_dot_product_attention(Q, K, V, mask=None):
            if softmax.__code__.co_filename != __file__:
                raise ValueError("re-run")
            scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores)
            return weights @ V, weights
    """
        result = grade(course, write_submission(with_function(source)),
                       problem_ids=["softmax", "scaled_dot_product_attention"])
        sdpa = result.problems[1]
        public = sum(not c.hidden for c in sdpa.cases)
        assert public < len(sdpa.cases)
        assert sdpa.message.endswith(f"still fails {public} of {public} public cases: check it too.")
        from grader.reports import github, gradescope, junit
        shown = text.render(result) + json_report.render(result) + gradescope.render(result, "after_due_date") \
            + junit.render(result) + github.render(result)
        total = len(sdpa.cases)
        assert f"of {total} cases" not in shown and f"of {total} public" not in shown and "re-run" not in shown
        assert shown.count(f"still fails {public} of {public} public cases") >= 4  # the sentence, in every format

    def test_a_callee_failing_only_to_raise_is_not_blamed(self, course, write_submission):
        """split_heads with `assert` fails only its ValueError cases, which no caller's case
        reaches: multi-head attention keeps its own diagnosis."""
        assert_split = next(b for b in BUGS if b.mistake == "assert-instead-of-raise").source
        sqrt_d_model = next(b for b in BUGS if b.mistake == "mha-scaled-by-d-model").source
        result = grade(course, write_submission(with_function(assert_split + sqrt_d_model)),
                       problem_ids=["split_heads", "multi_head_attention"])
        by_id = {p.id: p for p in result.problems}
        split, mha = by_id["split_heads"], by_id["multi_head_attention"]
        assert split.mistakes == ("assert-instead-of-raise",)
        assert mha.mistakes == ("mha-scaled-by-d-model",) and "calls your" not in mha.message

    def test_a_function_that_does_not_call_the_broken_one_keeps_its_own_diagnosis(self, course,
                                                                                   write_submission):
        """An attention written without the student's softmax is told its own mistake."""
        source = self.WRONG_AXIS_SOFTMAX + """
        def scaled_dot_product_attention(Q, K, V, mask=None):
            scores = Q @ K.T
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            e = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights = e / e.sum(axis=-1, keepdims=True)
            return weights @ V, weights
        """
        result = grade(course, write_submission(with_function(source)),
                       problem_ids=["softmax", "scaled_dot_product_attention"])
        assert result.problems[1].mistakes == ("attention-no-scale",)
        assert "calls your" not in result.problems[1].message


class TestCalls:
    NAMES = ("softmax", "scaled_dot_product_attention", "multi_head_attention", "split_heads")

    def test_calls_through_helpers_and_the_last_definition_wins(self):
        source = textwrap.dedent("""
            def softmax(x):
                return x
            def _attend(q, k, v):
                return softmax(q @ k.T) @ v
            def scaled_dot_product_attention(Q, K, V, mask=None):
                return split_heads(Q, 1)
            def scaled_dot_product_attention(Q, K, V, mask=None):
                return _attend(Q, K, V)
            def multi_head_attention(X, *args):
                f = scaled_dot_product_attention   # a reference by name counts
                return f(X, X, X)
        """)
        found = calls(source, self.NAMES)
        assert found["scaled_dot_product_attention"] == {"softmax"}
        assert found["multi_head_attention"] == {"scaled_dot_product_attention", "softmax"}
        assert found["softmax"] == frozenset()
        assert "split_heads" not in found  # not defined

    def test_recursion_terminates(self):
        source = "def softmax(x):\n    return softmax(x)\ndef split_heads(X, h):\n    return softmax(X)\n"
        assert calls(source, self.NAMES) == {"softmax": frozenset(), "split_heads": {"softmax"}}

    @pytest.mark.parametrize("source", ["def softmax(:\n", "x = " + "(" * 5000 + "1" + ")" * 5000, "a\0b"])
    def test_source_that_does_not_parse_gives_nothing(self, source):
        """A syntax error, nesting too deep for the parser, a null byte: no call graph, no error."""
        assert calls(source, self.NAMES) == {}

    def test_read_source_reads_a_regular_file_only(self, tmp_path):
        """A link is not followed, a FIFO not opened for long, an oversized file not read."""
        real = tmp_path / "real.py"
        real.write_text("def softmax(x):\n    return x\n")
        link = tmp_path / "link.py"
        link.symlink_to(real)
        fifo = tmp_path / "fifo.py"
        os.mkfifo(fifo)
        big = tmp_path / "big.py"
        big.write_bytes(b"#" * ((1 << 20) + 1))
        assert read_source(real) == "def softmax(x):\n    return x\n"
        assert (read_source(link), read_source(fifo), read_source(big), read_source(tmp_path / "none.py")) \
            == (None, None, None, None)


class TestDesignedHeads:
    @pytest.mark.parametrize("W_Q, W_K, kind", [
        (50.0 * np.eye(8), np.eye(8), "weight on the wrong position"),
        (50.0 * np.eye(8), np.eye(8, k=-1), "no position preferred"),
        (np.eye(8), np.eye(8, k=1), "pattern too weak"),
    ], ids=["itself", "next, masked", "too soft"])
    def test_failures_are_told_apart(self, course, W_Q, W_K, kind):
        """All weight on the wrong position is not 'too weak'; uniform rows prefer nothing."""
        problem = course.problem("previous_token_head")
        verdict = check(problem.compare, 8, (W_Q, W_K))
        assert (verdict.passed, verdict.kind) == (False, kind)

    def test_off_by_one_keys_are_recognized(self):
        """np.eye(T, k=-1) as W_K makes each query match the next, hidden key."""
        assert COURSE.head_attends_to_next((8,), (50.0 * np.eye(8), np.eye(8, k=-1)))
        assert not COURSE.head_attends_to_next((8,), (50.0 * np.eye(8), np.eye(8, k=1)))


class TestTexts:
    """Prompts and mistake messages state the conventions students most often get wrong."""

    def test_split_heads_slices_the_projections_not_the_input(self, course):
        prompt = course.problem("split_heads").prompt
        assert "Every head reads the whole input" in prompt and "X W_Q" in prompt

    def test_the_mask_message_notes_pytorchs_convention(self, course):
        message = next(m.message for m in course.problem("scaled_dot_product_attention").mistakes
                       if m.id == "attention-mask-inverted")
        assert "nn.MultiheadAttention uses the opposite convention, True = blocked" in " ".join(message.split())

    def test_w_o_lets_every_head_write_anywhere(self, course):
        message = next(m.message for m in course.problem("multi_head_attention").mistakes
                       if m.id == "mha-no-output-projection")
        assert "sum over heads of z^(i) W_O^(i)" in message and "any output direction" in message

    def test_the_sink_head_is_not_called_a_do_nothing_head(self, course):
        prompt = course.problem("sink_head").prompt
        assert "nothing to do here" not in prompt
        assert "copies position 0's vector e_0" in " ".join(prompt.split())

    def test_quiz_texts(self, course):
        items = {i.id: i for i in course.with_optional().quiz.items}
        scale = next(c for c in items["widen_values"].choices if c.mistake == "scale_by_d_v")
        assert "flatter" in scale.text and "sharper" not in scale.text  # dividing by more flattens
        assert set(items["head_count"].params["d_head"]["choice"]) <= set(range(64, 129))  # the lesson's 64-128

    def test_no_problem_file_says_too_weak_for_a_wrong_position(self):
        assert "pattern too weak" not in (EXERCISES / "problems" / "previous_token_head.yaml").read_text()
