"""The suite's own set-up: the checkout byte-compiled when Python will not (tests/conftest.py), and
what the venvs of the export tests leave out (tests/_install.py)."""
from __future__ import annotations

import importlib.util
import re
import shutil
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path

from ._install import LEFT_OUT, link_farm
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


# a schema asking for a format that rfc3987-syntax checks: "format": "iri" (JSON), format: iri-reference (YAML)
IRI_FORMAT = re.compile(r"""["']?format["']?\s*:\s*["']?iri(-reference)?\b""")


class TestLeftOutOfTheFarm:
    def test_no_installed_schema_asks_for_a_format_the_left_out_distributions_check(self):
        """rfc3987-syntax only lets jsonschema check the "iri" and "iri-reference" formats: no JSON
        or YAML file of any distribution installed here (nbformat's, nbgrader's, otter's and
        Jupyter's schemas among them) asks for either, so leaving it out changes no validation."""
        scanned, found = 0, []
        for dist in distributions():
            for file in dist.files or ():
                if file.suffix in (".json", ".yaml", ".yml"):
                    path = Path(str(dist.locate_file(file)))
                    text = path.read_text(errors="replace") if path.is_file() else ""
                    scanned += 1
                    found += [f"{path}: {m.group(0)}" for m in IRI_FORMAT.finditer(text)]
        assert scanned > 20 and found == []
        assert IRI_FORMAT.search('{"type": "string", "format": "iri"}')  # the pattern finds what it looks for
        assert IRI_FORMAT.search("url:\n  format: iri-reference\n")

    def test_a_farm_of_everything_links_all_but_the_grader_and_the_left_out(self, tmp_path):
        """link_farm(names=None) links every distribution's top-level entries, jsonschema's among
        them, but not this grader's nor rfc3987-syntax's."""
        farm = link_farm(tmp_path / "farm", names=None)
        linked = {p.name for p in farm.iterdir()}
        assert {"numpy", "yaml", "click", "jsonschema"} <= linked
        assert "grader" not in linked and "exercises" not in linked
        for name in LEFT_OUT:
            try:
                tops = {Path(str(f)).parts[0] for f in distribution(name).files or ()}
            except PackageNotFoundError:
                continue
            assert tops and not tops & linked, (name, tops & linked)
