"""Grade a made-up class of 16 and write docs/report.svg, the picture of the report in docs/instructors.md.

    python docs/demo_class.py

Each student is the model answers with a few classic bugs written in, sometimes with the last
problems left out, and some wrong quiz choices; a seeded random draw picks them, so the picture
is the same every time. The class is graded by `mha grade-all` like a real one; the picture
is its two plots, one above the other.
"""
from __future__ import annotations

import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bug name -> (text in solutions/attention.py, its replacement); how often students make it
BUGS = {
    "softmax over axis 0": (("max(axis=-1", "max(axis=0"), ("sum(axis=-1", "sum(axis=0")),
    "no 1/sqrt(d_k)": (("Q @ K.T / math.sqrt(d_k)", "Q @ K.T"),),
    "split without transpose": (("X.reshape(n, num_heads, d_model // num_heads).transpose(1, 0, 2)",
                                 "X.reshape(num_heads, n, d_model // num_heads)"),),
    "merge without transpose": (("H.transpose(1, 0, 2).reshape(n, h * d_head)", "H.reshape(n, h * d_head)"),),
    "count the value width": (("return num_layers * batch * num_heads * num_queries", "return d_v"),),
    "heads get full-width projections": (("weights = 4 * d_model * d_model", "weights = 4 * num_heads * d_model * d_model"),),
    "head looks at itself": (("W_K = np.eye(seq_len, k=1)", "W_K = np.eye(seq_len)"),),
}
RATE = {"softmax over axis 0": 0.25, "no 1/sqrt(d_k)": 0.4, "split without transpose": 0.3,
        "merge without transpose": 0.2, "count the value width": 0.35, "heads get full-width projections": 0.3,
        "head looks at itself": 0.15}
STUDENTS = 16


def make_class(folder: Path, rng: random.Random) -> None:
    source = (ROOT / "solutions" / "attention.py").read_text()
    answers = (ROOT / "solutions" / "answers.yaml").read_text().splitlines()
    for k in range(STUDENTS):
        student = folder / f"student{k + 1:02d}"
        student.mkdir(parents=True)
        code = source
        for bug, edits in BUGS.items():
            if rng.random() < RATE[bug] * (1 + k / STUDENTS):  # later students are weaker
                for old, new in edits:
                    if old not in code:
                        raise SystemExit(f"{bug}: {old!r} is not in solutions/attention.py any more")
                    code = code.replace(old, new)
        if rng.random() < 0.2:  # ran out of time: the last four problems are missing
            code = code[:code.index("def predict_shapes(")]
        student.joinpath("attention.py").write_text(code)
        lines = [line.replace(": a", ": b", 1) if ": a" in line and rng.random() < 0.3 else line for line in answers]
        student.joinpath("answers.yaml").write_text("\n".join(lines) + "\n")


def stacked(svgs: list[str]) -> str:
    """One SVG holding `svgs` one above the other, as wide as the widest."""
    sizes = [tuple(float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups()) for svg in svgs]
    width, height, y, parts = max(w for w, _ in sizes), sum(h for _, h in sizes), 0.0, []
    for svg, (_, h) in zip(svgs, sizes):
        parts.append(svg.strip().replace("<svg ", f'<svg y="{y:g}" ', 1))
        y += h
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" width="{width:g}" '
            f'height="{height:g}">' + "".join(parts) + "</svg>\n")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mha-demo-") as tmp:
        make_class(Path(tmp) / "class", random.Random(5))
        out = Path(tmp) / "graded"
        subprocess.run([sys.executable, "-m", "grader", "--course", str(ROOT / "exercises"), "grade-all",
                        str(Path(tmp) / "class"), "--out", str(out), "--jobs", "2"], check=True)
        svgs = [(out / "plots" / name).read_text() for name in ("score_histogram.svg", "misconceptions.svg")]
    target = ROOT / "docs" / "report.svg"
    target.write_text(stacked(svgs))
    print(f"{target}: {target.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
