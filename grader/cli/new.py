"""`mha new course DIR`: start a course that validates; `mha new problem ID`: scaffold a problem on a new
function of the course."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click

from ..course import placeholders
from ..errors import GraderError, SubmissionError
from .base import CONTEXT, Group, fail
from .commands import Ctx

# The placeholders {title}, {prompt}, {doc} and {mark} are filled from course/placeholders.py, which
# `mha validate` recognises them by: it refuses each until it is written.
PROBLEM = """\
id: {id}
title: {title}
points: 10
function:
  signature: {id}(x) -> ndarray
  params: {{x: array}}        # array | mask | int | bool
  returns: array             # array | int | shapes | head | head_pair | [name, ...] for a tuple of arrays
prompt: |
  {prompt}
mistakes: []                 # {{id, message, bug: a wrong function of {code}}}
cases:
  - name: worked example
    visibility: public
    args: {{x: [1.0, 2.0, 3.0]}}
  - name: random input
    visibility: hidden
    args:
      x: {{random: normal, shape: [4, 3]}}
"""

REFERENCE = '''

def {id}(x):
    """{doc}"""
    x = np.asarray(x, dtype=np.float64)
    return x.copy()  # {mark}: replace with the real computation
'''

STUB = '''

def {id}(x):
    """{doc}"""
    raise NotImplementedError("{id}: not implemented yet (see `mha show {id}`)")
'''


@click.group(cls=Group, context_settings=CONTEXT)
def new() -> None:
    """Start a course, or scaffold a problem in one.

    \b
    Example:
      mha new course my-course && cd my-course
      mha new problem attention_entropy
    """


@new.command(context_settings=CONTEXT)
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--title", default=None, help="The course's title (default: from the folder's name).")
def course(folder: Path, title: str | None) -> None:
    """Start a course in DIR (new or empty): assignment.yaml, one worked problem (softmax) with
    its reference in course.py, the instructor's attention.py stub, and course.yaml with a fresh
    course secret, so each student gets numbers of their own. It passes `mha validate` as it is.

    \b
    Example:
      mha new course my-course --title "Attention, week 3"
    """
    try:
        written = start_course(folder, title)
    except GraderError as exc:
        fail(exc)
    click.echo(f"started the course {folder} ({len(written)} files); next: cd {folder} && mha validate")


@new.command(context_settings=CONTEXT)
@click.argument("problem_id", metavar="ID")
@click.pass_obj
def problem(obj: Ctx, problem_id: str) -> None:
    """Scaffold a problem on a new function ID: problems/ID.yaml (with its `function:` block),
    the reference function in the course's code, a stub in attention.py in the course folder,
    and ID listed in assignment.yaml. Edit them, then `mha validate`.

    \b
    Example:
      mha --course my-course new problem attention_entropy
    """
    root, reason = obj.located
    try:
        if reason == "packaged":  # never the course installed with the package
            raise SubmissionError("no course here: start one with `mha new course DIR`, then run this in DIR "
                                  "(or give its folder with --course DIR)")
        written = scaffold(root, problem_id)
    except GraderError as exc:
        fail(exc)
    click.echo("wrote " + ", ".join(str(p) for p in written) + "; next: edit them, then `mha validate`")


def scaffold(root: Path, problem_id: str) -> list[Path]:
    """Write the problem, reference and stub of `problem_id` into the course at `root`; returns the files changed."""
    from ..course.code import CODE_KEY
    from ..course.fields import load_mapping
    from ..paths import SUBMISSION_NAME
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", problem_id):
        raise SubmissionError(f"{problem_id!r}: a problem id is a Python function name in lower case, like "
                              "attention_entropy")
    root = Path(root)
    listing = root / "assignment.yaml"
    if not listing.is_file():  # a course from nothing: its course.yaml too
        root.mkdir(parents=True, exist_ok=True)
        listing.write_text(f"title: {root.resolve().name}\n{CODE_KEY}: course.py\nproblems: []\n", encoding="utf-8")
    problem_file = root / "problems" / f"{problem_id}.yaml"
    if problem_file.exists():
        raise SubmissionError(f"{problem_file} already exists: nothing was written")
    text = listing.read_text(encoding="utf-8")
    node = load_mapping(listing, "assignment.yaml")
    code_name = node.get(CODE_KEY, "course.py")
    code = root / str(code_name)
    if code.is_file() and re.search(rf"^def {problem_id}\(", code.read_text(encoding="utf-8"), re.M):
        raise SubmissionError(f"{code} already defines {problem_id}(): nothing was written")
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if re.match(r"^problems:\s*(\[\s*\])?\s*(#.*)?$", line)), None)
    if header is None or not isinstance(node.get("problems"), list):
        raise SubmissionError(f"{listing}: add a 'problems:' list first (nothing was written)")
    end = header + 1
    while end < len(lines) and re.match(r"^\s+-\s", lines[end]):
        end += 1
    lines[header] = "problems:"
    lines.insert(end, "  - " + problem_id)
    if CODE_KEY not in node:
        lines.insert(0, f"{CODE_KEY}: {code_name}")
    problem_file.parent.mkdir(exist_ok=True)
    problem_file.write_text(PROBLEM.format(id=problem_id, code=code_name, title=placeholders.TITLE,
                                           prompt=placeholders.PROMPT), encoding="utf-8")
    start = "" if code.is_file() else '"""The course\'s own code: references, named mistakes, quiz answer functions."""\n' \
                                       "import numpy as np\n"
    if not _binds_np((code.read_text(encoding="utf-8") if code.is_file() else "") + start):
        start += "\nimport numpy as np  # the reference below needs it; this module binds no `np` of its own\n"
    with open(code, "a", encoding="utf-8") as handle:
        handle.write(start + REFERENCE.format(id=problem_id, doc=placeholders.REFERENCE_DOC.format(id=problem_id),
                                               mark=placeholders.MARK))
    listing.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stub_file = root / SUBMISSION_NAME
    with open(stub_file, "a", encoding="utf-8") as handle:
        handle.write(STUB.format(id=problem_id, doc=placeholders.STUB_DOC))
    return [problem_file, code, stub_file, listing]


def _binds_np(source: str) -> bool:
    """Whether the module `source` binds `np` at top level itself (a star import may or may not, so
    it does not count); a module that cannot be parsed counts as binding nothing."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                any((alias.asname or alias.name.split(".")[0]) == "np" for alias in node.names):
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "np" for t in targets):
                return True
    return False
# ------------------------------------------------------------------ a course from nothing

COURSE_ASSIGNMENT = """\
title: {title}
code: course.py
problems:
  - softmax
"""

COURSE_PROBLEM = """\
id: softmax
title: A numerically stable softmax
points: 10
function:
  signature: softmax(scores) -> ndarray
  params: {scores: array}
  returns: array
prompt: |
  Attention turns a row of raw scores into weights that are non-negative and add up to 1:

      softmax(s)_j = exp(s_j) / (exp(s_1) + ... + exp(s_T))

  Worked example: the scores [1, 2, 3] become [0.090, 0.245, 0.665].

  **Task.** Implement `softmax(scores)` for an array of any shape: every slice along the last
  axis becomes a probability distribution. It must stay finite for scores as large as 1e4
  (subtract each row's largest score first: softmax is unchanged by a shift).
hints:
  - Reduce along the last axis with keepdims=True, so the result broadcasts against every row.
mistakes:
  - id: softmax-overflow
    message: >-
      exp of a large score overflows to inf, and inf / inf is nan. Subtract each row's maximum
      before exp: softmax is unchanged by a shift.
    bug: softmax_without_max
cases:
  - name: worked example
    visibility: public
    args: {scores: [1, 2, 3]}
    expect: [0.09003057, 0.24472847, 0.66524096]
  - name: one distribution per row
    visibility: public
    args: {scores: [[0, 1, 2], [3, 3, 3], [5, 0, -5]]}
  - name: huge scores
    visibility: hidden
    args: {scores: {random: normal, shape: [4, 6], scale: 1.0e+4}}
"""

COURSE_CODE = '''"""The course's own code: the reference of every graded function, and the named mistakes
(known-wrong implementations) its problems' `mistakes[].bug` name."""
import numpy as np


def softmax(scores):
    """Softmax along the last axis, shifted by each row's maximum so nothing overflows."""
    scores = np.asarray(scores, dtype=np.float64)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_without_max(scores):
    """The mistake softmax-overflow: no shift, so exp overflows for large scores."""
    e = np.exp(np.asarray(scores, dtype=np.float64))
    return e / e.sum(axis=-1, keepdims=True)
'''

COURSE_STUB = '''"""Your implementations. Replace each `raise NotImplementedError(...)` with your code, then
run `mha check` for feedback; `mha show PROBLEM` prints the full task."""
import numpy as np


def softmax(scores):
    """Softmax along the last axis (see `mha show softmax`)."""
    raise NotImplementedError("softmax: not implemented yet (see `mha show softmax`)")
'''

COURSE_GITIGNORE = """\
# The course secret, and what a course folder holds but never ships (releases, submissions, reports)
course.yaml
dist/
submissions/
graded/
__pycache__/
"""


def start_course(folder: Path, title: str | None = None) -> list[Path]:
    """Write a course that validates into `folder` (new or empty); returns the files written.
    SubmissionError when `folder` holds anything: nothing is written then."""
    import json
    import os
    import secrets

    from ..paths import write_atomically
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise SubmissionError(f"{folder} already exists and is not an empty folder: start the course in a new one")
    name = folder.resolve().name
    title = (title or name.replace("-", " ").replace("_", " ").strip().capitalize() or "My course").strip()
    if "\n" in title:
        raise SubmissionError("--title must be one line")
    files = {
        "assignment.yaml": COURSE_ASSIGNMENT.format(title=json.dumps(title)),
        "problems/softmax.yaml": COURSE_PROBLEM,
        "course.py": COURSE_CODE,
        "attention.py": COURSE_STUB,
        ".gitignore": COURSE_GITIGNORE,
        "course.yaml": f"# Keep this file private: it picks each student's numbers.\n"
                       f"secret: {secrets.token_urlsafe(24)}\n",
    }
    written = []
    for relative, text in files.items():
        path = folder / relative
        write_atomically(path, text, mode=0o600 if relative == "course.yaml" else None)
        written.append(path)
    os.chmod(folder / "course.yaml", 0o600)
    return written
