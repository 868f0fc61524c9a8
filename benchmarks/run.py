"""How fast the grader is, as ratios measured in one run.

    python benchmarks/run.py                  # N = 200; 7 cold runs, 5 batches, 3 otter runs
    python benchmarks/run.py --n 400 --repeat 9
    python benchmarks/run.py --course COURSE --solutions DIR   # another course (two versions on one)

Prints, all measured in the same run, each figure the median of several repetitions (the
compared commands interleaved, so a noisy machine slows both alike):

(a) cold `mha grade` of one submission, `python -c "import numpy"`, and their ratio (with the
    seed cache filled, and, once per round, with an empty seed cache);
(b) `mha check` latency;
(c) `mha grade-all` throughput on N generated submissions (by default issue 35's class: model answers, one bug, stubs), in
    submissions per second, beside a naive loop of one `mha grade` per submission, sequential
    (timed on an evenly spread sample of the same class, every (N / sample)-th submission, in
    slices run between the batches), and beside the same N students each handing in the
    untouched stub (the same seeds and answers.yaml, no work in their functions): what a
    submission costs whatever it holds, the ceiling of any change to the grading work alone;
(d) `otter run` on the same submission through `mha export otter` and `otter assign`, when
    otter-grader is installed and `mha export otter` exists (skipped with a message otherwise);
(f) the floor: the same class graded with no isolation at all, a measurement only (never a mode of
    `mha`): each student's attention.py executed in this process and its functions called on the
    same prepared cases of that student's seed, judged by the same code; every batch figure is
    also given as a ratio to it, and the batch's CPU is split per submission into the grader, the
    student processes and the kernel;
(e) peak memory of the batch, in two more (untimed) runs, on N and on N / 4 submissions: the
    whole process tree (the grader, its zygote and every student process), sampled every 20 ms
    from /proc/PID/smaps_rollup (PSS: shared pages counted once, split among the processes
    sharing them; RSS: counted in every process), and the largest single process's max RSS
    (getrusage, through wait4).

Commands run as installed: the `mha` and `otter` scripts beside this Python, else `python -m`.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
SOLUTION = ROOT / "solutions" / "attention.py"
ANSWERS = ROOT / "solutions" / "answers.yaml"
SLOW = ROOT / "tests" / "submissions" / "correct_loops.py"  # correct, in pure-Python loops (some functions)
BIN = Path(sys.executable).parent

# Each bug: (text in the model answer, its replacement). Every one costs points in the core course.
BUGS = (
    ("e = np.exp(x - x.max(axis=-1, keepdims=True))", "e = np.exp(x)"),                 # overflows
    ("scores = q @ k.transpose(0, 2, 1) / math.sqrt(d_k)", "scores = q @ k.transpose(0, 2, 1) / d_k"),  # scale
    ("    return num_layers * batch * num_heads * num_queries",
     "    return num_layers * batch * num_heads * d_v * num_queries"),                   # counts d_v
    ("concat = (weights @ v).transpose(1, 0, 2).reshape(n, d_model)",
     "concat = (weights @ v).reshape(n, d_model)"),                                      # heads interleaved
    ("    n, d_model = X.shape\n", "    raise NotImplementedError('split_heads')\n"),
)


def command(name: str, module: str) -> list[str]:
    """The installed console script beside this Python (no shell shims), else `python -m module`."""
    script = BIN / name
    return [str(script)] if script.is_file() else [sys.executable, "-m", module]


MHA = command("mha", "grader")
OTTER = command("otter", "otter")


def run(args: list[str], *, cwd: Path = ROOT, env: dict | None = None, ok: tuple[int, ...] = (0,)) -> float:
    """Wall-clock seconds of one command; fails loudly if it exits with a code not in `ok`."""
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} exited with {proc.returncode}:\n{proc.stderr.decode()[-2000:]}")
    return seconds


def median_of(repeat: int, *jobs) -> list[float]:
    """Each job's median time over `repeat` rounds, the jobs interleaved within a round."""
    times: list[list[float]] = [[] for _ in jobs]
    for _ in range(repeat):
        for i, job in enumerate(jobs):
            times[i].append(job())
    return [statistics.median(t) for t in times]


# ---------------------------------------------------------------- a generated class

@dataclass(frozen=True)
class Student:
    name: str
    kind: str               # correct | buggy | empty | slow
    source: str | None      # attention.py's text (None: not submitted)


# --mix varied: one block of 40 students, repeated: 28 correct, 8 buggy, 3 empty, 1 slow.
PATTERN = "ccbcceccbcccbcscccbceccbcccbcccbcecccbcc"
# the default class (--mix class), one block of 20 repeated: 16 model answers, 3 with one bug, 1 untouched stub
ISSUE_PATTERN = "ccccbccccuccccbccccb"


def make_class(n: int) -> list[Student]:
    """N students in the proportions of PATTERN; an empty one has no attention.py or an empty one."""
    model = SOLUTION.read_text()
    stub = (EXERCISES / "attention.py").read_text()
    slow = model + "\n\n" + SLOW.read_text()  # its loop versions replace the model's where it has them
    for old, _ in BUGS:
        assert old in model, f"benchmark out of date: {old!r} is not in {SOLUTION}"
    students = []
    pattern = PATTERN if MIX == "varied" else ISSUE_PATTERN
    buggy = 0  # the buggy students so far: each bug in turn
    for i in range(n):
        kind = {"c": "correct", "b": "buggy", "e": "empty", "s": "slow", "u": "stub"}[pattern[i % len(pattern)]]
        source = {"correct": model, "slow": slow, "empty": None if i % 2 else "", "stub": stub,
                  "buggy": model.replace(*BUGS[buggy % len(BUGS)])}[kind]
        buggy += kind == "buggy"
        if source:
            source += f"\n# student {i:04d}\n"  # every file differs, as real ones do
        students.append(Student(f"s{i:04d}", kind, source))
    return students


def as_stubs(students: list[Student]) -> list[Student]:
    """The same students (names, so seeds and answers.yaml), each handing in the untouched stub."""
    stub = (EXERCISES / "attention.py").read_text()
    return [Student(s.name, "stub", stub + f"\n# student {s.name}\n") for s in students]


def write_class(students: list[Student], folder: Path) -> None:
    """Each student's folder; with a course secret, answers.yaml holds the right answers for their seed."""
    quiz = None
    if SECRET:
        from grader.course.loader import load_course
        quiz = load_course(EXERCISES).quiz
    for student in students:
        home = folder / student.name
        home.mkdir(parents=True)
        if student.source is not None:
            (home / "attention.py").write_text(student.source)
        if quiz is not None:
            from grader.course.quiz import answer_key, answers_template
            from grader.course.seeds import student_seed
            key = answer_key(quiz, student_seed(SECRET, student.name))
            (home / "answers.yaml").write_text(answers_template(quiz, key))
        else:
            shutil.copyfile(ANSWERS, home / "answers.yaml")


# ---------------------------------------------------------------- memory of a process tree

def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    todo.extend(int(c) for c in handle.read().split())
        except OSError:
            continue
    return found


def _rollup(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of one process, in KiB; (0, 0) if it is gone."""
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pss, rss


class TreeMemory:
    """Samples the summed PSS and RSS of a process and all its descendants until stopped."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.pid, self.interval = pid, interval
        self.peak_pss = self.peak_rss = self.most_processes = self.samples = 0
        self.own_cpu = 0.0  # user + system seconds of the grader's processes (not the zygotes, not students)
        self._grader_cpu: dict[int, float] = {}
        self._cmdline = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            pids = _descendants(self.pid)
            sizes = [_rollup(p) for p in pids]
            self.peak_pss = max(self.peak_pss, sum(s[0] for s in sizes))
            self.peak_rss = max(self.peak_rss, sum(s[1] for s in sizes))
            self.most_processes = max(self.most_processes, len(pids))
            # the grader's CPU: its own process and the grader processes it forks (the same command line),
            # each at the last value seen (a forked one is gone by the end)
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        line = handle.read()
                    if pid != self.pid and line != self._cmdline:
                        continue
                    with open(f"/proc/{pid}/stat") as handle:
                        fields = handle.read().rsplit(")", 1)[1].split()
                    self._grader_cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                    if pid == self.pid:
                        self._cmdline = line
                except (OSError, ValueError, IndexError):
                    pass
            self.own_cpu = sum(self._grader_cpu.values())
            self.samples += 1
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Batch:
    seconds: float
    peak_pss_mb: float
    peak_rss_mb: float
    max_rss_one_mb: float   # the largest single process (getrusage via wait4)
    most_processes: int
    samples: int
    cpu: tuple[float, float] = (0.0, 0.0)  # user and system seconds of the whole tree (wait4's rusage)
    own_cpu: float = 0.0   # the grader's processes: the command and its forked grader processes (sampled runs only)


def grade_all_command(folder: Path, out: Path, jobs: int) -> list[str]:
    """`mha grade-all`, or (before it existed) the same through grader.classroom.batch.grade_all."""
    probe = subprocess.run([*MHA, "grade-all", "--help"], capture_output=True)
    if probe.returncode == 0:
        return [*MHA, "--course", str(EXERCISES), "grade-all", str(folder), "--out", str(out),
                "--jobs", str(jobs), "--force", "--no-progress"]
    code = ("import sys; from pathlib import Path; from grader import batch; "
            "from grader.course.loader import load_course;"
            "a = load_course(Path(sys.argv[1])); subs = batch.discover(Path(sys.argv[2]));"
            "list(batch.grade_all(a, subs, Path(sys.argv[3]), seed_of=lambda s: 0, jobs=int(sys.argv[4]), force=True))")
    return [sys.executable, "-c", code, str(EXERCISES), str(folder), str(out), str(jobs)]


SECRET: str | None = None  # the course secret of the run (--secret): per-student seeds
MIX = "class"  # the class's make-up (--mix)


def grade_all(folder: Path, out: Path, jobs: int, *, sample: bool = False, cache: Path | None = None) -> Batch:
    """One `mha grade-all` run; with `sample`, the memory of its process tree is sampled (which
    costs CPU: the timed runs are not sampled); `cache`: an MHA_CACHE_DIR of its own (an empty one:
    every seed's cases prepared)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "MHA_COURSE_SECRET"}
    if cache is not None:
        env["MHA_CACHE_DIR"] = str(cache)
    if SECRET:
        env["MHA_COURSE_SECRET"] = SECRET
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(grade_all_command(folder, out, jobs), cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=errors)
        memory = TreeMemory(proc.pid) if sample else None
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if memory is not None:
            memory.stop()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"grade-all failed ({os.waitstatus_to_exitcode(status)}):\n{stderr[-2000:]}")
    cpu = (usage.ru_utime, usage.ru_stime)
    if memory is None:
        return Batch(seconds, 0, 0, usage.ru_maxrss / 1024, 0, 0, cpu)
    return Batch(seconds, memory.peak_pss / 1024, memory.peak_rss / 1024, usage.ru_maxrss / 1024,
                 memory.most_processes, memory.samples, cpu, memory.own_cpu)


def check_results(students: list[Student], out: Path) -> dict[str, int]:
    """Statuses of the graded class, and a check that every kind scored as it should."""
    total = {}
    for student in students:
        record = json.loads((out / "results" / f"{student.name}.json").read_text())
        problems = [p for p in record["result"]["problems"] if not p.get("manual")]  # written: graded by hand
        score = sum(p["score"] for p in problems)
        full = sum(p["max_score"] for p in problems)
        expected_full = student.kind in ("correct", "slow")
        if expected_full != (score == full):
            raise SystemExit(f"{student.name} ({student.kind}) scored {score} of {full}: the batch graded it wrongly")
        total[record["status"]] = total.get(record["status"], 0) + 1
    return total


def naive_loop(students: list[Student], folder: Path, scratch: Path) -> float:
    """Seconds for `mha grade` on each student, one after another (a placeholder for no file)."""
    start = time.perf_counter()
    for student in students:
        path = folder / student.name / "attention.py"
        if not path.is_file():
            path = scratch / f"{student.name}.py"
            path.write_text("# no attention.py was submitted\n")
        run([*MHA, "--course", str(EXERCISES), "grade", str(path), "--format", "json",
             "--output", str(scratch / f"{student.name}.json")])
    return time.perf_counter() - start


# ---------------------------------------------------------------- the floor (a measurement only)

class InProcess:
    """Stands in for the sandbox's session in the floor only: the submission executed in this
    process, each function called on each case's arguments (a copy), no limits, no isolation."""

    def __init__(self, data: bytes, limits=None, *, private=(), **_ignored) -> None:  # stand_ins: the helpers run as written
        from grader.sandbox.runs import LoadFailure
        self.load_failure, self.left_behind, self.earlier_left_behind = None, False, False
        self.namespace: dict = {"__name__": "attention"}
        try:
            exec(compile(data, "attention.py", "exec"), self.namespace)  # the benchmark's own class, never a student's
        except Exception as exc:
            self.load_failure = LoadFailure("import", f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def stop(self) -> None:  # every answer is in: no student process to end
        return None

    def run(self, function: str, args, seconds: float, then=None):
        import copy

        from grader.sandbox.runs import CaseRun, RunStatus, StudentError
        from grader.sandbox.session import ProblemRun
        called = self.namespace.get(function)
        if not callable(called):
            return ProblemRun(tuple(CaseRun(RunStatus.NO_FUNCTION) for _ in args), rest=CaseRun(RunStatus.NO_FUNCTION))
        runs = []
        for case in args:
            try:
                value = called(*copy.deepcopy(list(case)))
            except Exception as exc:
                error = StudentError(type(exc).__name__, tuple(c.__name__ for c in type(exc).__mro__), str(exc))
                runs.append(CaseRun(RunStatus.RAISED, error=error))
            else:
                runs.append(CaseRun(RunStatus.RETURNED, value=value))
        return ProblemRun(tuple(runs))


def floor(students: list[Student], folder: Path) -> tuple[float, dict[str, float]]:
    """Seconds to grade the class with no isolation (each student's seed cases prepared first, as
    the batch finds them in its cache), and each student's score."""
    from grader.course.seeds import student_seed
    from grader.grading import grade as grading
    from grader.grading.grade import grade_seed_cases
    from grader.grading.seed_cache import cached_seed_cases
    from grader.grading.validation import valid_then
    seeds = {s.name: student_seed(SECRET or None, s.name) for s in students}
    cases = {seed: cached_seed_cases(EXERCISES, seed, valid_then=valid_then) for seed in set(seeds.values())}
    from grader.classroom.batch import discover, read_files
    found = {s.student: s for s in discover(folder)}
    real, grading.WatchedSession = grading.WatchedSession, InProcess  # type: ignore[misc,assignment]
    scores = {}
    import warnings
    try:
        warnings.simplefilter("ignore", RuntimeWarning)  # a buggy softmax overflows, in this process
        start = time.perf_counter()
        for student in students:  # the files read as the batch reads them
            files = read_files(found[student.name])
            scores[student.name] = grade_seed_cases(cases[seeds[student.name]], files, include_hidden=True).score
        seconds = time.perf_counter() - start
    finally:
        grading.WatchedSession = real  # type: ignore[misc]
    return seconds, scores


def batch_scores(students: list[Student], out: Path) -> dict[str, float]:
    return {s.name: json.loads((out / "results" / f"{s.name}.json").read_text())["result"]["score"]
            for s in students}


# ---------------------------------------------------------------- otter

def otter_setup(scratch: Path) -> tuple[Path, str] | str:
    """The otter autograder zip for this assignment, or why (d) is skipped."""
    import importlib.util
    if importlib.util.find_spec("otter") is None:
        return "otter-grader is not installed (pip install 'otter-grader[grading]')"
    if subprocess.run([*MHA, "export", "otter", "--help"], capture_output=True).returncode != 0:
        return "`mha export otter` does not exist yet"
    exported = scratch / "otter"
    env = {**os.environ, "MHA_COURSE": str(EXERCISES)}
    run([*MHA, "--course", str(EXERCISES), "export", "otter", "--out", str(exported)])
    notebooks = sorted(exported.glob("*.ipynb"))
    run([*OTTER, "assign", str(notebooks[0]), str(exported / "dist")], cwd=exported, env=env)
    zips = sorted(glob.glob(str(exported / "dist" / "autograder" / "*.zip")))
    if not zips:
        return "`otter assign` made no autograder zip"
    return Path(zips[-1]), str(exported)


def otter_run(autograder: Path, submission: Path, scratch: Path) -> float:
    out = Path(tempfile.mkdtemp(prefix="otter-out-", dir=scratch))
    env = {**os.environ, "MHA_COURSE": str(EXERCISES)}
    seconds = run([*OTTER, "run", "-a", str(autograder), "-o", str(out), str(submission)], cwd=scratch, env=env)
    results = json.loads((out / "results.json").read_text())
    if not results.get("tests"):
        raise SystemExit(f"otter run wrote no test results: {str(results)[:300]}")
    return seconds


# ---------------------------------------------------------------- the report

def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="submissions in the generated class [200]")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions of the cold runs [7]")
    parser.add_argument("--batch-repeat", type=int, default=5, help="repetitions of grade-all [5]")
    parser.add_argument("--jobs", type=int, default=2, help="grade-all --jobs [2]")
    parser.add_argument("--naive-sample", type=int, default=20, help="submissions timed in the naive loop [20]")
    parser.add_argument("--otter-repeat", type=int, default=3, help="repetitions of otter run [3]")
    parser.add_argument("--no-otter", action="store_true", help="skip (d)")
    parser.add_argument("--course", type=Path, default=EXERCISES,
                        help="the course graded [exercises/]: two versions of the grader compare best on one course")
    parser.add_argument("--secret", default="benchmark-course-secret",
                        help="course secret, so every student has their own numbers [a fixed one]; '' for one seed")
    parser.add_argument("--solutions", type=Path, default=SOLUTION.parent,
                        help="its model attention.py and answers.yaml [solutions/]")
    parser.add_argument("--mix", choices=("class", "varied"), default="class",
                        help="the class: 80%% model answers, 15%% with one bug, 5%% untouched stubs [class, the "
                             "default], or 70%% correct, 20%% buggy, 7.5%% empty, 2.5%% slow (pure-Python loops) [varied]")
    parser.add_argument("--only", default="abcdef",
                        help="the sections to run, e.g. --only cf for grade-all and the floor while iterating [abcdef]")
    args = parser.parse_args(argv)
    global SECRET, MIX
    SECRET, MIX = args.secret or None, args.mix
    use_course(args.course, args.solutions)

    # `pip install` byte-compiles a package; an editable install run with PYTHONDONTWRITEBYTECODE
    # set (as in some containers) would turn the grader's sources into bytecode on every command instead
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "grader")], check=True)
    scratch = Path(tempfile.mkdtemp(prefix="mha-bench-"))
    try:
        report(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def use_course(exercises: Path, solutions: Path) -> None:
    """Grade the course at `exercises` with the model answers in `solutions`."""
    global EXERCISES, SOLUTION, ANSWERS
    EXERCISES, SOLUTION, ANSWERS = exercises.resolve(), solutions.resolve() / "attention.py", solutions.resolve() / "answers.yaml"


def report(args, scratch: Path) -> None:
    import numpy
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {cpus} CPUs, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; Python "
          f"{platform.python_version()}, numpy {numpy.__version__}; grader runs as "
          f"{'root (separate student uids)' if os.geteuid() == 0 else 'a normal user'}")
    print(f"commands: {' '.join(MHA)} ; {sys.executable} (grader byte-compiled first, as pip install does)")
    print(f"course: {EXERCISES}; model answers: {SOLUTION.parent}\n")

    one = scratch / "one"
    one.mkdir()
    shutil.copyfile(SOLUTION, one / "attention.py")
    shutil.copyfile(ANSWERS, one / "answers.yaml")
    graded = scratch / "one.json"

    # (a) and (b), interleaved. The seed cache (grader/grading/seed_cache.py) lives in a cache of this
    # run: built once here, as `mha prepare` or the first grade builds it; timed without it too.
    os.environ["MHA_CACHE_DIR"] = str(scratch / "seed-cache")  # every command below uses it
    env = dict(os.environ)
    if set(args.only) & set("ab"):
        run([*MHA, "--course", str(EXERCISES), "prepare"])
        first, newcomer = iter(range(1 << 30)), iter(range(1 << 30))
        secret_env = {**env, "MHA_COURSE_SECRET": SECRET or "benchmark-course-secret"}
        numpy_s, grade_s, check_s, fresh_s, new_seed_s = median_of(
            args.repeat,
            lambda: run([sys.executable, "-c", "import numpy"]),
            lambda: run([*MHA, "--course", str(EXERCISES), "grade", str(one), "--format", "json",
                         "--output", str(graded)], env=env),
            lambda: run([*MHA, "--course", str(EXERCISES), "check", "--path", str(one / "attention.py")], env=env),
            lambda: run([*MHA, "--course", str(EXERCISES), "grade", str(one), "--format", "json",
                         "--output", str(graded)], env={**env, "MHA_CACHE_DIR": str(scratch / f"empty{next(first)}")}),
            # a student never graded before, on their own numbers: the course validated, their seed's
            # cases prepared in this grade (every submission of a per-student course on a fresh machine)
            lambda: run([*MHA, "--course", str(EXERCISES), "grade", str(one), "--student", f"newcomer{next(newcomer)}",
                         "--format", "json", "--output", str(graded)], env=secret_env),
        )
        print(f"(a) cold `mha grade` of one submission   {grade_s * 1000:7.0f} ms   (median of {args.repeat}; "
              "a new process, the seed cache filled)")
        print(f"    `python -c \"import numpy\"`           {numpy_s * 1000:7.0f} ms")
        cold = grade_s / numpy_s
        print(f"    ratio                                 {cold:7.2f} x   target <= 2: {verdict(cold <= 2)}")
        print(f"    the first grade after a change of the problem files or the grader (compiling them): "
              f"{fresh_s * 1000:.0f} ms = {fresh_s / numpy_s:.2f} x")
        print(f"    a student whose own numbers were never prepared (a course secret; each submission on a fresh "
              f"machine): {new_seed_s * 1000:.0f} ms = {new_seed_s / numpy_s:.2f} x")
        print(f"(b) `mha check` (every problem, public cases, a correct file)  {check_s * 1000:.0f} ms "
              f"= {check_s / numpy_s:.2f} x\n")

    # (c) and (e)
    if "c" not in args.only:
        return
    students = make_class(args.n)
    folder = scratch / "class"
    write_class(students, folder)
    kinds = {k: sum(s.kind == k for s in students) for k in ("correct", "buggy", "empty", "slow", "stub")}
    kinds = {k: v for k, v in kinds.items() if v}
    out = scratch / "graded"
    step = max(1, args.n // max(1, args.naive_sample))
    sample = students[step // 2::step][:args.naive_sample]
    naive_dir = scratch / "naive"
    naive_dir.mkdir()
    stub_students, stub_folder, stub_out = as_stubs(students), scratch / "stubs", scratch / "graded-stubs"
    write_class(stub_students, stub_folder)
    batches, stub_batches, naive_s = [], [], 0.0
    # the first grade-all of the class, each seed's cases prepared (and kept in the prepared-cases store)
    store = scratch / "store"  # the cold run fills it; every later run reads it (the stubs' too: the same seeds)
    cold_batch = grade_all(folder, out, args.jobs, cache=store)
    for i in range(args.batch_repeat):  # the naive loop and the stubs between the batches: same conditions
        batches.append(grade_all(folder, out, args.jobs, cache=store))
        naive_s += naive_loop(sample[i::args.batch_repeat], folder, naive_dir)
        stub_batches.append(grade_all(stub_folder, stub_out, args.jobs, cache=store))
    statuses = check_results(students, out)
    stub_statuses = check_results(stub_students, stub_out)
    batch = sorted(batches, key=lambda b: b.seconds)[len(batches) // 2]
    stub_batch = sorted(stub_batches, key=lambda b: b.seconds)[len(stub_batches) // 2]
    memory = "e" in args.only
    sampled = grade_all(folder, out, args.jobs, sample=True, cache=store)  # the CPU split (and memory) of one more run
    quarter = scratch / "quarter"  # the same sampling on a class a quarter the size
    quarter.mkdir()
    for student in students[: max(1, args.n // 4)]:
        shutil.copytree(folder / student.name, quarter / student.name)
    small = grade_all(quarter, scratch / "graded-quarter", args.jobs, sample=True, cache=store) if memory else batch
    rate = args.n / batch.seconds
    naive_rate = len(sample) / naive_s
    seeded = " with a course secret (a seed per student)" if SECRET else ""
    print(f"(c) `mha grade-all --jobs {args.jobs}` on N = {args.n}{seeded} ({', '.join(f'{v} {k}' for k, v in kinds.items())}; "
          f"graded: {', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))})")
    print(f"    {batch.seconds:.2f} s = {rate:6.1f} submissions/s   (median of {args.batch_repeat}: "
          f"{', '.join(f'{b.seconds:.2f}' for b in batches)} s; each seed's prepared cases read from the store)   "
          f"target >= 60/s: {verdict(rate >= 60)}")
    print(f"    the first run (an empty store: every seed's cases prepared and kept): {cold_batch.seconds:.2f} s = "
          f"{args.n / cold_batch.seconds:.1f} submissions/s, CPU {sum(cold_batch.cpu) / args.n * 1000:.0f} ms per "
          f"submission (the later runs: {sum(batch.cpu) / args.n * 1000:.0f} ms)")
    print(f"    naive loop (`mha grade` per submission, sequential, {len(sample)} of the {args.n}, between the "
          f"batches): {naive_s:.1f} s = {naive_rate:.2f} submissions/s")
    speedup = rate / naive_rate
    print(f"    ratio                                 {speedup:7.1f} x   target >= 10: {verdict(speedup >= 10)}")
    stub_rate, stub_cpu = args.n / stub_batch.seconds, sum(stub_batch.cpu) / args.n * 1000
    class_cpu = sum(batch.cpu) / args.n * 1000
    print(f"    the same {args.n} students each handing in the untouched stub (no work in their functions; graded: "
          f"{', '.join(f'{v} {k}' for k, v in sorted(stub_statuses.items()))}): {stub_batch.seconds:.2f} s = "
          f"{stub_rate:.1f} submissions/s, CPU {stub_cpu:.0f} ms per submission (median of {args.batch_repeat}: "
          f"{', '.join(f'{b.seconds:.2f}' for b in stub_batches)} s)")
    print(f"    that is {stub_cpu / class_cpu:.0%} of the class's {class_cpu:.0f} ms: what a submission costs whatever it "
          f"holds (a student process, a session, two requests a problem, the quiz, the record); at 60/s, {cpus} CPUs leave "
          f"{cpus * 1000 / 60:.0f} ms")
    if "f" not in args.only:
        floor_s, floor_scores = float("nan"), {}
    else:
        floor_s, floor_scores = floor(students, folder)
    floor_rate = args.n / floor_s
    same = floor_scores == batch_scores(students, out)
    user, system = sampled.cpu
    print(f"(f) the floor (no isolation: functions called in one process, judged the same way): "
          f"{floor_s:.2f} s = {floor_rate:6.1f} submissions/s; scores {'equal to' if same else 'DIFFERENT from'} "
          "the batch's")
    print(f"    grade-all / floor: {rate / floor_rate:.3f} of the floor's rate ({batch.seconds / floor_s:.1f} x its time)")
    grader_ms = sampled.own_cpu / args.n * 1000
    print(f"    CPU per submission in the batch (the sampled run): {(user + system) / args.n * 1000:.1f} ms: the grader "
          f"processes {grader_ms:.1f} (user and system), student processes and zygotes "
          f"{(user + system) / args.n * 1000 - grader_ms:.1f} (user and system, "
          f"about); the kernel's share of it all {system / args.n * 1000:.1f} (system, the whole tree); the floor: "
          f"{floor_s / args.n * 1000:.1f} ms")
    if not memory:
        print("(e) peak memory: skipped (--only)\n")
    else:
        print(f"(e) peak memory of the batch, a further run sampled every 20 ms ({sampled.samples} samples, "
              f"{sampled.seconds:.1f} s; up to {sampled.most_processes} processes at once: "
              "grader, zygote, students):")
        print(f"    PSS {sampled.peak_pss_mb:.0f} MB (RSS, shared pages counted per process: "
              f"{sampled.peak_rss_mb:.0f} MB); largest single process max RSS {sampled.max_rss_one_mb:.0f} MB   "
              f"target < 300 MB: {verdict(sampled.peak_pss_mb < 300)}")
        print(f"    the same with N = {max(1, args.n // 4)}: PSS {small.peak_pss_mb:.0f} MB, "
              f"RSS {small.peak_rss_mb:.0f} MB\n")

    # (d)
    if args.no_otter or "d" not in args.only:
        print("(d) otter: skipped (--no-otter)")
        return
    setup = otter_setup(scratch)
    if isinstance(setup, str):
        print(f"(d) otter: skipped: {setup}")
        return
    autograder, _ = setup
    submission = scratch / "submission.py"
    shutil.copyfile(SOLUTION, submission)
    otter_s, grade_again = median_of(
        args.otter_repeat,
        lambda: otter_run(autograder, submission, scratch),
        lambda: run([*MHA, "--course", str(EXERCISES), "grade", str(one), "--format", "json",
                     "--output", str(graded)]),
    )
    print(f"(d) `otter run` of the same submission (exported by `mha export otter`): "
          f"{otter_s:.2f} s   (median of {args.otter_repeat})")
    print(f"    vs cold `mha grade` (interleaved with it): {grade_again * 1000:.0f} ms -> "
          f"{otter_s / grade_again:.1f} x faster")
    print(f"    vs `mha grade-all` per submission: {batch.seconds / args.n * 1000:.0f} ms -> "
          f"{otter_s / (batch.seconds / args.n):.0f} x faster   target >= 20: "
          f"{verdict(otter_s / (batch.seconds / args.n) >= 20)}")


if __name__ == "__main__":
    main()
