"""`mha check` on a submission with one mistake and everything else right fits on one screen:
at most 40 lines of at most 100 columns, the failing problem first, right problems and right
quiz answers one line for all. The whole output is compared with a checked-in golden file
(tests/golden/), after the submission's folder is replaced by <folder>.

When a deliberate change of the report's wording changes it, regenerate the file with
`MHA_REGENERATE_GOLDEN=1 python -m pytest tests/test_one_screen.py` and review the diff."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .conftest import SOLUTIONS

GOLDEN = Path(__file__).resolve().parent / "golden"
SCREEN_LINES, SCREEN_COLUMNS = 40, 100
SHIFT = "np.exp(x - x.max(axis=-1, keepdims=True))"


def _one_mistake(folder: Path) -> Path:
    """The model answer with its softmax left unshifted (it overflows on large scores), and the right answers."""
    source = (SOLUTIONS / "attention.py").read_text()
    assert source.count(SHIFT) == 1
    (folder / "attention.py").write_text(source.replace(SHIFT, "np.exp(x)"))
    shutil.copy(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
    return folder / "attention.py"


AXIS = ("np.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)",
        "np.exp(x - x.max(axis=0, keepdims=True))\n    return e / e.sum(axis=0, keepdims=True)")


def _wrong_axis(folder: Path) -> Path:
    """The model answer with its softmax over the first axis (every caller then fails too), and the right answers."""
    source = (SOLUTIONS / "attention.py").read_text()
    assert source.count(AXIS[0]) == 1
    (folder / "attention.py").write_text(source.replace(*AXIS))
    shutil.copy(SOLUTIONS / "answers.yaml", folder / "answers.yaml")
    return folder / "attention.py"


def _compare(name: str, out: str) -> None:
    path = GOLDEN / name
    if os.environ.get("MHA_REGENERATE_GOLDEN") == "1":
        path.write_text(out)
        raise AssertionError(f"{path} regenerated: review it and run again without MHA_REGENERATE_GOLDEN")
    assert out == path.read_text()


def test_one_mistake_fits_on_one_screen(cli, tmp_path):
    """An unshifted softmax, everything else right: the golden output, 40 lines at most, none over 100 columns."""
    submission = _one_mistake(tmp_path)
    result = cli("check", "--path", str(submission))
    assert result.exit_code == 1
    out = result.stdout.replace(str(tmp_path), "<folder>")
    lines = out.splitlines()
    assert len(lines) <= SCREEN_LINES, f"{len(lines)} lines"
    assert max(len(line) for line in lines) <= SCREEN_COLUMNS
    _compare("check_one_mistake.txt", out)


def test_the_failing_problem_comes_first(cli, tmp_path):
    """The summary starts with the failing problem; the right ones share one line, and so do the right answers."""
    result = cli("check", "--path", str(_one_mistake(tmp_path)))
    summary = result.stdout[result.stdout.index("\nSummary\n"):].splitlines()[2:]
    assert summary[0].startswith("  FAIL  softmax ")
    assert summary[1].startswith("  PASS  13 problems ") and summary[1].endswith("every case right")
    assert result.stdout.count("PASS") == 4  # the right problems twice (section, summary), the quiz twice
    assert "PASS  5 items right, 7 points: distributions_one_head, " in result.stdout


def test_a_helper_s_mistake_and_its_callers_fit_on_one_screen(cli, tmp_path):
    """softmax over the wrong axis, everything else right: softmax's block with its named mistake first,
    then one line for its caller that is right once softmax is fixed (no cases, no pictures):
    the golden output, 40 lines at most."""
    result = cli("check", "--path", str(_wrong_axis(tmp_path)))
    assert result.exit_code == 1
    out = result.stdout.replace(str(tmp_path), "<folder>")
    lines = out.splitlines()
    assert len(lines) <= SCREEN_LINES, f"{len(lines)} lines"
    assert max(len(line) for line in lines) <= SCREEN_COLUMNS
    assert "likely mistake (softmax-wrong-axis)" in out
    assert "right once your softmax is fixed" in out and "weights in" not in out
    _compare("check_softmax_axis.txt", out)
