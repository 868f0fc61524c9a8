"""The documentation: a short README that reaches every guide, and links that resolve."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
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


# --- what the docs name exists: files, commands and their options -------------------------------

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
REPOSITORY_PATH = re.compile(r"(?<![\w./~$-])((?:grader|tests|exercises|docs|benchmarks|solutions)/[\w./<>*-]*)")
COMMAND = re.compile(r"(?<![\w/.$-])mha(?![\w/.-])([^`\n]*)")
SHELL_STOP = {"|", "||", "&", "&&", ";", ">", ">>", "<", "(", ")"}


def _code(text: str) -> list[str]:
    """The fenced blocks (their lines joined where a backslash continues them) and the inline code
    spans of a Markdown text."""
    blocks: list[str] = []

    def keep(match: re.Match) -> str:
        blocks.append(match.group(2).replace("\\\n", " "))
        return "\n" * match.group(0).count("\n")

    rest = FENCE.sub(keep, text)
    return blocks + [m.group(2) for m in SPAN.finditer(rest)]


def _wheel_sources() -> dict[str, str]:
    """Folders of the installed package that the checkout holds elsewhere (pyproject's package-dir:
    grader/_course is exercises/)."""
    line = next(x for x in (ROOT / "pyproject.toml").read_text().splitlines() if x.startswith("package-dir"))
    return {key.replace(".", "/"): value for key, value in re.findall(r'"([\w.]+)"\s*=\s*"([\w./-]+)"', line)}


def _path_exists(named: str) -> bool:
    """A path of the checkout, or of the installed package where package-dir maps it; a placeholder
    (`<id>`) or a glob must match at least one file."""
    path = named.rstrip(".")
    for package, source in _wheel_sources().items():
        if path == package or path.startswith(package + "/"):
            path = source + path[len(package):]
    pattern = re.sub(r"<[^>]*>", "*", path)
    if "*" in pattern:
        return any(ROOT.glob(pattern.rstrip("/")))
    return (ROOT / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_repository_path_a_page_names_exists(page):
    """A file or folder of the repository named in a code span, a fenced block or a link
    (grader/..., tests/..., exercises/..., docs/..., benchmarks/...) is there."""
    text = page.read_text()
    named = {p for code in _code(text) for p in REPOSITORY_PATH.findall(code)}
    named |= {(page.parent / t).resolve().relative_to(ROOT).as_posix() for t in _local_links(page)
              if (page.parent / t).resolve().is_relative_to(ROOT)
              and REPOSITORY_PATH.fullmatch((page.parent / t).resolve().relative_to(ROOT).as_posix())}
    missing = sorted(p for p in named if not _path_exists(p))
    assert missing == [], f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def _options(command: click.Command, ctx: click.Context) -> dict[str, click.Parameter]:
    """The documented option names of a command (an Aliased option's older names are not)."""
    from grader.cli.base import Aliased
    found: dict[str, click.Parameter] = {}
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            names = param.opts[:1] if isinstance(param, Aliased) else [*param.opts, *param.secondary_opts]
            found.update(dict.fromkeys(names, param))
    return found


def _words(line: str) -> list[str]:
    """A command line as the shell splits it, up to a comment; `<id>` placeholders are one word."""
    line = re.sub(r"<([\w-]+)>", r"\1", line)
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unclosed quote: the words as written
        return line.split("#", 1)[0].split()


def command_problem(words: list[str]) -> str | None:
    """Why `mha <words>` is not a command line of the CLI (None when it is): a command or
    sub-command that no group lists, or an option that the command (or `mha` itself, for its
    options that may follow a command) does not have."""
    from grader.cli.commands import main
    command: click.Command = main
    # main's own context settings (-h beside --help): click caches each command's help option on first
    # use, so a context without them would leave `mha ... -h` unknown for the tests that follow
    ctx = main.make_context("mha", [], resilient_parsing=True)
    root = _options(main, ctx)
    named = ["mha"]
    rest = iter(words)
    for word in rest:
        if word in SHELL_STOP or word == "...":
            break
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            param = _options(command, ctx).get(name)
            if param is None and name in main.global_options:
                param = root.get(name)
            if param is None:
                return f"`{' '.join(named)}` has no option {name}"
            if "=" not in word and isinstance(param, click.Option) and not (param.is_flag or param.count):
                for _ in range(param.nargs):
                    next(rest, None)
            continue
        if isinstance(command, click.Group):
            listed = command.list_commands(ctx)
            if word not in listed:
                return f"`{' '.join(named)}` has no command {word!r} (it has: {', '.join(listed)})"
            found = command.get_command(ctx, word)
            assert found is not None
            command, ctx = found, click.Context(found, info_name=word, parent=ctx)
            named.append(word)
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_and_option_a_page_names_exists(page):
    """Each `mha ...` in a code span or a fenced block names commands the CLI lists (lazy ones too,
    never a hidden older name) and options those commands have."""
    wrong = []
    for code in _code(page.read_text()):
        for line in code.splitlines():
            for match in COMMAND.finditer(line):
                problem = command_problem(_words(match.group(1)))
                if problem:
                    wrong.append(f"{match.group(0).split('#')[0].strip()}: {problem}")
    assert wrong == [], f"{page.relative_to(ROOT)}: {wrong}"


@pytest.mark.parametrize("line, problem", [
    ("grade SUB --format json --output r.json", None),
    ("--course DIR export qti --out q.zip --draws 5", None),
    ("grade SUB --course DIR | head -2", None),
    ("compile", "`mha` has no command 'compile'"),
    ("export nowhere", "`mha export` has no command 'nowhere'"),
    ("grade --colour", "`mha grade` has no option --colour"),
    ("export qti --variants 5", "`mha export qti` has no option --variants"),
])
def test_the_command_check_reads_the_cli(line, problem):
    """The check walks click's groups: it knows lazy commands and options that take a value, and
    refuses an unknown command, an unknown option and an older (hidden) name."""
    found = command_problem(_words(line))
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found


@pytest.mark.parametrize("path, exists", [
    ("grader/course/functions.py", True),
    ("grader/_course/reference.py", True),  # the wheel's name for exercises/reference.py
    ("exercises/problems/<id>.yaml", True),
    ("grader/attention/reference.py", False),
    ("exercises/problems/<id>.json", False),
])
def test_the_path_check_reads_the_checkout(path, exists):
    """A path is checked in the checkout (the wheel's folders mapped by package-dir); a placeholder
    must match a file."""
    assert _path_exists(path) is exists
