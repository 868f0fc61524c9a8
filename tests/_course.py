"""A course built from nothing, outside the repository: one problem on a function of its own
(attention_entropy), its reference, a named mistake, and a numeric quiz item with an answer
function. Shared by tests/test_course.py (in-process) and tests/test_packaging.py (the wheel);
fill_placeholders writes what `mha new problem` leaves as placeholders (tests/test_validate_all.py)."""
from __future__ import annotations

import textwrap
from pathlib import Path

ASSIGNMENT = """\
title: Attention entropy
code: entropy_course.py
quiz: quiz.yaml
problems:
  - attention_entropy
"""

CODE = '''\
"""The entropy course's own code: reference, named mistake, quiz answer."""
import numpy as np


def attention_entropy(weights):
    """Entropy in nats of each attention row: (..., T) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    return -(w * np.log(np.where(w > 0, w, 1.0))).sum(axis=-1)  # 0 log 0 = 0


def entropy_in_bits(weights):
    """The same entropy with log base 2 (a known-wrong answer)."""
    return attention_entropy(weights) / np.log(2)


def uniform_entropy(T):
    """Entropy of a uniform row over T positions."""
    return float(np.log(T))
'''

PROBLEM = """\
id: attention_entropy
title: How spread out is an attention row
points: 4
function:
  signature: attention_entropy(weights) -> ndarray
  params: {weights: array}
  returns: array
prompt: |
  Return the entropy, in nats, of each row of `weights` (the last axis sums to 1).
mistakes:
  - id: entropy-in-bits
    message: You used log base 2; the entropy here is in nats (natural log).
    bug: entropy_in_bits
cases:
  - name: uniform row
    visibility: public
    args: {weights: [[0.25, 0.25, 0.25, 0.25]]}
  - name: peaked rows
    visibility: public
    args: {weights: [[0.7, 0.1, 0.1, 0.1], [0.5, 0.5, 0.0, 0.0]]}
  - name: random rows
    visibility: hidden
    args:
      weights: {random: simplex, shape: [3, 5]}
"""

QUIZ = """\
title: Entropy quiz
items:
  - id: uniform_row
    title: A uniform row
    kind: numeric
    points: 1
    visibility: public
    params: {T: {choice: [2, 4, 8]}}
    prompt: What is the entropy, in nats, of a uniform row over {T} positions?
    answer: uniform_entropy
    tolerance: 0.001
    feedback: A uniform row over T positions has entropy log T.
"""

CORRECT = '''\
import numpy as np


def attention_entropy(weights):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -(w * np.log(safe)).sum(axis=-1)
'''

BUGGY = CORRECT.replace("np.log(safe)", "np.log2(safe)")


def build_course(folder: Path) -> Path:
    """Write the entropy course into `folder` (created); returns it."""
    (folder / "problems").mkdir(parents=True)
    (folder / "assignment.yaml").write_text(ASSIGNMENT)
    (folder / "entropy_course.py").write_text(CODE)
    (folder / "problems" / "attention_entropy.yaml").write_text(PROBLEM)
    (folder / "quiz.yaml").write_text(QUIZ)
    return folder


def write_submission(folder: Path, source: str, answer: float | None) -> Path:
    """A student's folder: attention.py and, with `answer`, answers.yaml."""
    folder.mkdir(parents=True)
    (folder / "attention.py").write_text(textwrap.dedent(source))
    if answer is not None:
        (folder / "answers.yaml").write_text(f"uniform_row: {answer}\n")
    return folder


def replace_once(path: Path, old: str, new: str) -> None:
    """Replace the first `old` in the file at `path` by `new`; `old` must be there."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def fill_placeholders(root: Path, problem_id: str) -> None:
    """Write what `mha new problem` left as placeholders: the title, the prompt, the reference and the stub."""
    replace_once(root / "problems" / f"{problem_id}.yaml", "title: TODO a short title", "title: A copy of x")
    replace_once(root / "problems" / f"{problem_id}.yaml", "  TODO what the student computes, with a worked example.",
                 "  Return a float64 copy of x: [1, 2] gives [1.0, 2.0].")
    code = root / "course.py"
    replace_once(code, f'"""TODO what {problem_id} computes', f'"""A float64 copy of x ({problem_id})')
    replace_once(code, "return x.copy()  # placeholder from `mha new problem`: replace with the real computation",
                 "return x.copy()")
    replace_once(root / "attention.py", '"""TODO what the student writes."""', '"""Return a float64 copy of x."""')
