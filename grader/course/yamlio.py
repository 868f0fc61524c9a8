"""Safe YAML reading that remembers line numbers, rejects duplicate keys and reads 1e-6 as a float."""
from __future__ import annotations

import importlib
import itertools
import os
import re
import reprlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SpecError

# yaml.reader compiles, as it is imported, a character class of every printable character of
# Unicode (Reader.NON_PRINTABLE): about 5 ms, two fifths of PyYAML's import and a twentieth of a
# cold `mha grade`. Only PyYAML's pure-Python reader uses it, which reads a file only when libyaml
# cannot (a file that could nest too deeply for it, or one it rejects, to say where): it is
# made the first time it is used instead. Any other pattern is made as usual.
_PYYAML_NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"


class PatternOnFirstUse:
    """A regular expression made (re.compile) when one of its methods is first looked up."""

    __slots__ = ("_source", "_pattern")

    def __init__(self, source: str):
        self._source = source
        self._pattern: re.Pattern | None = None

    def __getattr__(self, name: str):
        pattern = self._pattern
        if pattern is None:
            pattern = self._pattern = re.compile(self._source)
        return getattr(pattern, name)


def _import_yaml():
    if "yaml" not in sys.modules:
        real = re.compile

        def compile_(pattern, flags=0):
            return PatternOnFirstUse(pattern) if pattern == _PYYAML_NON_PRINTABLE and flags == 0 else real(pattern, flags)
        re.compile = compile_  # type: ignore[assignment]
        try:
            return importlib.import_module("yaml")
        finally:
            re.compile = real
    return sys.modules["yaml"]


if TYPE_CHECKING:
    import yaml
else:
    yaml = _import_yaml()  # the package's one import of PyYAML: `from ..course.yamlio import yaml`


class YMap(dict):
    """A YAML mapping that knows the (1-based) line of itself and of each key, and (read with
    `duplicates=True`) the lines of each key written more than once, whose first value it keeps."""

    line: int = 0
    key_lines: dict
    duplicates: dict  # key -> every line it is on


class YList(list):
    """A YAML sequence that knows the (1-based) line of itself and of each item."""

    line: int = 0
    item_lines: list


class _DuplicateKey(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(line, message)
        self.line, self.message = line, message


class _TooManyValues(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(line, message)
        self.line, self.message = line, message


class BriefRepr(reprlib.Repr):
    """reprlib that also cuts the line-tracking containers short (the built-in repr of a list
    built from aliases writes out every repetition, so an alias bomb would be expanded in full)."""

    def repr_YList(self, obj, level):
        return self.repr_list(obj, level)

    def repr_YMap(self, obj, level):
        return self.repr_dict(obj, level)


_brief_repr = BriefRepr()
_brief_repr.maxstring, _brief_repr.maxother, _brief_repr.maxlist, _brief_repr.maxdict = 40, 40, 4, 4
_brief_repr.maxlevel = 2


def brief(value: object) -> str:
    """A repr of parsed YAML of at most a few dozen characters, however large the value."""
    return _brief_repr.repr(value)


class _Loader(yaml.SafeLoader):
    """SafeLoader with line-tracking containers; constructs no Python objects beyond plain data."""


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's loader where PyYAML has it
    """The same with libyaml's parser (five times faster)."""


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> YMap:
    loader.flatten_mapping(node)
    result = YMap()
    result.line = node.start_mark.line + 1
    result.key_lines, result.duplicates = {}, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            duplicate = key in result
        except TypeError:  # an unhashable key such as a list
            raise _DuplicateKey(line, f"a key must be a plain value, not a list or a mapping (got {brief(key)})") \
                from None
        if duplicate and getattr(loader, "keep_duplicates", False):
            result.duplicates.setdefault(key, [result.key_lines[key]]).append(line)
            continue
        if duplicate:
            raise _DuplicateKey(line, f"duplicate key {brief(key)}")
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> YList:
    result = YList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


MAX_INT_CHARS = 40  # an integer written longer stays text: int() of 4,300 digits fails, and is slow well before


def _construct_int(loader: _Loader, node: yaml.ScalarNode):
    """A YAML integer, or its text when it is too long to be a sensible number (student data:
    `answer: 1111...` with 5,000 digits must cost that answer, not crash the grader)."""
    text = loader.construct_scalar(node)
    if len(text.replace("_", "").lstrip("+-")) > MAX_INT_CHARS:
        return text
    return yaml.SafeLoader.construct_yaml_int(loader, node)


for _cls in (_Loader, _FastLoader):
    _cls.add_constructor("tag:yaml.org,2002:int", _construct_int)
    # YAML 1.1 (PyYAML) reads 1e-6 as a string; instructors write tolerances that way, so accept it.
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)?\.?[0-9]*[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )
    _cls.add_constructor("tag:yaml.org,2002:map", _construct_map)
    _cls.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


MAX_FAST_NESTING = 2000  # libyaml composes 10,000 levels safely here and crashes at 100,000


def _nesting_bound(text: str) -> int:
    """An upper bound on how deeply `text` can nest: every level is opened by a `[`, `{`, `-`,
    `?` or `:` of its own (block collections included), so there are at most that many levels."""
    return sum(text.count(c) for c in "[{-?:") + 1


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many values `root` stands for with every alias written out (at most `limit`: beyond it,
    or for an alias inside its own anchor, _TooManyValues). Each distinct node is visited once,
    so this costs the size of the text, not of the expansion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # visited, not finished: the path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) \
            else node.value if isinstance(node, yaml.SequenceNode) else []
        if finished:
            open_nodes.discard(id(node))
            sizes[id(node)] = size = 1 + sum(sizes[id(child)] for child in children)
            if size > limit:
                raise _TooManyValues(node.start_mark.line + 1, f"its aliases stand for more than {limit} values")
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            raise _TooManyValues(node.start_mark.line + 1, "an alias refers to a value that holds it")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _load(text: str, loader_class, max_values: int | None, duplicates: bool = False):
    """yaml.load, with the composed document's expanded size checked before it is built."""
    if max_values is None and not duplicates:
        return yaml.load(text, Loader=loader_class)  # noqa: S506 - both loaders are SafeLoaders
    loader = loader_class(text)
    loader.keep_duplicates = duplicates
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if max_values is not None:
            _expanded_size(node, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


# ------------------------------------------------ the parsed course files, kept for the next run

KEPT_FOLDER = "yaml"     # in the cache folder (paths.cache_dir): a course file's parsed tree, by its text
KEPT_FORMAT = 1
KEPT_LIMIT = 2000        # files kept at most (each a few kilobytes); past that the oldest half goes


def _kept_name(text: str, duplicates: bool) -> str:
    """The kept tree's file name: the text's length and two checksums of it (zlib's: hashlib would
    load OpenSSL), the reading's options, and what else shapes the tree (this file, PyYAML)."""
    import zlib
    data = text.encode("utf-8", "surrogatepass")
    try:
        own = Path(__file__).stat()
        code = f"{own.st_size}-{own.st_mtime_ns}"
    except OSError:
        code = "?"
    version = f"{KEPT_FORMAT}-{yaml.__version__}-{code}-{int(duplicates)}".encode()
    return f"{len(data):x}-{zlib.crc32(data):08x}-{zlib.adler32(data):08x}-{zlib.crc32(version):08x}.json"


KEPT_VALUES = 1 << 18  # values in a kept tree at most (an alias repeats its value in the JSON)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_tree(node, budget: list[int] | None = None) -> object:
    """A parsed tree as JSON: a mapping as {"m": line, "k": [[key, line, value]...], "d": [[key,
    lines]...]}, a sequence as {"l": line, "i": item lines, "v": values}; TypeError for anything
    that would not read back as it is (a date, bytes, a set...) or a tree of more than KEPT_VALUES
    values written out. (Plain values are written where they stand: a call for each of the
    thousands in a course would cost more than the parse saved.)"""
    budget = [KEPT_VALUES] if budget is None else budget
    kind = type(node)
    if kind in _SCALARS:
        return node
    plain = _SCALARS
    if kind is YMap:
        budget[0] -= 2 * len(node) + len(node.duplicates) + 1
        if budget[0] < 0:
            raise TypeError("too large to keep")
        lines = node.key_lines
        return {"m": node.line,
                "k": [[k if type(k) in plain else _plain_tree(k, budget), lines[k],
                       v if type(v) in plain else _plain_tree(v, budget)] for k, v in node.items()],
                "d": [[k if type(k) in plain else _plain_tree(k, budget), list(at)] for k, at in node.duplicates.items()]}
    if kind is YList:
        budget[0] -= len(node) + 1
        if budget[0] < 0:
            raise TypeError("too large to keep")
        return {"l": node.line, "i": list(node.item_lines),
                "v": [v if type(v) in plain else _plain_tree(v, budget) for v in node]}
    raise TypeError(f"a {kind.__name__} is not kept")


def _tree(data) -> object:
    """The parsed tree `_plain_tree` wrote."""
    if type(data) is not dict:
        return data
    if "m" in data:
        result = YMap()
        result.line, lines, result.duplicates = data["m"], {}, {}
        for key, line, value in data["k"]:
            if type(key) is dict:
                key = _tree(key)
            result[key] = _tree(value) if type(value) is dict else value
            lines[key] = line
        result.key_lines = lines
        for key, at in data["d"]:
            result.duplicates[_tree(key)] = list(at)
        return result
    items = YList(_tree(v) if type(v) is dict else v for v in data["v"])
    items.line, items.item_lines = data["l"], list(data["i"])
    return items


def _kept_folder() -> Path | None:
    from ..paths import cache_dir
    base = cache_dir()
    return base / KEPT_FOLDER if base is not None else None


def _read_kept(text: str, duplicates: bool):
    """The tree kept for this very text, or _NOT_KEPT."""
    folder = _kept_folder()
    if folder is None:
        return _NOT_KEPT
    try:
        import json
        return _tree(json.loads((folder / _kept_name(text, duplicates)).read_bytes()))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # none yet, or damaged: parsed again
        return _NOT_KEPT


def _keep(text: str, duplicates: bool, tree) -> None:
    """Keep the parsed tree of `text` (in the grader user's 0700 cache folder: a problem file holds
    hidden cases); nothing is kept when it cannot be, and grading never needs it. The folder is
    made private (and pruned) once per process; each tree is written to a new file of its own,
    then renamed into place, so a reader never sees half of one."""
    folder = _kept_folder()
    if folder is None:
        return
    try:
        import json
        data = json.dumps(_plain_tree(tree), separators=(",", ":")).encode()
        if folder not in _READY:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
            if len(names := os.listdir(folder)) > KEPT_LIMIT:
                paths = sorted((folder / name for name in names), key=lambda p: p.stat().st_mtime_ns)
                for old in paths[:len(paths) // 2]:
                    old.unlink(missing_ok=True)
            _READY.add(folder)
        name = _kept_name(text, duplicates)
        temporary = folder / f".{name}.{os.getpid()}.{next(_WRITES)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, folder / name)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except (OSError, TypeError, ValueError, RecursionError):
        pass


_READY: set[Path] = set()  # kept-tree folders made private (and pruned) by this process
_WRITES = itertools.count()
_NOT_KEPT = object()


def load_yaml(path: Path, text: str | None = None, *, max_values: int | None = None, duplicates: bool = False):
    """Parse one YAML file; every failure is a SpecError with the file and line.

    A course's file (read here from `path`, no `max_values`) is parsed once: its tree is kept in
    the cache folder by its text (`_keep`), and read back from there while the text is the same,
    about a tenth of the time PyYAML takes to build it. Text handed in (a student's answers) is
    always parsed."""
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(str(path), None, f"cannot read file ({exc.__class__.__name__}: {exc})") from None
        if max_values is None:
            kept = _read_kept(text, duplicates)
            if kept is not _NOT_KEPT:
                return kept
            tree = _parse_yaml(path, text, max_values=None, duplicates=duplicates)
            _keep(text, duplicates, tree)
            return tree
    return _parse_yaml(path, text, max_values=max_values, duplicates=duplicates)


def _parse_yaml(path: Path, text: str, *, max_values: int | None = None, duplicates: bool = False):
    """Parse one YAML file; every failure is a SpecError with the file and line.

    The text (the file's, or `text` handed in: a student's answers, read with a size limit) is
    parsed by libyaml when PyYAML has it, and again by the pure-Python parser if that fails, so
    error messages do not depend on libyaml. libyaml's composer recurses in C, so text that
    could nest deeply (a hostile `[[[[...`) only meets the pure-Python parser, which raises
    RecursionError instead of crashing the grader.

    `max_values` (for student data): a document whose aliases stand for more values than this
    (a "billion laughs") is refused before it is built, so no message or report can expand it.
    `duplicates`: a key written twice in a mapping is no error; the mapping keeps its first value
    and the lines of each such key (YMap.duplicates), for the caller to judge."""
    if _nesting_bound(text) <= MAX_FAST_NESTING:
        try:
            return _load(text, _FastLoader, max_values, duplicates)
        except _TooManyValues as big:
            raise SpecError(str(path), big.line, big.message) from None
        except (yaml.YAMLError, _DuplicateKey):
            pass  # parsed again below, for the pure-Python parser's message
    try:
        return _load(text, _Loader, max_values, duplicates)
    except (_DuplicateKey, _TooManyValues) as bad:
        raise SpecError(str(path), bad.line, bad.message) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "invalid YAML"
        raise SpecError(str(path), line, f"invalid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise SpecError(str(path), None, f"invalid YAML: {exc}") from None


def line_of(container, key=None, default: int | None = None) -> int | None:
    """Line of `key` inside a YMap/YList, or of the container itself."""
    if key is not None:
        if isinstance(container, YMap) and key in container.key_lines:
            return container.key_lines[key]
        if isinstance(container, YList) and isinstance(key, int) and key < len(container.item_lines):
            return container.item_lines[key]
    return getattr(container, "line", None) or default
