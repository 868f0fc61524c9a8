"""Fresh virtual environments for the packaging and export tests, made lean.

A fresh venv gets no pip and no packages of its own (`--without-pip`); a `.pth` file makes it
see a folder of links to this environment's pip, numpy, PyYAML and click (and nothing else: not
this checkout, not the editable install). So `python -m pip install --no-deps X.whl` in it
installs X alone, and what X needs is already importable: no download, no numpy install.
Commands run with a clean pip configuration (no machine-wide index, find-links or
constraints), so what they install comes only from what the test names.
"""
from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution, distributions
from pathlib import Path

SHARED = ("pip", "numpy", "PyYAML", "click")
# Distributions a farm of every distribution (names=None) leaves out. rfc3987-syntax comes with
# Jupyter's packages (jupyter-events asks for jsonschema[format-nongpl]); jsonschema imports it
# when jsonschema itself is imported, only to check the "iri" and "iri-reference" formats, which
# no schema of nbformat, nbgrader, otter or Jupyter uses (tests/test_conftest.py). Importing it
# builds a Lark grammar: about 2.4 s of CPU in every otter, nbgrader and kernel process the tests
# start, some thirty of them a run.
LEFT_OUT = ("rfc3987-syntax",)


def link_farm(folder: Path, names=SHARED) -> Path:
    """`folder` with a link to each top-level entry (package, .libs, dist-info) of `names`
    (None: every distribution installed here except this grader and LEFT_OUT)."""
    folder.mkdir(parents=True, exist_ok=True)
    if names is None:
        chosen = [d for d in distributions()
                  if (d.metadata["Name"] or "").lower() not in ("mha-exercises", *LEFT_OUT)]
    else:
        chosen = [distribution(name) for name in names]
    for dist in chosen:
        site = Path(dist.locate_file(""))
        for top in sorted({Path(str(f)).parts[0] for f in dist.files or ()}):
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            target = site / top
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)
    return folder


def fresh_venv(path: Path, farm: Path) -> Path:
    """A venv at `path` (no pip of its own) that sees `farm`; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(purelib) / "_mha_test_shared.pth").write_text(f"{farm}\n")
    return python


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """os.environ without pip's settings and virtualenv markers, pip reading an empty config."""
    config = tmp / "pip.conf"
    config.write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("VIRTUAL_ENV", "PYTHONPATH", "MHA_COURSE")}
    env.update(PIP_CONFIG_FILE=str(config), PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env

