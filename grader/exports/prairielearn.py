"""PrairieLearn: a course folder with one externally graded question per problem and one native
question per quiz item, and a Homework assessment that lists them all.

Layout (`build` returns it as {relative path: content}; `write` puts it in a folder):

- `infoCourse.json`; `courseInstances/<ci>/infoCourseInstance.json` and
  `courseInstances/<ci>/assessments/<aid>/infoAssessment.json` (every question, at its points);
- `questions/<problem>/`: `info.json` (`gradingMethod: External`, `externalGradingOptions` with
  the image, the entry point, `serverFilesCourse: ["mha/"]` and a timeout), `question.html`
  (the prompt, a `pl-file-editor` preloaded with the assignment's attention.py stubs, and
  `pl-external-grader-results`), `attention.py` (those stubs) and `tests/problem` (the id the
  entry point grades);
- `questions/quiz_<item>/`: `info.json`, `question.html` with `pl-multiple-choice` or
  `pl-checkbox` (`partial-credit="net-correct"`: this package's multiple-answers rule), whose
  choices PrairieLearn shows to each student in an order of its own (`order="random"`;
  `order="fixed"` for an item with `shuffle: false`), or
  `pl-number-input` (`comparison="relabs"`, `rtol="0"`, `atol` the half-width of the range
  `mha grade` accepts, around its midpoint), and `server.py`, whose `generate()` picks one of
  the item's precomputed draws from PrairieLearn's `variant_seed`, so each student's draw has
  its own numbers (the answers are computed here, by this package: PrairieLearn needs no grader);
  a written item is a `pl-rich-text-editor` graded by hand (`manualPoints` in the assessment),
  its rubric in `pl-manual-grading-only` (shown to graders, never to students);
- `serverFilesCourse/mha/`: the grader's wheel, its dependencies pinned as the Gradescope export
  pins them (`wheelhouse.py`), the assignment (`exercises/`, the course with its hidden cases) and `grade.sh`,
  the entry point: it installs the wheels offline into a fresh virtual environment and runs
  `mha grade --format prairielearn` on `/grade/student`, writing `/grade/results/results.json`.

Each code question's `server.py` likewise picks one of `draws` seeds from
PrairieLearn's `variant_seed` and puts it in `params` (`mha_seed`) with that seed's prompt;
grade.sh passes /grade/data/data.json to `mha grade --prairielearn-data`, which grades that
seed's cases (the hidden ones stay in serverFilesCourse, which students never see). Text reaches
the question files as HTML with braces written as entities, so PrairieLearn's Mustache pass
leaves it alone; the draws' text goes through `params` with triple braces.
"""
from __future__ import annotations

import html
import json
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..course.model import MAX_WRITTEN, Course, Problem, QuizItem, QuizKind
from ..course.quiz import DEFAULT_SEED, Draw, draw
from ..grading.scoring import numeric_range
from .markup import to_html
from .qti import draw_seeds

__all__ = ["ENTRY_POINT", "IMAGE", "INSTANCE", "ASSESSMENT", "SEED_PARAM", "TIMEOUT", "build", "code_seeds",
           "quiz_qid", "write"]

IMAGE = "prairielearn/grader-python"
INSTANCE = "mha"
ASSESSMENT = "hw-mha"
# Seconds for one grading job: PrairieLearn's per-course cap is commonly 30 s (an administrator
# can raise it). The offline install takes a few seconds; mha's own limits stay below the rest.
TIMEOUT = 30
TOTAL_SECONDS = 20
ENTRY_POINT = "/grade/serverFilesCourse/mha/grade.sh"
SEED_PARAM = "mha_seed"  # the code question's seed, in params: grade.sh grades on that seed
_NAMESPACE = uuid.UUID("6f1d2c1e-5b7a-4d0e-9a53-3c0f8d2b7e41")

GRADE_SH = """#!/usr/bin/env bash
# PrairieLearn runs this in the grading container for every submission: the student's files in
# $ROOT/student, this question's tests/ in $ROOT/tests, this folder in $ROOT/serverFilesCourse/mha.
# No network: the grader and its dependencies are installed from wheels/ here, for Python {python}.
# Outside a container (tests): MHA_GRADE_ROOT for /grade, MHA_PYTHON, MHA_BIN (an mha already installed).
set -u
ROOT="${{MHA_GRADE_ROOT:-/grade}}"
HERE="$ROOT/serverFilesCourse/mha"
RESULTS="$ROOT/results/results.json"
PYTHON="${{MHA_PYTHON:-python3}}"
WANT="{python}"
mkdir -p "$ROOT/results"
not_graded() {{  # $1: a message with no quotes or backslashes
  printf '{{"gradable": false, "score": 0, "tests": [], "format_errors": ["%s"],\\n "message": "%s"}}\\n' "$1" \\
    "The autograder could not run; this is not a grade. Please tell your instructor." > "$RESULTS"
  exit 0
}}
command -v "$PYTHON" >/dev/null || not_graded "no $PYTHON in the grading image; this question needs Python $WANT"
HAVE=$("$PYTHON" -I -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$HAVE" = "$WANT" ] || not_graded "the wheels of this question are for Python $WANT but the image has $HAVE: \
export again with mha export prairielearn --python $HAVE"
# The hidden cases, the reference and the answers stay with root: student code runs as another user.
chmod -R go-rwx "$ROOT/serverFilesCourse" "$ROOT/tests" 2>/dev/null
[ -d "$ROOT/data" ] && chmod -R go-rwx "$ROOT/data" 2>/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT  # the venv and the seed cache go with the job
# Run from a folder of our own, and every Python with -I: from the student's folder (a job may
# start in /grade/student), `python -m venv` would run a student's venv/ package, as root.
cd "$WORK" || not_graded "cannot enter a temporary folder"
MHA="${{MHA_BIN:-}}"
if [ -z "$MHA" ]; then
  # Every job starts from a fresh container: install (no bytecode written ahead: it costs more than it saves).
  "$PYTHON" -I -m venv --without-pip "$WORK/venv" || not_graded "cannot make a virtual environment with $PYTHON"
  "$WORK/venv/bin/python" -I "$HERE/wheels/{pip}/pip" install --quiet --disable-pip-version-check --no-cache-dir \\
    --no-compile --no-index --find-links "$HERE/wheels" {requirements} >"$WORK/install.log" 2>&1 \\
    || not_graded "installing the grader from its wheels failed; see the grading job log"
  MHA="$WORK/venv/bin/mha"
fi
PROBLEM=$(tr -cd 'a-z0-9_' < "$ROOT/tests/problem")
# data.json's params name the seed (server.py drew it from PrairieLearn's variant_seed)
MHA_CACHE_DIR="$WORK/cache" "$MHA" --course "$HERE/exercises" grade "$ROOT/student" \\
  --problem "$PROBLEM" --format prairielearn --output "$RESULTS" --total-timeout {total} \\
  --prairielearn-data "$ROOT/data/data.json"
[ -s "$RESULTS" ] || not_graded "mha exited without writing results.json"
exit 0
"""

SERVER_PY = '''"""Picks this question's numbers: one of the precomputed DRAWS, from PrairieLearn's variant_seed."""
import random

DRAWS = {draws}


def generate(data):
    seed = data.get("variant_seed")
    # PrairieLearn seeds `random` with variant_seed too, so either way a question keeps its numbers.
    chosen = DRAWS[int(seed) % len(DRAWS) if seed is not None else random.randrange(len(DRAWS))]
    data["params"].update(chosen["params"])
    if "answer" in chosen:
        data["correct_answers"]["answer"] = chosen["answer"]
'''


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


def _inert(text: str) -> str:
    """HTML text with its braces as entities: PrairieLearn's Mustache pass cannot read them as tags."""
    return text.replace("{", "&#123;").replace("}", "&#125;")


def _json(data) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def quiz_qid(item: QuizItem) -> str:
    return f"quiz_{item.id}"


# ------------------------------------------------------------------ code problems

def code_seeds(problem: Problem, count: int, seed: int) -> list[int]:
    """`count` seeds from `seed` on; for a problem with params, seeds whose numbers differ
    (fewer if the problem has fewer)."""
    from ..course import generators as gen
    if not problem.params:
        return list(range(seed, seed + count))
    return gen.distinct_seeds(lambda s: gen.draw_params(problem.params, problem.id, s), count, seed)


def _code_question(course: Course, problem: Problem, stubs: str, image: str, draws: int,
                   seed: int) -> dict[str, str]:
    from ..course.render import render_prompt
    table = [{"params": {"prompt": to_html(render_prompt(problem, s)), SEED_PARAM: s}}
             for s in code_seeds(problem, draws, seed)]
    info = {"uuid": _uid(course.title, "problem", problem.id), "title": problem.title,
            "topic": "Multi-head attention", "tags": ["mha", "code"], "type": "v3",
            "gradingMethod": "External",
            "externalGradingOptions": {"enabled": True, "image": image, "entrypoint": ENTRY_POINT,
                                       "serverFilesCourse": ["mha/"], "timeout": TIMEOUT}}
    page = f"""<pl-question-panel>
<h3>{_inert(html.escape(problem.title))} ({problem.points:g} points)</h3>
<p><code>{_inert(html.escape(problem.function.signature))}</code></p>
{{{{{{params.prompt}}}}}}
<p>The editor holds the whole <code>attention.py</code>; this question grades
<code>{_inert(html.escape(problem.function.name))}</code> on its public and hidden cases (other functions may
stay stubs, or hold the helpers it calls).</p>
</pl-question-panel>

<pl-file-editor file-name="attention.py" ace-mode="ace/mode/python" source-file-name="attention.py"></pl-file-editor>

<pl-submission-panel>
<pl-external-grader-results></pl-external-grader-results>
<pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""
    base = f"questions/{problem.id}"
    return {f"{base}/info.json": _json(info), f"{base}/question.html": page, f"{base}/attention.py": stubs,
            f"{base}/tests/problem": problem.id + "\n",
            f"{base}/server.py": SERVER_PY.format(draws=json.dumps(table, indent=4, sort_keys=True))}


# ------------------------------------------------------------------ quiz items

def _draw_data(v: Draw) -> dict:
    """What server.py puts in `params` (and `correct_answers`) for one draw."""
    item = v.item
    params = {"prompt": to_html(v.prompt)}
    for choice in v.choices:
        params[f"choice_{choice.letter}"] = to_html(choice.text)
        params[f"feedback_{choice.letter}"] = to_html(choice.feedback)
    data: dict[str, Any] = {"params": params}
    if item.kind is QuizKind.NUMERIC:
        low, high = numeric_range(v.number, item.tolerance)
        data["answer"] = float((low + high) / 2)
        params["atol"] = format(((high - low) / 2).normalize(), "f")
    return data


def _written_question(course: Course, item: QuizItem) -> dict[str, str]:
    """A written item: a rich-text answer graded by hand (the assessment gives it manualPoints only),
    with the rubric inside pl-manual-grading-only, which graders see and students never do."""
    from .qti import rubric_html
    info = {"uuid": _uid(course.title, "quiz", item.id), "title": item.title, "topic": "Multi-head attention",
            "tags": ["mha", "quiz", item.kind.value], "type": "v3", "singleVariant": True,
            "gradingMethod": "Manual"}
    page = f"""<pl-question-panel>
<h3>{_inert(html.escape(item.title))} ({item.points:g} points, graded by hand)</h3>
{_inert(to_html(item.prompt))}
<p>At most {MAX_WRITTEN} characters, in your own words.</p>
</pl-question-panel>

<pl-manual-grading-only>
{_inert(rubric_html(item))}
</pl-manual-grading-only>

<pl-rich-text-editor file-name="answer.html"></pl-rich-text-editor>

<pl-submission-panel>
<pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""
    base = f"questions/{quiz_qid(item)}"
    return {f"{base}/info.json": _json(info), f"{base}/question.html": page}


def _quiz_question(course: Course, item: QuizItem, draws: int, seed: int) -> dict[str, str]:
    seeds = draw_seeds(item, draws, seed) if item.params else [seed]
    # the file's order in every draw: the answers' letters must mean the same choices in all of them,
    # and PrairieLearn shuffles for each student
    table = [_draw_data(draw(item, s, student_order=False)) for s in seeds]
    first = draw(item, seeds[0], student_order=False)
    info = {"uuid": _uid(course.title, "quiz", item.id), "title": item.title, "topic": "Multi-head attention",
            "tags": ["mha", "quiz", item.kind.value, item.visibility.value], "type": "v3"}
    hidden = item.hidden
    badge = ' hide-score-badge="true"' if hidden else ""
    if item.kind is QuizKind.NUMERIC:
        element = (f'<pl-number-input answers-name="answer" comparison="relabs" rtol="0" atol="{{{{params.atol}}}}"'
                   f' label="Answer:"{badge}></pl-number-input>')
    else:
        tag = "pl-multiple-choice" if item.kind is QuizKind.MULTIPLE_CHOICE else "pl-checkbox"
        credit = ' partial-credit="net-correct"' if item.kind is QuizKind.MULTIPLE_ANSWERS else ""
        answers = []
        for choice in first.choices:
            correct = ' correct="true"' if choice.correct else ""
            feedback = "" if hidden else f' feedback="{{{{params.feedback_{choice.letter}}}}}"'
            answers.append(f"  <pl-answer{correct}{feedback}>{{{{{{params.choice_{choice.letter}}}}}}}</pl-answer>")
        order = "random" if item.shuffle else "fixed"
        element = "\n".join([f'<{tag} answers-name="answer" order="{order}"{credit}{badge}>', *answers, f"</{tag}>"])
    note = ("<p><em>Hidden item: its answer is recorded now and graded with no feedback.</em></p>\n"
            if hidden else "")
    page = f"""<pl-question-panel>
<h3>{_inert(html.escape(item.title))} ({item.points:g} points)</h3>
{{{{{{params.prompt}}}}}}
{note}</pl-question-panel>

{element}
"""
    base = f"questions/{quiz_qid(item)}"
    return {f"{base}/info.json": _json(info), f"{base}/question.html": page,
            f"{base}/server.py": SERVER_PY.format(draws=json.dumps(table, indent=4, sort_keys=True))}


# ------------------------------------------------------------------ the course

def _course(course: Course) -> dict[str, str]:
    problems = [{"id": p.id, "points": p.points} for p in course.problems]
    items = [{"id": quiz_qid(i), "manualPoints" if i.manual else "points": i.points}
             for i in course.quiz.items] if course.quiz else []
    zones = [{"title": "Code", "questions": problems}]
    if items:
        zones.append({"title": "Concept quiz", "questions": items})
    return {
        "infoCourse.json": _json({
            "uuid": _uid(course.title, "course"), "name": "MHA", "title": course.title,
            "topics": [{"name": "Multi-head attention", "color": "blue3",
                        "description": "Exercises and a concept quiz on multi-head attention."}],
            "assessmentSets": [{"abbreviation": "HW", "name": "Homework", "heading": "Homework", "color": "green1"}],
            "tags": [{"name": n, "color": "gray1"} for n in ("mha", "code", "quiz", "numeric", "multiple_choice",
                                                             "multiple_answers", "written", "public",
                                                             "hidden")]}),
        f"courseInstances/{INSTANCE}/infoCourseInstance.json": _json({
            "uuid": _uid(course.title, "instance"), "longName": course.title,
            "allowAccess": [{"startDate": "2026-01-01T00:00:00", "endDate": "2030-12-31T23:59:59"}]}),
        f"courseInstances/{INSTANCE}/assessments/{ASSESSMENT}/infoAssessment.json": _json({
            "uuid": _uid(course.title, "assessment"), "type": "Homework", "title": course.title,
            "set": "Homework", "number": "1", "zones": zones}),
    }


def _server_files(course: Course, wheels: Mapping[str, bytes], python: str) -> dict[str, str | bytes]:
    """serverFilesCourse/mha: the wheels, the course and grade.sh, as the Gradescope zip holds them."""
    from ..classroom.bundles import write_autograder
    from . import wheel
    from .wheelhouse import offline_requirements, pip_wheel
    pip = pip_wheel(wheels)
    with tempfile.TemporaryDirectory(prefix="mha-prairielearn-") as tmp:
        bundle = Path(tmp) / "autograder"
        write_autograder(course, bundle, None)
        files: dict[str, str | bytes] = {
            f"serverFilesCourse/mha/{p.relative_to(bundle).as_posix()}": p.read_bytes()
            for p in sorted((bundle / "exercises").rglob("*")) if p.is_file()}
    own, data = wheel.build(course)
    for name, content in {**wheels, own: data}.items():
        files[f"serverFilesCourse/mha/wheels/{name}"] = content
    requirements = offline_requirements(wheels, own)
    files["serverFilesCourse/mha/grade.sh"] = GRADE_SH.format(python=python, pip=pip, requirements=requirements,
                                                              total=TOTAL_SECONDS)
    return files


def build(course: Course, wheels: Mapping[str, bytes], python: str, *, image: str = IMAGE,
          draws: int = 10, seed: int = DEFAULT_SEED) -> dict[str, str | bytes]:
    """The course folder as {relative path: content}; the same inputs give the same files.

    `wheels`: the dependencies and pip for CPython `python` on Linux x86_64 (`wheelhouse.download`);
    `draws`: how many precomputed draws each quiz item with params offers."""
    from .pysource import student_module
    stubs = student_module(course)  # made from the course: the instructor's attention.py may be solved
    files: dict[str, str | bytes] = dict(_course(course))
    for problem in course.problems:
        files.update(_code_question(course, problem, stubs, image, draws, seed))
    for item in course.quiz.items if course.quiz else ():
        files.update(_written_question(course, item) if item.manual else
                     _quiz_question(course, item, draws, seed))
    files.update(_server_files(course, wheels, python))
    return files


def write(out: Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Write the course folder into `out` (refused when `out` holds anything), built beside it and moved
    in whole; grade.sh executable."""
    import os

    from ..errors import SubmissionError
    from ..outputs import staged_folder
    from ..paths import write_atomically
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SubmissionError(f"{out} already exists and is not an empty folder; remove it or choose another --out")
    with staged_folder(out, merge=True) as staged:  # the whole course folder, or nothing
        for name in sorted(files):
            path = staged / name
            write_atomically(path, files[name])
            if name.endswith(".sh"):
                os.chmod(path, 0o755)
    return [out / name for name in sorted(files)]
