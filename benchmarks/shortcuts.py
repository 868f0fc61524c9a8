"""What each of `mha`'s start-up and exit shortcuts (grader/cli/launch.py) saves on a cold
`mha grade`, measured in one run against `python -c "import numpy"`.

    python benchmarks/shortcuts.py [ROUNDS]      # default 21 rounds

Each mode is a fresh Python grading solutions/ (the seed cache filled beforehand), all of
them interleaved round by round, so load on a shared machine slows each alike. Printed for each:
the median wall time and the median CPU time (user + system of the process and of what it
reaped), both also as a fraction of `import numpy`'s in the same run.

  launch       as `mha` runs it: the zygote started before click and the CLI load, then the
               command, then what it made frozen (gc.freeze) and the process ended at once
               (launch._leave: the fork server stopped, the output flushed, os._exit)
  late-start   the zygote started after grader.cli.commands is imported, as a click callback would
  frozen-exit  gc.freeze, then a plain exit (the interpreter's teardown)
  plain-exit   neither: a plain exit
  secrets      `import secrets` first (what drawing the sandbox uid with it would load)
and two imports: `grader.cli.launch` alone and with `grader.cli.commands`; their difference is
what the early zygote start overlaps.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r'''
import gc, os, sys
mode = sys.argv.pop(1)
if mode == "secrets":
    import secrets
for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(name, "1")
gc.disable()
from grader.sandbox.spawn import prestart
if mode != "late-start":
    prestart()
from grader.cli.commands import main as cli
if mode == "late-start":
    prestart()
code = None
try:
    cli(prog_name="mha")
except SystemExit as exc:
    code = exc.code
if mode == "plain-exit":
    sys.exit(code)
gc.freeze()
if mode == "frozen-exit":
    sys.exit(code)
from grader.cli.launch import _leave
_leave(code)
'''
MODES = ("launch", "late-start", "frozen-exit", "plain-exit", "secrets")
CPU: dict[str, list[float]] = {}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _adopt_orphans() -> None:
    """Become a subreaper: a command that ends without waiting for its zygote (launch._leave)
    leaves it to whoever adopts it, here this process, so that its CPU time is counted too."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def run(name: str, args: list[str]) -> float:
    """Wall seconds of one command (its CPU seconds, and those of what it left to end, go to
    CPU[name]); fails loudly if it fails."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    _reap_all()
    CPU.setdefault(name, []).append(_cpu() - cpu)
    if done.returncode != 0:
        raise SystemExit(f"{name}: {' '.join(args)} exited with {done.returncode}:\n{done.stderr.decode()[-2000:]}")
    return wall


def main() -> None:
    _adopt_orphans()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    jobs = {"import numpy": [sys.executable, "-c", "import numpy"]}
    jobs.update({v: [sys.executable, "-c", DRIVER, v, "grade", "solutions", "--format", "json"] for v in MODES})
    jobs["import launch"] = [sys.executable, "-c", "import grader.cli.launch"]
    jobs["import launch+cli"] = [sys.executable, "-c", "import grader.cli.launch, grader.cli.commands"]
    for name, args in jobs.items():  # fill the seed cache, warm the page cache
        run(name, args)
    CPU.clear()
    wall: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(rounds):
        for name, args in jobs.items():
            wall[name].append(run(name, args))
    w = {name: statistics.median(t) * 1000 for name, t in wall.items()}
    c = {name: statistics.median(t) * 1000 for name, t in CPU.items()}
    print(f"{rounds} rounds, medians; fractions of `import numpy` in the same run")
    for name in jobs:
        print(f"{name:18} wall {w[name]:7.1f} ms ({w[name] / w['import numpy']:.2f}x)   "
              f"cpu {c[name]:6.1f} ms ({c[name] / c['import numpy']:.2f}x)")
    print("differences in CPU time, x numpy's import:")
    for label, a, b in (("teardown skipped (launch vs plain-exit)", "plain-exit", "launch"),
                        ("teardown skipped beyond gc.freeze (launch vs frozen-exit)", "frozen-exit", "launch"),
                        ("gc.freeze before a plain exit (frozen-exit vs plain-exit)", "plain-exit", "frozen-exit"),
                        ("secrets imported (secrets vs launch)", "secrets", "launch"),
                        ("what the early start overlaps (launch+cli vs launch)", "import launch+cli",
                         "import launch")):
        print(f"  {label}: {c[a] - c[b]:+.1f} ms ({(c[a] - c[b]) / c['import numpy']:+.2f}x)")
    print(f"  zygote started late (wall, late-start vs launch): {w['late-start'] - w['launch']:+.1f} ms")


if __name__ == "__main__":
    main()
