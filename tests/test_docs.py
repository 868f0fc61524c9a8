"""The documentation: a short README that reaches every guide, and links that resolve."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
GUIDES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "PYPI.md") + [
    ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]


def _local_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if "://" not in t]


def test_readme_is_at_most_150_lines():
    """README gets each reader started; the detail lives in the guides."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines"


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_guide_is_linked_from_readme(guide):
    """A guide nobody can reach from README is a guide nobody reads."""
    targets = {(ROOT / t).resolve() for t in _local_links(ROOT / "README.md")}
    assert guide.resolve() in targets, f"README.md does not link {guide.relative_to(ROOT)}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *GUIDES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    """Links between the guides (and to pictures) point at files that exist."""
    broken = [t for t in _local_links(page) if not (page.parent / t).exists()]
    assert broken == [], f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_package_index_page_links_nothing_relative():
    """docs/PYPI.md is shown on the package index, where a relative link leads nowhere."""
    assert _local_links(ROOT / "docs" / "PYPI.md") == []


TEST_REFERENCE = re.compile(r"(tests/\w+\.py)((?:::\w+)+)")


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_test_a_guide_names_exists(page):
    """A guide that says "tested by tests/x.py::TestY::test_z" names a test that is there: a claim of
    the security model stays tied to the test that holds it."""
    missing = []
    for file, names in TEST_REFERENCE.findall(page.read_text()):
        source = (ROOT / file).read_text() if (ROOT / file).is_file() else ""
        for name in names.strip(":").split("::"):
            if not re.search(rf"^\s*(?:class|def) {name}\b", source, re.M):
                missing.append(f"{file}::{name}")
    assert missing == [], f"{page.relative_to(ROOT)} names tests that do not exist: {missing}"
