"""A course's own code: the Python module that `code: <file>.py` in assignment.yaml names.

It is trusted course code, loaded here by the grader (never in a student's process: the sandbox
runs a fresh interpreter that cannot read the course folder) and never put in a student bundle.
It holds, by name, the reference of every graded function, the named mistakes (bugs
and detectors) and the quiz's answer functions, and may declare what its functions take and
return in a `FUNCTIONS` mapping (the fields of a problem file's `function:` block).

The module is loaded as part of a package made for its folder, so it may import its neighbours
(`from . import reference`); each folder gets its own package name, so two courses never share
a module.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
import types
import zlib
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import SpecError, SpecErrors
from ..records import record
from .functions import FunctionSpec, Param, ParamKind, ReturnKind

__all__ = ["CODE_KEY", "RETURN_KINDS", "CourseCode", "load_code", "read_code", "course_of", "code_path",
           "course_function", "parse_function", "check_reference"]

CODE_KEY = "code"
RETURN_KINDS = ("array", "int", "shapes", "head", "head_pair")
_LOADED: dict[Path, tuple[tuple, ModuleType]] = {}  # path -> (the folder's Python files when loaded, module)


def _package(folder: Path) -> str:
    """A package standing for the course folder, so the module's relative imports find its neighbours."""
    name = f"_mha_course_{zlib.crc32(str(folder).encode()):08x}"
    if name not in sys.modules:
        package = types.ModuleType(name, f"the course code of {folder}")
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    return name


def _where(path: Path, exc: BaseException) -> tuple[str, int | None]:
    """The file and line of the course code that `exc` was raised in (the module itself by default)."""
    import traceback  # here: only a course that fails to load needs it
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    grader = str(Path(__file__).resolve().parent.parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(grader)]
    return (frames[-1].filename, frames[-1].lineno) if frames else (str(path), None)


def _version(folder: Path) -> tuple:
    """What the loaded code depends on: the size and modification time of each Python file of the
    course folder (the module and the neighbours it may import)."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.suffix == ".py":
            info = entry.stat()
            found.append((entry.name, info.st_mtime_ns, info.st_size))
    return tuple(found)


def load_code(path: Path) -> ModuleType:
    """The course module at `path`, loaded once per process (again when a Python file of its folder changes);
    SpecErrors (file:line) when it is missing or fails to import."""
    path = Path(path).resolve()
    if not path.is_file():
        raise SpecErrors([SpecError(str(path), None, "the course code file (assignment.yaml 'code') is missing")])
    version = _version(path.parent)
    if path in _LOADED and _LOADED[path][0] == version:
        return _current(path, _LOADED[path][1])
    package = _package(path.parent)
    if path in _LOADED:  # changed since it was loaded: load it and its neighbours afresh
        for name in [m for m in sys.modules if m.startswith(package + ".")]:
            del sys.modules[name]
    spec = importlib.util.spec_from_file_location(f"{package}.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SpecErrors([SpecError(str(path), None, "the course code cannot be loaded as a Python module")])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(spec.name, None)
        file, line = _where(path, exc)
        raise SpecErrors([SpecError(file, line, f"the course code failed to load: {type(exc).__name__}: {exc}")]) \
            from None
    _LOADED[path] = (version, module)
    return _current(path, module)


def _current(path: Path, module: ModuleType) -> ModuleType:
    _CURRENT[str(path)] = module
    return module


_CURRENT: dict[str, ModuleType] = {}  # the code path as a problem holds it -> the module load_code last gave


def course_function(code: Path | str | None, name: str) -> Callable | None:
    """The callable `name` of the course module at `code` (None when there is none): the module as
    loaded with the assignment (loading the assignment again picks up a change), loaded on first use."""
    if code is None:
        return None
    module = _CURRENT.get(str(code))
    if module is None:
        module = _CURRENT[str(code)] = load_code(Path(code))
    fn = getattr(module, name, None)
    return fn if callable(fn) else None


def _signature(text: str) -> tuple[str, list[tuple[str, bool, Any]]] | str:
    """(name, [(param, required, default)]) of 'name(a, b=1) -> out', or why it cannot be read."""
    head = text.split("->", 1)[0].strip()
    try:
        tree = ast.parse(f"def {head}: pass")
        fn = tree.body[0]
        if not isinstance(fn, ast.FunctionDef):
            return "cannot be read as 'name(param, param=default) -> result'"
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            return "only plain parameters are allowed (no *args, **kwargs, keyword-only or positional-only)"
        defaults = [ast.literal_eval(d) for d in args.defaults]
    except (SyntaxError, ValueError, IndexError, AttributeError):
        return "cannot be read as 'name(param, param=default) -> result'"
    names = [a.arg for a in args.args]
    first_optional = len(names) - len(defaults)
    return fn.name, [(n, i < first_optional, defaults[i - first_optional] if i >= first_optional else None)
                     for i, n in enumerate(names)]


def parse_function(name: str, node: Any, at: Callable[[str, str | None], None]) -> FunctionSpec | None:
    """The FunctionSpec of a `function:` block ({signature, params, returns}); `at(message, key)`
    records an error on the block's `key` line. None when the block is invalid."""
    if not isinstance(node, dict):
        at(f"'function' must be a function name or a mapping with signature, params, returns (got {node!r})", None)
        return None
    unknown = sorted(set(node) - {"signature", "params", "returns"})
    if unknown:
        at(f"unknown key {unknown[0]!r} in 'function' (allowed: signature, params, returns)", unknown[0])
    missing = [k for k in ("signature", "params", "returns") if k not in node]
    if missing:
        at(f"'function' is missing required key {missing[0]!r}", None)
        return None
    signature = node["signature"]
    read = _signature(signature) if isinstance(signature, str) else "must be text"
    if isinstance(read, str):
        at(f"'signature' {read} (got {signature!r})", "signature")
        return None
    fn_name, params = read
    if fn_name != name:
        at(f"'signature' names {fn_name!r}, expected {name!r}", "signature")
    kinds = node["params"] or {}
    if not isinstance(kinds, dict):
        at(f"'params' must map each parameter to array, mask, int or bool (got {kinds!r})", "params")
        return None
    names = [p[0] for p in params]
    for key in kinds:
        if key not in names:
            at(f"'params' names {key!r}, which is not a parameter of {signature}", "params")
    built = []
    for param, required, default in params:
        kind = kinds.get(param)
        if kind not in [k.value for k in ParamKind]:
            at(f"parameter {param!r} needs a kind in 'params': array, mask, int or bool (got {kind!r})", "params")
            continue
        built.append(Param(param, ParamKind(kind), default=default, required=required))
    returns = node["returns"]
    outputs: tuple[str, ...] = ()
    if isinstance(returns, list) and len(returns) >= 2 and all(isinstance(r, str) and r.isidentifier() for r in returns):
        kind, outputs = ReturnKind.ARRAY_PAIR, tuple(returns)
    elif returns in RETURN_KINDS:
        kind = ReturnKind(returns)
        if kind in (ReturnKind.HEAD, ReturnKind.HEAD_PAIR):
            outputs = ("W_Q", "W_K")
    else:
        at(f"'returns' must be one of {', '.join(RETURN_KINDS)} or a list of two or more names "
           f"for a tuple of arrays (got {returns!r})", "returns")
        return None
    if len(built) != len(params):
        return None
    return FunctionSpec(name, tuple(built), kind, signature.strip(), outputs=outputs)


def check_reference(spec: FunctionSpec, fn: Callable | None, code: Path, at: Callable[[str], None]) -> None:
    """The course module must define `spec.name` taking the declared parameters, in order."""
    import inspect
    if fn is None:
        at(f"{spec.name!r} has no reference: define a function {spec.name}() in {Path(code).name}")
        return
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return
    declared = [p.name for p in spec.params]
    if names != declared:
        at(f"the reference {spec.name}({', '.join(names)}) in {Path(code).name} does not take the declared "
           f"parameters ({', '.join(declared)})")


@record
class CourseCode:
    """A course's loaded code and the functions its `FUNCTIONS` mapping declares."""

    path: Path | None = None
    module: ModuleType | None = None
    functions: Mapping[str, FunctionSpec] = field(default_factory=dict)

    def get(self, name: Any) -> Callable | None:
        """The course's callable `name` (None when there is none)."""
        fn = getattr(self.module, name, None) if isinstance(name, str) and self.module is not None else None
        return fn if callable(fn) else None


def code_path(root: Path, value: Any) -> Path | str:
    """The course module's path for `code:` in assignment.yaml, or why the value is refused."""
    if not isinstance(value, str) or not value.endswith(".py") or "/" in value or "\\" in value \
            or value.startswith("."):
        return f"'code' must name a Python file in the course folder, like course.py (got {value!r})"
    return Path(root) / value


def read_code(path: Path) -> CourseCode:
    """Load the course module at `path` and its declared functions (SpecErrors at their lines)."""
    module = _CURRENT[str(path)] = load_code(path)
    declared = getattr(module, "FUNCTIONS", {})
    errors: list[SpecError] = []
    functions: dict[str, FunctionSpec] = {}
    if not isinstance(declared, dict):
        errors.append(SpecError(str(path), None, "FUNCTIONS must be a mapping of function name to "
                                "{signature, params, returns}"))
        declared = {}
    for name, node in declared.items():
        def at(message: str, key: str | None, name=name) -> None:
            errors.append(SpecError(str(path), None, f"FUNCTIONS[{name!r}]: {message}"))
        spec = parse_function(str(name), node, at)
        if spec is not None:
            functions[name] = spec
    if errors:
        raise SpecErrors(errors)
    return CourseCode(Path(path), module, functions)


def course_of(root: Path) -> CourseCode:
    """The code of the course at `root`, as its course.yaml names it (none when it names none)."""
    from .fields import load_mapping
    file = Path(root) / "assignment.yaml"
    if not file.is_file():
        return CourseCode()
    node = load_mapping(file, "assignment.yaml")
    if CODE_KEY not in node:
        return CourseCode()
    path = code_path(root, node[CODE_KEY])
    if isinstance(path, str):
        from .yamlio import line_of
        raise SpecErrors([SpecError(str(file), line_of(node, CODE_KEY), path)])
    return read_code(path)
