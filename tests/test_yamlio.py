"""grader.course.yamlio: libyaml for text that cannot nest deeply, the pure-Python parser
otherwise, the same result either way."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import grader.course.yamlio
from grader.course.yamlio import MAX_FAST_NESTING, YList, YMap, _nesting_bound, line_of, load_yaml
from grader.errors import SpecError
from grader.grading.answers import read_answers

from .conftest import EXERCISES, ROOT, SOLUTIONS

QUIZ_IDS = ["distributions_one_head", "widen_values", "attention_budget", "pruning"]

MIXED = textwrap.dedent("""\
    # a comment: with - every [ indicator { in it ?
    title: "quoted: [not] {nested}"
    tolerance: 1e-6
    when: 2026-01-27
    defaults: &defaults
      rtol: 1.0e-9
      shape: [2, [3, 4]]
    cases:
    - name: first
      <<: *defaults
      args: {weights: [0.8, 0.2], values: [[1, 0], [0, 1]]}
    - - - x
        - y
      - z
    - ? complex
      : [a, {b: [c, d]}]
    folded: >
      two
      lines
    pairs: [a: 1, b: 2]
    again: *defaults
    """)

DOCUMENTS = {
    "block mappings nested 5 deep": "a:\n  b:\n    c:\n      d:\n        e: 1\n",
    "flow lists nested 7 deep": "[[[[[[[1]]]]]]]\n",
    "compact block sequences": "- - - - x\n",
    "flow mappings in flow lists": "[{a: [{b: [{c: d}]}]}]\n",
    "block sequence as a mapping value, not indented": "a:\n- b:\n  - c\n- - d\n",
    "single-pair mappings in a flow list": "[a: [b: [c: d]]]\n",
    "aliases chained": "a: &a [1]\nb: &b [*a]\nc: &c [*b]\nd: [*c, *c]\n",
    "merge key": "base: &b {x: {y: [1]}}\nderived:\n  <<: *b\n  z: 2\n",
    "explicit keys": "? a\n: ? b\n  : [c, [d]]\n",
    "a scalar": "just text\n",
    "mixed": MIXED,
}


def depth(node) -> int:
    """Levels of collections in a parsed document (a scalar is 0)."""
    if isinstance(node, dict):
        return 1 + max(map(depth, node.values()), default=0)
    if isinstance(node, list):
        return 1 + max(map(depth, node), default=0)
    return 0


def shape(node):
    """A parsed document with every YMap and YList line (of itself, its keys, its items) spelled out."""
    if isinstance(node, dict):
        assert isinstance(node, YMap)
        return ("map", line_of(node), [(k, line_of(node, k), shape(v)) for k, v in node.items()])
    if isinstance(node, list):
        assert isinstance(node, YList)
        return ("list", line_of(node), [line_of(node, i) for i in range(len(node))], [shape(v) for v in node])
    return type(node).__name__, node


def nested(rng: random.Random, levels: int):
    """A random document of plain keys and scalars, `levels` deep at most."""
    if levels == 0 or rng.random() < 0.2:
        return rng.choice([1, 2.5, "text", True, None])
    if rng.random() < 0.5:
        return [nested(rng, levels - 1) for _ in range(rng.randint(1, 3))]
    return {f"k{i}": nested(rng, levels - 1) for i in range(rng.randint(1, 3))}


def pure(monkeypatch) -> None:
    """From now on load_yaml uses the pure-Python parser for every text."""
    monkeypatch.setattr(grader.course.yamlio, "MAX_FAST_NESTING", -1)


class TestNestingBound:
    @pytest.mark.parametrize("name", sorted(DOCUMENTS))
    def test_bounds_the_depth_of_the_parsed_document(self, name, tmp_path):
        """The parsed document nests no deeper than _nesting_bound of its text."""
        text = DOCUMENTS[name]
        parsed = load_yaml(tmp_path / "a.yaml", text)
        assert depth(parsed) <= _nesting_bound(text)

    def test_depths_of_the_examples(self, tmp_path):
        """The examples nest as their names say, so the bound is checked on deep documents."""
        depths = {name: depth(load_yaml(tmp_path / "a.yaml", DOCUMENTS[name])) for name in DOCUMENTS}
        assert (depths["block mappings nested 5 deep"], depths["flow lists nested 7 deep"],
                depths["compact block sequences"], depths["aliases chained"], depths["a scalar"]) == (5, 7, 4, 5, 0)
        assert _nesting_bound("[[[[[[[1]]]]]]]\n") == 8 and _nesting_bound("- - - - x\n") == 5

    @pytest.mark.parametrize("style", [True, False, None])
    def test_bounds_random_documents_in_every_style(self, style, tmp_path):
        """200 random documents dumped in flow, block and mixed style: each reads back equal, within the bound."""
        rng = random.Random(20260127)
        for _ in range(200):
            data = nested(rng, rng.randint(1, 9))
            text = yaml.safe_dump(data, default_flow_style=style)
            parsed = load_yaml(tmp_path / "a.yaml", text)
            assert parsed == data
            assert depth(parsed) <= _nesting_bound(text), text


class TestParserChoice:
    def loaders(self, monkeypatch, text: str) -> tuple[list[str], object]:
        """The loaders load_yaml tries on `text`, in order, and what it returns (or raises)."""
        used, real = [], yaml.load
        monkeypatch.setattr(yaml, "load", lambda stream, Loader: used.append(Loader.__name__) or real(stream, Loader))
        try:
            return used, load_yaml(Path("answers.yaml"), text)
        except SpecError as exc:
            return used, str(exc)

    def test_text_within_the_bound_meets_libyaml_only(self, monkeypatch):
        """Text whose bound is MAX_FAST_NESTING is parsed once, by libyaml (when PyYAML has it)."""
        text = "a: '" + "-" * (MAX_FAST_NESTING - 2) + "'\n"
        assert _nesting_bound(text) == MAX_FAST_NESTING
        assert self.loaders(monkeypatch, text) == (["_FastLoader"], {"a": "-" * (MAX_FAST_NESTING - 2)})

    def test_text_that_could_nest_deeper_meets_only_the_pure_python_parser(self, monkeypatch):
        """One indicator more (the bound counts them, even in a string) and libyaml never sees the text."""
        text = "a: '" + "-" * (MAX_FAST_NESTING - 1) + "'\n"
        assert _nesting_bound(text) == MAX_FAST_NESTING + 1
        assert self.loaders(monkeypatch, text) == (["_Loader"], {"a": "-" * (MAX_FAST_NESTING - 1)})

    def test_invalid_text_is_parsed_again_for_the_message(self, monkeypatch):
        """libyaml's failure is not reported: the pure-Python parser parses the text again and says why."""
        assert self.loaders(monkeypatch, "a: [1, 2\nb: 3\n") == (
            ["_FastLoader", "_Loader"], "answers.yaml:2: invalid YAML: expected ',' or ']', but got ':'")


class TestSameResultBothWays:
    @pytest.mark.parametrize("path", [
        *sorted((EXERCISES / "problems").glob("*.yaml")), EXERCISES / "quiz.yaml", EXERCISES / "assignment.yaml",
        SOLUTIONS / "answers.yaml"], ids=lambda p: p.name)
    def test_shipped_files(self, path, monkeypatch):
        """Every shipped YAML file gives the same values, types and lines with libyaml and without."""
        text = path.read_text()
        fast = shape(load_yaml(path, text))
        pure(monkeypatch)
        assert shape(load_yaml(path, text)) == fast

    def test_mixed_document_with_anchors_merges_and_complex_keys(self, monkeypatch):
        """A document with every kind of collection gives the same values and lines both ways."""
        fast = load_yaml(Path("mixed.yaml"), MIXED)
        pure(monkeypatch)
        slow = load_yaml(Path("mixed.yaml"), MIXED)
        assert shape(slow) == shape(fast)
        assert fast["tolerance"] == 1e-6 and fast["cases"][0]["rtol"] == 1e-9
        assert (line_of(fast, "cases"), line_of(fast["cases"], 1), line_of(fast["cases"][2], "complex")) == (8, 12, 15)
        assert line_of(fast["cases"][1], 0) == 12 and line_of(fast["cases"][1][0], 1) == 13


class TestStudentAnswers:
    def sheet(self, tmp_path: Path, text: str):
        (tmp_path / "answers.yaml").write_text(text)
        return read_answers(tmp_path / "answers.yaml", QUIZ_IDS)

    @pytest.mark.parametrize("fast", [True, False])
    @pytest.mark.parametrize("text,error", [
        ("distributions_one_head: 1\nwiden_values: [a, b\npruning: a\n",
         "answers.yaml:3: invalid YAML: expected ',' or ']', but got ':'"),
        ("distributions_one_head: 1\nwiden_values: [a, b\n",
         "answers.yaml:3: invalid YAML: expected ',' or ']', but got '<stream end>'"),
        ("pruning: a\n\twiden_values: b\n",
         "answers.yaml:2: invalid YAML: found character '\\t' that cannot start any token"),
    ], ids=["unclosed bracket", "unclosed at the end", "tab"])
    def test_mistakes_are_reported_on_their_line(self, tmp_path, monkeypatch, text, error, fast):
        """Invalid YAML gives the same `answers.yaml:LINE: message` on both paths."""
        if not fast:
            pure(monkeypatch)
        sheet = self.sheet(tmp_path, text)
        assert (sheet.error, sheet.answers) == (error, {})

    @pytest.mark.parametrize("fast", [True, False])
    def test_a_duplicate_key_is_kept_with_its_lines(self, tmp_path, monkeypatch, fast):
        """An item answered twice is no error of the file: its lines are kept (it costs that item), on both paths."""
        if not fast:
            pure(monkeypatch)
        sheet = self.sheet(tmp_path, "distributions_one_head: 1\nwiden_values: a\nwiden_values: b\n")
        assert (sheet.error, sheet.duplicates) == (None, {"widen_values": (2, 3)})
        assert sheet.answers["distributions_one_head"] == 1

    def test_answers_and_their_lines(self, tmp_path):
        """Valid answers are read with the line of each."""
        sheet = self.sheet(tmp_path, "# my answers\ndistributions_one_head: 1\n\npruning: [a, c]\n")
        assert (sheet.error, sheet.answers, sheet.lines) == (
            None, {"distributions_one_head": 1, "pruning": ["a", "c"]}, {"distributions_one_head": 2, "pruning": 4})

    def test_deep_nesting_is_reported_not_a_crash(self, tmp_path):
        """`a: [[[...]]]` 30,000 deep (60 KiB, under the size limit), and 1,999 deep (which libyaml
        parses), each give 'answers.yaml is nested too deeply'; the Python reading them exits 0."""
        texts = {"pure": "a: " + "[" * 30000 + "]" * 30000, "fast": "[" * 1999 + "]" * 1999}
        assert len(texts["pure"].encode()) < 64 * 1024
        assert _nesting_bound(texts["fast"]) <= MAX_FAST_NESTING < _nesting_bound(texts["pure"])
        for name, text in texts.items():
            (tmp_path / name).mkdir()
            (tmp_path / name / "answers.yaml").write_text(text)
        code = ("import sys; from pathlib import Path; from grader.grading.answers import read_answers\n"
                "for folder in sys.argv[1:]:\n"
                "    print(read_answers(Path(folder) / 'answers.yaml', ['a']).error)\n")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "pure"), str(tmp_path / "fast")],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["answers.yaml is nested too deeply"] * 2


class TestAliasBudget:
    @pytest.mark.parametrize("text, message", [
        ("a: &a [1, 2, 3]\nb: [*a, *a]\n", None),
        ("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b]\n",
         "answers.yaml:2: its aliases stand for more than 100 values"),
        ("a: &a [1, *a]\n", "answers.yaml:1: an alias refers to a value that holds it"),
        ("? [1, [2, [3, [4, 5, 6, 7, 8]]]]\n: 1\n",
         "answers.yaml:1: a key must be a plain value, not a list or a mapping (got [1, [2, [...]]])"),
    ], ids=["within", "beyond", "self-reference", "list-key"])
    def test_student_yaml_within_a_value_budget(self, text, message):
        """Aliases standing for more values than the budget, or for themselves, are refused with
        their line before the document is built; a key that is a list is named in a few characters."""
        try:
            loaded, said = load_yaml(Path("answers.yaml"), text, max_values=100), None
        except SpecError as exc:
            loaded, said = None, str(exc)
        assert said == message
        if message is None:
            assert loaded == {"a": [1, 2, 3], "b": [[1, 2, 3], [1, 2, 3]]}


LAZY_PATTERN = textwrap.dedent("""\
    import json, re, sys
    from pathlib import Path
    if sys.argv[1] == "yaml first":
        import yaml
    from grader.course.yamlio import load_yaml
    from grader.errors import SpecError
    import yaml.reader
    pattern = yaml.reader.Reader.NON_PRINTABLE
    made_at_import = not hasattr(pattern, "_pattern") or pattern._pattern is not None
    real = re.compile(pattern._source if hasattr(pattern, "_source") else pattern.pattern)
    texts = ["plain", "tab\\t and newline\\n", "bell \\x07", "\\x85 next line", "\\ud800", "\\ufffe", "\\U0001F600", "del \\x7f"]
    spans = [[m.span() if m else None for m in (pattern.search(t), real.search(t))] for t in texts]
    try:
        load_yaml(Path("a.yaml"), "a: 1\\nb: c\\x07d\\n")
        message = None
    except SpecError as exc:
        message = str(exc)
    print(json.dumps([type(pattern).__name__, made_at_import, spans, message]))
""")


@pytest.mark.parametrize("order", ["grader first", "yaml first"])
def test_pyyaml_is_imported_without_compiling_its_unicode_pattern(order):
    """yamlio imports PyYAML with Reader.NON_PRINTABLE (every printable character of Unicode:
    5 ms of every cold start) made on first use; it finds what the real pattern finds, and a
    control character is still refused through it. PyYAML imported before the grader is left
    as it is. (If PyYAML changes that pattern, its import makes it at once again and this test says so.)"""
    done = subprocess.run([sys.executable, "-c", LAZY_PATTERN, order], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    kind, made_at_import, spans, message = json.loads(done.stdout)
    assert (kind, made_at_import) == (("PatternOnFirstUse", False) if order == "grader first" else ("Pattern", True))
    assert all(lazy == real for lazy, real in spans) and [s[0] is not None for s in spans] == [
        False, False, True, False, True, True, False, True]
    assert message is not None and "unacceptable character #x0007: special characters are not allowed" in message


def _same_tree(a, b) -> bool:
    """Equal, of the same types all the way down, with the same lines."""
    if type(a) is not type(b):
        return False
    if isinstance(a, YMap):
        return (a.line, a.key_lines, a.duplicates, list(a)) == (b.line, b.key_lines, b.duplicates, list(b)) \
            and all(_same_tree(a[k], b[k]) for k in a)
    if isinstance(a, YList):
        return (a.line, a.item_lines, len(a)) == (b.line, b.item_lines, len(b)) and all(map(_same_tree, a, b))
    return repr(a) == repr(b)


class TestKeptTrees:
    """A course file is parsed once: its tree is kept in the cache folder by its text and read
    back while the text is the same (yamlio._keep); student text is always parsed."""

    @pytest.fixture
    def cache(self, tmp_path, monkeypatch) -> Path:
        from grader.paths import CACHE_ENV
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
        return tmp_path / "cache" / grader.course.yamlio.KEPT_FOLDER

    @pytest.mark.parametrize("duplicates", [False, True])
    def test_every_shipped_file_reads_back_exactly_without_pyyaml(self, cache, monkeypatch, duplicates):
        files = sorted(EXERCISES.rglob("*.yaml"))
        parsed = [load_yaml(path, duplicates=duplicates) for path in files]
        assert len(list(cache.iterdir())) == len(files)
        monkeypatch.setattr(grader.course.yamlio, "_parse_yaml", lambda *a, **k: pytest.fail("parsed again"))
        for path, tree in zip(files, parsed):
            again = load_yaml(path, duplicates=duplicates)
            assert _same_tree(again, tree) and again is not tree, path

    def test_a_changed_file_is_parsed_again_and_a_damaged_tree_too(self, cache, tmp_path):
        path = tmp_path / "p.yaml"
        path.write_text(MIXED.split("when:")[0])
        first = load_yaml(path)
        path.write_text("title: changed\nlist: [1, 2.5, true, null]\n")
        assert load_yaml(path) == {"title": "changed", "list": [1, 2.5, True, None]}
        for kept in cache.iterdir():
            kept.write_text('{"m": 1, "k": [["title"')  # cut short
        assert load_yaml(path)["title"] == "changed"
        path.write_text(MIXED.split("when:")[0])
        assert _same_tree(load_yaml(path), first)

    def test_what_would_not_read_back_is_not_kept_and_still_reads(self, cache, tmp_path):
        path = tmp_path / "p.yaml"
        path.write_text("when: 2026-01-27\n")  # a date: not JSON
        assert str(load_yaml(path)["when"]) == "2026-01-27"
        bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, n in zip("abcdef", "bcdefg"))
        path.write_text(bomb)  # ten million values written out
        assert len(load_yaml(path)["g"]) == 10
        assert not cache.exists() or list(cache.iterdir()) == []

    def test_student_text_is_never_kept(self, cache, tmp_path):
        (tmp_path / "answers.yaml").write_text("distributions_one_head: b\n")
        sheet = read_answers(tmp_path / "answers.yaml", QUIZ_IDS)
        assert sheet.answers["distributions_one_head"] == "b"
        assert load_yaml(Path("answers.yaml"), "a: 1\n") == {"a": 1}
        assert not cache.exists() or list(cache.iterdir()) == []

    def test_kept_trees_are_private(self, cache):
        load_yaml(EXERCISES / "assignment.yaml")
        assert cache.stat().st_mode & 0o777 == 0o700
        assert [kept.stat().st_mode & 0o777 for kept in cache.iterdir()] == [0o600]
