"""The prepared-cases store (grader/grading/prepared_store.py): a class graded with it, cold or warm,
scores every student exactly as without it; its files are keyed on content, private, and never
used when they are not exactly the current course's and seed's."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

from click.testing import CliRunner

from grader.classroom import batch
from grader.cli.commands import main
from grader.course.loader import load_course
from grader.course.seeds import student_seed
from grader.grading import prepared as prepared_module
from grader.grading.prepared import PreparedCases, prepare
from grader.grading.prepared_store import BLOBS, FOLDER, SUFFIX, PreparedStore, _same
from grader.grading.seed_cases import pack, unpack
from grader.paths import CACHE_ENV

from .conftest import EXERCISES, solution_source

SECRET = "a course secret for the store's tests"
# one bug each, as a student would make it: (text of the model answer, its replacement)
BUGS = (
    ("e = np.exp(x - x.max(axis=-1, keepdims=True))", "e = np.exp(x)"),
    ("scores = Q @ K.T / math.sqrt(d_k)", "scores = Q @ K.T / d_k"),
    ("    return num_layers * batch * num_heads * num_queries",
     "    return num_layers * batch * num_heads * d_v * num_queries"),
    ("return H.transpose(1, 0, 2).reshape(n, h * d_head)", "return H.reshape(n, h * d_head)"),
)


def make_class(folder: Path) -> list[str]:
    """Twelve students on their own seeds: six model answers, four with one bug each, two untouched stubs."""
    from grader.course.quiz import answer_key, answers_template
    model, stub = solution_source(), (EXERCISES / "attention.py").read_text()
    quiz = load_course(EXERCISES).quiz
    sources = [model] * 6 + [model.replace(*bug) for bug in BUGS] + [stub] * 2
    for old, _ in BUGS:
        assert old in model
    students = []
    for i, source in enumerate(sources):
        student = f"s{i:02d}"
        (folder / student).mkdir(parents=True)
        (folder / student / "attention.py").write_text(source)
        if i % 3 and quiz is not None:  # most answer the quiz, for their own numbers
            key = answer_key(quiz, student_seed(SECRET, student))
            (folder / student / "answers.yaml").write_text(answers_template(quiz, key))
        students.append(student)
    return students


def graded(folder: Path, out: Path, jobs: int = 2) -> dict[str, bytes]:
    result = CliRunner().invoke(main, ["--course", str(EXERCISES), "grade-all", str(folder), "--out", str(out),
                                       "--jobs", str(jobs), "--no-progress", "--timeout", "10"],
                                env={"MHA_COURSE_SECRET": SECRET}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    names = [*out.glob("results/*.json"), *out.glob("feedback/*.txt"), *out.glob("*.csv"), *out.glob("*.json")]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in names}


def test_a_class_scores_the_same_without_the_store_and_with_it_cold_and_warm(tmp_path, monkeypatch):
    """Twelve students, each on their own seed, graded three times: without the store (every case
    prepared in the grader process, as before it), with an empty store (prepared, then kept), and with
    the store filled (read back). Every result, feedback file, the gradebook and the item analysis
    are the same bytes; the warm run prepares only the cases the store keeps as "prepare it", and
    draws no quiz item."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "class"
    students = make_class(folder)
    without = batch._default_grader

    def no_store(*args, **kwargs):
        return without(*args[:4], keep_prepared=False)
    monkeypatch.setattr(batch, "_default_grader", no_store)
    before = graded(folder, tmp_path / "without")
    monkeypatch.setattr(batch, "_default_grader", without)
    assert not (tmp_path / "cache" / FOLDER).exists()  # nothing was kept without the store

    cold = graded(folder, tmp_path / "cold")
    kept = sorted((tmp_path / "cache" / FOLDER).glob(f"*/*{SUFFIX}"))
    assert sorted(int(p.stem) for p in kept) == sorted(student_seed(SECRET, s) for s in students)

    prepared_now: list[tuple[str, str]] = []
    real = prepared_module.prepare
    monkeypatch.setattr(prepared_module, "prepare", lambda problem, case, seed: (
        prepared_now.append((problem.id, case.name)), real(problem, case, seed))[1])
    from grader.course import quiz as quiz_module
    drawn_now: list[str] = []
    real_draw = quiz_module.draw
    monkeypatch.setattr(quiz_module, "draw", lambda item, seed: (drawn_now.append(item.id), real_draw(item, seed))[1])
    warm = graded(folder, tmp_path / "warm", jobs=1)  # in this process: what it prepares is seen here

    gradebook = before["gradebook.csv"].decode()
    assert gradebook.count("\ns") == 12 and ",graded," in gradebook
    scores = {line.split(",")[0]: line.split(",")[-2] for line in gradebook.splitlines()[1:]}
    assert len(set(scores.values())) > 2  # the model answers, the bugs and the stubs score differently
    assert before.keys() == cold.keys() == warm.keys() and len(before) >= 2 * 12 + 1
    for name in before:
        assert cold[name] == before[name], name
        assert warm[name] == before[name], name
    stored = unpack(kept[0].read_bytes())[0]
    afresh = {(pid, case) for pid, case, data in stored["cases"] if data is None}
    assert set(prepared_now) <= afresh and len(afresh) < len(stored["cases"]) // 4
    assert drawn_now == [] and stored["quiz"] and all(data is not None for _, data in stored["quiz"])


def test_the_store_is_keyed_on_content_and_ignores_what_is_not_exactly_its_own(tmp_path):
    """A change of one byte of a problem file makes another key, so an earlier file is never used for
    it; a file of another key or seed, a damaged one or one missing a case is ignored (prepared again)."""
    course_root = tmp_path / "course"
    shutil.copytree(EXERCISES, course_root, ignore=shutil.ignore_patterns("__pycache__"))
    course = load_course(course_root)
    store = PreparedStore(course, tmp_path / "cache")
    seed = 41
    cases = PreparedCases(store=store)
    problem = course.problem("softmax")
    first = cases.get(problem, problem.cases[0], seed)
    assert store.load(seed) is not None
    read = PreparedCases(store=store).get(problem, problem.cases[0], seed)
    assert read.inputs == first.inputs and read.args[0].tobytes() == first.args[0].tobytes()
    assert read.expected.tobytes() == prepare(problem, problem.cases[0], seed).expected.tobytes()

    path = store.folder / f"{seed}{SUFFIX}"
    whole = path.read_bytes()
    data, arrays = unpack(whole)
    for changed in ({**data, "seed": seed + 1}, {**data, "key": "0" * 64}, {**data, "cases": data["cases"][1:]}):
        path.write_bytes(pack(changed)[:-len(arrays)] + bytes(arrays))  # the same arrays, at the same places
        assert store.load(seed) is None
    path.write_bytes(whole[:-100])  # truncated
    assert store.load(seed) is None
    path.write_text(json.dumps(data))  # JSON, as an earlier version wrote
    assert store.load(seed) is None
    path.write_bytes(whole)
    assert store.load(seed) is not None

    yaml = course_root / "problems" / "softmax.yaml"
    yaml.write_text(yaml.read_text() + "\n# one more line\n")
    again = PreparedStore(load_course(course_root), tmp_path / "cache")
    assert again.key != store.key and again.folder != store.folder and again.load(seed) is None
    (course_root / "attention.py").write_text("# a student's file in the course folder is not the course\n")
    assert PreparedStore(load_course(course_root), tmp_path / "cache").key == again.key


def test_the_store_is_private(tmp_path):
    """Every folder of the store is mode 0700 and every file 0600: it holds hidden cases."""
    course = load_course(EXERCISES)
    store = PreparedStore(course, tmp_path / "cache")
    problem = course.problem("softmax")
    PreparedCases(store=store).get(problem, problem.cases[0], 5)
    path = store.folder / f"5{SUFFIX}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    blobs = sorted((store.folder / BLOBS).iterdir())
    assert blobs and stat.S_IMODE((store.folder / BLOBS).stat().st_mode) == 0o700
    assert all(stat.S_IMODE(blob.stat().st_mode) == 0o600 for blob in blobs)


def _model_seeds(course, count: int = 2) -> list[int]:
    """`count` seeds whose students draw the same trained single-head model (one_wide_head's s16)."""
    from grader.course.generators import draw_params
    problem = course.problem("one_wide_head")
    by_model: dict[int, list[int]] = {}
    for seed in range(1, 200):
        same = by_model.setdefault(draw_params(problem.params, problem.id, seed)["s16"], [])
        same.append(seed)
        if len(same) == count:
            return same
    raise AssertionError("no two seeds draw the same model")


def test_a_model_drawn_by_many_seeds_is_kept_once_and_read_once(tmp_path):
    """Two students on the same trained model: its maps are one blob file that both seeds' files name,
    read back as one read-only array (so the student processes are sent it without encoding it again),
    and every case reads back exactly as prepared, numpy scalars and Fortran-ordered answers included."""
    course = load_course(EXERCISES)
    store = PreparedStore(course, tmp_path / "cache")
    first, second = _model_seeds(course)
    for seed in (first, second):
        PreparedCases(store=store).get(course.problem("softmax"), course.problem("softmax").cases[0], seed)
    names = {p.stem for p in (store.folder / BLOBS).iterdir()}
    named = [set(re.findall(r'"blob":"([0-9a-f]{64})"', json.dumps(unpack((store.folder / f"{s}{SUFFIX}").read_bytes())[0],
                                                                  separators=(",", ":")))) for s in (first, second)]
    assert names and names == named[0] | named[1] and len(named[0] & named[1]) >= 2  # public and hidden maps
    reader = PreparedStore(course, tmp_path / "cache")
    one, two = reader.load(first), reader.load(second)
    assert one is not None and two is not None
    wide = [(c.name, "weights") for c in course.problem("one_wide_head").visible_cases(include_hidden=True)]
    shared = [one["one_wide_head", name].args[0] for name, _ in wide if one["one_wide_head", name].args[0] is
              two["one_wide_head", name].args[0]]
    assert len(shared) >= 2 and all(not a.flags.writeable for a in shared)
    stored = unpack((store.folder / f"{first}{SUFFIX}").read_bytes())[0]
    assert all(data is not None for pid, _, data in stored["cases"] if pid in ("thin_head", "from_torch_layout"))
    for (pid, name), read in one.items():
        if pid and read is not None:
            problem = course.problem(pid)
            fresh = prepare(problem, next(c for c in problem.cases if c.name == name), first)
            assert _same(fresh.args, read.args) and _same(fresh.expected, read.expected), (pid, name)


def test_a_damaged_blob_is_never_used(tmp_path):
    """A blob whose bytes no longer match its name (or that is gone): the seed is prepared again."""
    course = load_course(EXERCISES)
    store = PreparedStore(course, tmp_path / "cache")
    seed = 7
    PreparedCases(store=store).get(course.problem("softmax"), course.problem("softmax").cases[0], seed)
    assert PreparedStore(course, tmp_path / "cache").load(seed) is not None
    blob = sorted((store.folder / BLOBS).iterdir())[0]
    content = bytearray(blob.read_bytes())
    content[-1] ^= 1  # one bit of the array's last number
    blob.write_bytes(bytes(content))
    assert PreparedStore(course, tmp_path / "cache").load(seed) is None
    blob.unlink()
    assert PreparedStore(course, tmp_path / "cache").load(seed) is None
    again = PreparedCases(store=PreparedStore(course, tmp_path / "cache"))
    problem = course.problem("one_wide_head")
    got = again.get(problem, problem.cases[0], seed)
    assert got.args[0].tobytes() == prepare(problem, problem.cases[0], seed).args[0].tobytes()
    assert blob.is_file()  # written again


def test_without_a_place_to_keep_them_cases_are_prepared_as_before(tmp_path):
    """A cache folder that cannot be written: nothing is kept, every case is still prepared and graded."""
    course = load_course(EXERCISES)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    store = PreparedStore(course, blocked)
    problem = course.problem("softmax")
    got = PreparedCases(store=store).get(problem, problem.cases[0], 5)
    assert got.expected.tobytes() == prepare(problem, problem.cases[0], 5).expected.tobytes()
    assert store.load(5) is None and not os.path.isdir(blocked)
