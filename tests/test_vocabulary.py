"""One word per idea: a retired word (docs/architecture.md, "Glossary") stays out of the code,
the docs and the messages. Older command-line spellings are accepted as hidden aliases, and only
the lines that define them (or say how a stored file of an older format is read) may name them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Where the words are read: the package, the course, the model answers, the benchmarks and every doc.
SOURCES = [
    *sorted((ROOT / "grader").rglob("*.py")), *sorted((ROOT / "grader").rglob("*.json")),
    *sorted((ROOT / "exercises").rglob("*.py")), *sorted((ROOT / "exercises").rglob("*.yaml")),
    *sorted((ROOT / "benchmarks").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "docs").rglob("*.py")), ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / ".ci" / "run",
]

# A line that defines or reads an older name says so; PrairieLearn's own words are its own.
ALIAS_LINE = re.compile(r"older name|older names|older format|format 2|variant_seed|singleVariant|ALIAS")

RETIRED = {
    "fixtures (pytest's word; a seed's cases are prepared cases)": re.compile(r"^(?!.*pytest).*\bfixtures?\b", re.I),
    "variant (say seed, bug, draw or alternative)": re.compile(r"\bvariants?\b", re.I),
    "compiled / compile (a seed's cases are prepared, kept in the seed cache)":
        re.compile(r"(?<![.\w-])(?<!byte-)compiled?\b(?!\()", re.I),
    "the course folder called assignment or exercises":
        re.compile(r"assignment folder|packaged assignment|default assignment|locate_assignment|load_assignment|"
                   r"assignment_root|\bAssignment\b(?!\.md)|--exercises|MHA_EXERCISES|exercises folder"),
}

# The test's own table names the words; the glossary names them in its "not" column.
EXEMPT = {ROOT / "docs" / "architecture.md"}


def _hits(pattern: re.Pattern, path: Path) -> list[str]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if pattern.search(line) and not ALIAS_LINE.search(line):
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            found.append(f"{name}:{number}: {line.strip()[:120]}")
    return found


@pytest.mark.parametrize("word", sorted(RETIRED))
def test_a_retired_word_is_nowhere(word):
    """No line of the package, the course, the benchmarks or the docs uses a retired word."""
    pattern = RETIRED[word]
    hits = [hit for path in SOURCES if path.is_file() and path not in EXEMPT for hit in _hits(pattern, path)]
    assert hits == []


def test_the_check_finds_a_retired_word(tmp_path):
    """The check itself fails on a line that uses a retired word without defining an alias."""
    sample = tmp_path / "sample.py"
    sample.write_text('x = 1\nmessage = "the compiled assignment"\nfixtures = load()\nbug = "variant"\n'
                      'ALIAS = "variant"  # its older name\n')
    found = {word for word, pattern in RETIRED.items() if _hits(pattern, sample)}
    assert found == {w for w in RETIRED if not w.startswith("the course folder")}


def test_the_glossary_names_every_retired_word():
    """docs/architecture.md's glossary lists each retired word in its "not" column."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    glossary = text[text.index("## Glossary"):text.index("## Layout")]
    for word in ("fixtures", "variant", "compiled", "--exercises", "MHA_EXERCISES", "locate_assignment"):
        assert word in glossary, word
