"""Student code runs in its own process: loops, exits and crashes cost only their own problem."""
from __future__ import annotations

import os
import textwrap
import time

import pytest

from grader.grading.grade import grade
from grader.grading.results import CaseStatus
from grader.sandbox.session import Limits, RunStatus, Session
from grader.sandbox.spawn import NAMESPACES_ENV

from .conftest import REQUIRE_ISOLATION, isolation_missing, solution_source


def by_id(result):
    return {p.id: p for p in result.problems}


def test_infinite_loop_costs_one_problem(course, write_submission):
    """A loop in one function times out that problem; the other problems are still graded."""
    source = solution_source().replace(
        "def attention_reading(weights, values):",
        "def attention_reading(weights, values):\n    while True:\n        pass\n\n\ndef _unused(weights, values):")
    path = write_submission(source)
    start = time.monotonic()
    result = grade(course, path, limits=Limits(problem_seconds=1.0))
    problems = by_id(result)
    assert time.monotonic() - start < 10
    assert problems["attention_reading"].score == 0
    assert problems["attention_reading"].cases[0].status is CaseStatus.TIMEOUT
    assert "timed out" in problems["attention_reading"].message
    others = [p for p in result.problems if p.id != "attention_reading" and course.problem(p.id)]
    assert others and all(p.score == p.max_score for p in others)


def test_exception_is_a_failed_case_with_line(course, write_submission):
    """An exception in student code is reported with its type, message and line."""
    path = write_submission("""
        def count_routing_distributions(num_heads, d_v, *layer):
            return 1 / 0
    """)
    result = grade(course, path, problem_ids=["count_routing_distributions"])
    case = result.problems[0].cases[0]
    assert case.status is CaseStatus.ERROR
    assert case.summary == "raised ZeroDivisionError at line 3: division by zero"
    assert result.problems[0].score == 0


def test_syntax_error_reports_the_line(course, write_submission):
    """A syntax error scores 0 everywhere and names the line."""
    path = write_submission("import numpy as np\n\ndef softmax(x)\n    return x\n")
    result = grade(course, path)
    assert result.score == 0
    assert result.messages == ("attention.py has a syntax error (line 3): expected ':'",)


def test_missing_function_is_named(course, write_submission):
    """A submission without the function says which function is missing."""
    path = write_submission("x = 1\n")
    result = grade(course, path, problem_ids=["predict_shapes"])
    assert result.problems[0].message == "attention.py defines no function predict_shapes"
    assert result.problems[0].score == 0


def test_wrong_types_shapes_and_nan_are_failed_cases(course, write_submission):
    """Wrong type, wrong shape and NaN each fail their case with a specific message."""
    path = write_submission("""
        import numpy as np
        def attention_reading(weights, values):
            w = np.asarray(weights)
            if w.ndim == 2:
                return "a string"
            if len(values[0]) == 2:
                return np.full(2, np.nan)
            return np.zeros(3)
    """)
    problem = grade(course, path, problem_ids=["attention_reading"]).problems[0]
    summaries = {c.name: (c.summary, c.detail) for c in problem.cases}
    assert summaries["one query over three positions"] == ("wrong shape", "expected shape (5,), got shape (3,)")
    assert summaries["two queries over five positions"][0] == "wrong type"
    assert summaries["one-hot weights copy a value"][0] == "not finite"
    assert problem.score == 0


def test_hidden_case_never_shows_expected_values(course, write_submission):
    """A hidden failure has a kind but no detail and no inputs."""
    path = write_submission("""
        def count_routing_distributions(num_heads, d_v, num_queries=1, *layer):
            return num_heads * d_v * num_queries
    """)
    problem = grade(course, path, problem_ids=["count_routing_distributions"]).problems[0]
    hidden = [c for c in problem.cases if c.hidden]
    assert hidden and all(c.summary == "wrong value" and c.detail == "" and c.inputs == "" for c in hidden)


def test_partial_credit_is_weighted_fraction(course, write_submission):
    """Passing some cases earns points times the weighted fraction passed."""
    path = write_submission("""
        def count_routing_distributions(num_heads, d_v, num_queries=1, *layer):
            return num_heads * num_queries  # right for one layer and one sequence only
    """)
    problem = grade(course, path, problem_ids=["count_routing_distributions"]).problems[0]
    passed = sum(c.weight for c in problem.cases if c.passed)
    total = sum(c.weight for c in problem.cases)
    assert 0 < passed < total
    assert problem.score == round(problem.max_score * passed / total, 4)


def test_lone_surrogates_in_student_text_do_not_break_reports(course, write_submission):
    """An exception message with a lone surrogate is escaped, and every report format still renders."""
    from grader.reports import FORMATS, render
    path = write_submission('def softmax(scores):\n    raise ValueError("bad \\ud800 char")\n')
    result = grade(course, path, problem_ids=["softmax"])
    case = result.problems[0].cases[0]
    assert case.summary == "raised ValueError at line 2: bad \\ud800 char"
    for fmt in FORMATS:
        render(fmt.name, result).encode("utf-8")


def test_reports_do_not_show_the_sandbox_folder(course, write_submission):
    """Paths inside the session's temporary folder are reported relative to it: stable across runs."""
    path = write_submission('import sys\ndef softmax(scores):\n    print(__file__, file=sys.stderr)\n'
                            '    raise ValueError(__file__)\n')
    problem = grade(course, path, problem_ids=["softmax"], include_hidden=False).problems[0]  # output shown
    assert problem.cases[0].summary == "raised ValueError at line 4: attention.py"
    assert problem.stdout.splitlines()[0] == "attention.py"
    assert "mha-run-" not in problem.stdout + "".join(c.summary for c in problem.cases)


class TestNextProblemSentAhead:
    """The next problem's request is sent while this one is judged (Session.run's `then`); the
    answers, the output and the time limits stay each problem's own."""

    PRINTING = """

        _softmax, _count = softmax, count_routing_distributions

        def softmax(scores):
            print("from softmax")
            return _softmax(scores)

        def count_routing_distributions(*args):
            print("from count")
            return _count(*args)
    """

    def test_each_problem_keeps_its_own_output(self, course, write_submission):
        """softmax prints once per case, attention_reading prints nothing, count prints: each
        problem's output is exactly its own, the same on every run."""
        path = write_submission(solution_source() + textwrap.dedent(self.PRINTING))
        ids = ["softmax", "attention_reading", "count_routing_distributions"]
        outputs = []
        for _ in range(3):
            # public cases only: what a problem with hidden cases printed is not shown
            problems = by_id(grade(course, path, problem_ids=ids, include_hidden=False))
            assert all(p.score == p.max_score for p in problems.values())
            outputs.append({i: problems[i].stdout for i in ids})
        softmax_cases = len(course.problem("softmax").visible_cases(False))
        count_cases = len(course.problem("count_routing_distributions").visible_cases(False))
        assert outputs[0] == {"softmax": "from softmax\n" * softmax_cases, "attention_reading": "",
                              "count_routing_distributions": "from count\n" * count_cases}
        assert outputs[1] == outputs[0] and outputs[2] == outputs[0]

    def test_the_next_request_goes_out_before_this_answer_is_read(self, course, write_submission,
                                                                  monkeypatch):
        """Requests for problem k+1 are sent before problem k's "done" is read, and none is sent twice;
        in two turns, every problem's public cases (1-3) before any hidden one (4-6), and no request
        of the second turn goes out before the first turn is over."""
        from grader.sandbox import session as sandbox
        log = []
        real_request, real_event = sandbox.Session._request, sandbox.Worker.next_event

        def request(self, worker, function, args):
            seq = real_request(self, worker, function, args)
            log.append(("sent", seq))
            return seq

        def next_event(self, deadline):
            event = real_event(self, deadline)
            if event and event.get("event") == "done":
                log.append(("done", event["seq"]))
            return event
        monkeypatch.setattr(sandbox.Session, "_request", request)
        monkeypatch.setattr(sandbox.Worker, "next_event", next_event)
        result = grade(course, write_submission(solution_source()),
                       problem_ids=["softmax", "attention_reading", "split_heads"])
        assert all(p.score == p.max_score for p in result.problems)
        assert all(p.visible_cases(True) != p.visible_cases(False) for p in course.problems
                   if p.id in ("softmax", "attention_reading", "split_heads"))  # each has hidden cases
        assert log == [("sent", 1), ("sent", 2), ("done", 1), ("sent", 3), ("done", 2), ("done", 3),
                       ("sent", 4), ("sent", 5), ("done", 4), ("sent", 6), ("done", 5), ("done", 6)]

    def test_leftover_child_means_a_fresh_process_for_the_next_problem(self, course, write_submission):
        """softmax leaves a child running: the worker (which already had attention_reading's request)
        is retired, softmax loses its points, and attention_reading is answered in full by a fresh process."""
        source = solution_source() + textwrap.dedent("""

            import os
            import time
            _softmax = softmax

            def softmax(scores):
                if "_child" not in globals():
                    pid = os.fork()
                    if pid == 0:
                        time.sleep(30)
                        os._exit(0)
                    globals()["_child"] = pid
                return _softmax(scores)
        """)
        result = by_id(grade(course, write_submission(source), problem_ids=["softmax", "attention_reading"]))
        assert result["softmax"].score == 0 and "left processes running" in result["softmax"].message
        assert result["attention_reading"].score == result["attention_reading"].max_score

    def test_time_limit_of_the_next_problem_counts_from_the_end_of_this_one(self, course, write_submission):
        """With 2 s per problem, softmax takes 1.6 s and attention_reading 0.8 s: attention_reading
        passes (its own 0.8 s), though 2.4 s passed since its request was sent."""
        source = solution_source() + textwrap.dedent("""

            import time
            _softmax, _reading = softmax, attention_reading
            _calls = []

            def softmax(scores):
                if not _calls:
                    _calls.append(1)
                    time.sleep(1.6)
                return _softmax(scores)

            def attention_reading(weights, values):
                if len(_calls) == 1:
                    _calls.append(2)
                    time.sleep(0.8)
                return _reading(weights, values)
        """)
        result = by_id(grade(course, write_submission(source), problem_ids=["softmax", "attention_reading"],
                             limits=Limits(problem_seconds=2.0)))
        assert result["softmax"].score == result["softmax"].max_score
        assert result["attention_reading"].score == result["attention_reading"].max_score


STALL = """
import fcntl
import time

fcntl.fcntl(0, 1031, 4096)  # F_SETPIPE_SZ: stdin holds one page


def sleepy(values):
    time.sleep(600)


def total(values):
    return float(values.sum())
"""


@pytest.mark.parametrize("separate_user", [pytest.param(None, id="default", marks=pytest.mark.root),
                                           pytest.param(False, id="same-user")])
def test_a_full_stdin_pipe_costs_only_its_problem(write_submission, separate_user):
    """Student code shrinks its stdin pipe to one page and sleeps: the next problem's request (sent
    ahead, 64 kB) cannot be written. The grader never waits on that write: the problem times out
    at its limit, and a fresh process answers the next one (grading never stalls).
    Without root too (the grader as its own user, separate_user=False)."""
    if separate_user is None and os.geteuid() != 0:
        isolation_missing("the default mode is the same-user one here (not root)")
    path = write_submission(STALL)
    import numpy as np
    values = [[np.arange(6000.0)]]  # 64 kB of JSON
    with Session(path, Limits(problem_seconds=1.0, submission_seconds=60), separate_user=separate_user) as session:
        start = time.monotonic()
        first = session.run("sleepy", values, 1.0, then=("total", values))
        assert time.monotonic() - start < 20
        second = session.run("total", values, 10.0)
    assert first.cases[0].status is RunStatus.TIMEOUT
    assert second.cases[0].status is RunStatus.RETURNED and second.cases[0].value == float(sum(range(6000)))


def test_a_slow_start_on_a_busy_machine_is_never_the_students_timeout(write_submission, monkeypatch):
    """Starting a student process is the grader's own work: on a machine so busy that the fork
    server answers after the import time limit (and after the submission's whole budget), the
    submission still imports and is graded; that time is not the student's."""
    import numpy as np

    from grader.sandbox import session as session_module
    real = session_module.start_student

    def slow_start(*args, **kwargs):
        time.sleep(3.5)  # longer than both limits below
        return real(*args, **kwargs)

    monkeypatch.setattr(session_module, "start_student", slow_start)
    path = write_submission("def total(values):\n    return float(sum(values))\n")
    with Session(path, Limits(problem_seconds=5.0, submission_seconds=3.0, load_seconds=2.0)) as session:
        run = session.run("total", [[np.array([1.0, 2.0, 3.0])]], 5.0)
    assert session.load_failure is None
    assert run.cases[0].status is RunStatus.RETURNED and run.cases[0].value == 6.0


def test_grading_untrusted_code_without_root_warns(cli, monkeypatch, tmp_path):
    """`mha grade` as another user than root says on stderr that student code could change its
    score; the report is still written (docs/security.md, "Without root")."""
    from grader.sandbox import isolation
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    (tmp_path / "attention.py").write_text(solution_source())
    result = cli("grade", str(tmp_path), "--problem", "softmax", "--format", "json")
    assert result.exit_code == 0
    assert "warning: not running as root" in result.stderr and "change its own score" in result.stderr
    assert '"score": ' in result.stdout


def test_doctor_says_which_mode_runs(cli):
    """`mha doctor` runs a one-line submission and names its mode, as a session does."""
    from grader.sandbox.doctor import sandbox_mode
    result = cli("doctor")
    mode, text = sandbox_mode()
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == f"sandbox: {mode}: {text}"
    off = os.environ.get(NAMESPACES_ENV, "").strip().lower() in ("off", "0", "no", "false")
    expected = (("same user",) if os.geteuid() != 0 else ("uid",) if off
                else ("namespaces",) if REQUIRE_ISOLATION else ("namespaces", "uid"))
    assert mode in expected


def test_a_session_started_early_has_its_whole_budget_once_used(write_submission):
    """A session started before the cases are read (grade.early_session) waits for the grader,
    maybe longer than the submission's whole budget (here a sleep); `begin` starts the budget
    when it is used, so that wait is never the student's timeout."""
    import numpy as np
    path = write_submission("def total(values):\n    return float(sum(values))\n")
    with Session(path, Limits(problem_seconds=5.0, submission_seconds=2.0, load_seconds=2.0)) as session:
        time.sleep(2.5)  # the grader reading the cases, slowly
        session.begin()
        run = session.run("total", [[np.array([1.0, 2.0, 3.0])]], 5.0)
    assert session.load_failure is None
    assert run.cases[0].status is RunStatus.RETURNED and run.cases[0].value == 6.0


@pytest.mark.root
def test_a_stopped_session_kills_its_process_at_once_and_closes_as_ever(write_submission):
    """Session.stop (every answer is in) kills the student process without waiting for it (a
    process it left running retires it in `run` already): the answer already read stands, it is
    gone before close, and close then finds nothing of the session alive."""
    import numpy as np

    from grader.sandbox import proctable
    path = write_submission(
        "def total(values):\n"
        "    return float(sum(values))\n")
    with Session(path, Limits(problem_seconds=5.0, submission_seconds=30.0)) as session:
        run = session.run("total", [[np.array([1.0, 2.0])]], 5.0)
        uid, pid = session.isolation.uid, session._worker.proc.pid

        def session_processes() -> set[int]:
            return {p for p, proc in proctable.processes().items() if uid in proc.uids and proc.alive}
        before = session_processes()
        session.stop()
        deadline = time.monotonic() + 10
        while session_processes() and time.monotonic() < deadline:
            time.sleep(0.01)
        after = session_processes()
    assert run.cases[0].status is RunStatus.RETURNED and run.cases[0].value == 3.0
    assert pid in before
    assert after == set() and session_processes() == set()


STANDARD_IMPORTS = """
def used():
    import bisect, cmath, decimal, fractions, heapq, random, statistics, textwrap
    import numpy as np
    import numpy.fft
    draws = [np.random.default_rng().random() for _ in range(2)] + [float(np.random.rand())]
    return [bisect.bisect([1, 2, 3], 2), cmath.sqrt(-1).imag, float(decimal.Decimal("0.5")),
            float(fractions.Fraction(1, 4)), heapq.nsmallest(1, [3, 1, 2])[0], random.random() < 1,
            statistics.mean([1, 2, 3]), len(textwrap.wrap("a b", 1)), float(numpy.fft.fft([1.0, 0.0])[0].real),
            len(set(draws)) == 3]
"""


@pytest.mark.root
@pytest.mark.parametrize("namespaces", ["on", "off"])
def test_student_code_imports_the_standard_modules_in_every_mode(write_submission, monkeypatch, namespaces):
    """As root, in namespaces or not, student code imports the standard modules (those with C
    parts too: cmath, decimal, statistics...), numpy.fft and numpy.random, whether the zygote
    had loaded them yet or not: loaded ahead, reached through its file system, or through the
    import folders' descriptors."""
    if os.geteuid() != 0:
        isolation_missing("a separate student uid needs root")
    if namespaces == "off":
        monkeypatch.setenv(NAMESPACES_ENV, "off")
    from grader.sandbox.spawn import stop_fork_server
    stop_fork_server()  # a fresh zygote, asked at once: it has not loaded them yet
    path = write_submission(STANDARD_IMPORTS)
    with Session(path, Limits(problem_seconds=30.0, submission_seconds=60)) as session:
        run = session.run("used", [[]], 30.0)
        mode = session.isolation.mode
    if namespaces == "on" and mode != "namespaces":
        isolation_missing(f"namespaces do not work here ({session.isolation.why})")
    assert run.cases[0].status is RunStatus.RETURNED, run.cases[0]
    assert run.cases[0].value == [2, 1.0, 0.5, 0.25, 1, True, 2, 2, 1.0, True]
    assert mode == ("namespaces" if namespaces == "on" else "uid")
