"""The suite's own set-up (tests/conftest.py): the checkout byte-compiled when Python will not."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from .conftest import ROOT, byte_compile_checkout


def checkout_copy(tmp_path: Path) -> Path:
    """The checkout's two packages copied without their bytecode."""
    for name in ("grader", "exercises"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp_path


def compiled(root: Path) -> list[Path]:
    """The sources under `root` whose bytecode is where an import looks for it."""
    return [p for p in sorted(root.rglob("*.py")) if Path(importlib.util.cache_from_source(str(p))).is_file()]


class TestByteCompileCheckout:
    def test_compiles_every_module_when_python_writes_no_bytecode(self, tmp_path):
        """Imported from the checkout with bytecode writing off (PYTHONDONTWRITEBYTECODE), every
        module of both packages gets its .pyc, the course's code included."""
        root = checkout_copy(tmp_path)
        assert compiled(root) == []
        assert byte_compile_checkout(root, imported_from=root / "grader", python_writes=False) == ["grader", "exercises"]
        sources = sorted(root.rglob("*.py"))
        assert len(sources) > 100 and compiled(root) == sources
        assert root / "grader" / "sandbox" / "worker.py" in sources and root / "exercises" / "course.py" in sources

    def test_leaves_everything_alone_when_python_writes_it_or_the_grader_is_installed(self, tmp_path):
        """When Python writes bytecode as it imports, or the grader is imported from elsewhere (an
        installed wheel, compiled by pip), nothing is compiled."""
        root = checkout_copy(tmp_path)
        assert byte_compile_checkout(root, imported_from=root / "grader", python_writes=True) == []
        assert byte_compile_checkout(root, imported_from=tmp_path / "site-packages" / "grader", python_writes=False) == []
        assert compiled(root) == []
