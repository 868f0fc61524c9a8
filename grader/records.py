"""`record`: a frozen dataclass whose methods are shared code, not code written for each class.

For each dataclass, Python before 3.13 writes its __init__, __repr__, __eq__, __hash__,
__setattr__ and __delattr__ as source text and compiles them, in every process that imports it:
about half a millisecond a class. The grader's value types (problems, cases, runs, results...)
are forty of them, and a cold `mha grade` spent about 25 ms, an eighth of its time, compiling
them (docs/performance.md). A record is the same class without that: `dataclasses.dataclass`
builds its fields (so `fields`, `replace`, `asdict` and `is_dataclass` work as for any
dataclass), and the methods are the functions below, which read the class's fields.

A record behaves as `@dataclass(frozen=True)` does for what the grader uses: positional and
keyword arguments, defaults and `field(default_factory=...)`, a field's `repr`, `compare` and
`hash`, equality with instances of the very same class, hashing, FrozenInstanceError on
assignment or deletion, and the same repr text (tests/test_records.py compares the two). Refused
when declared: `field(init=False)`, keyword-only fields, __post_init__, and a class defining one
of these methods itself (InitVar is not supported either).
"""
from __future__ import annotations

import sys
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # type checkers know typing_extensions, on every Python (it need not be installed)
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the marker matters to type checkers only
    def dataclass_transform(**_: Any):
        return lambda decorated: decorated

__all__ = ["record"]

T = TypeVar("T")
_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__")


class _Spec:
    """What the shared methods need of one record class, worked out once."""

    __slots__ = ("names", "position", "defaults", "factories", "shown", "compared", "hashed")

    def __init__(self, cls: type) -> None:
        every = fields(cls)
        self.names = tuple(f.name for f in every)
        self.position = {name: at for at, name in enumerate(self.names)}
        self.defaults = {f.name: f.default for f in every if f.default is not MISSING}
        self.factories = {f.name: f.default_factory for f in every if f.default_factory is not MISSING}
        self.shown = tuple(f.name for f in every if f.repr)
        self.compared = tuple(f.name for f in every if f.compare)
        self.hashed = tuple(f.name for f in every if (f.compare if f.hash is None else f.hash))


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    spec: _Spec = type(self).__record__
    names = spec.names
    given = len(args)
    if given > len(names):
        raise TypeError(f"{type(self).__qualname__}.__init__() takes {len(names) + 1} positional arguments "
                        f"but {given + 1} were given")
    state = self.__dict__
    state.update(zip(names, args))  # in the fields' order, as a dataclass's __init__ sets them
    for name in kwargs:
        at = spec.position.get(name)
        if at is None:
            raise TypeError(f"{type(self).__qualname__}.__init__() got an unexpected keyword argument {name!r}")
        if at < given:
            raise TypeError(f"{type(self).__qualname__}.__init__() got multiple values for argument {name!r}")
    if given == len(names):
        return
    defaults, factories = spec.defaults, spec.factories
    for name in names[given:]:
        if name in kwargs:
            state[name] = kwargs[name]
        elif name in defaults:
            state[name] = defaults[name]
        elif name in factories:
            state[name] = factories[name]()
        else:
            raise TypeError(f"{type(self).__qualname__}.__init__() missing 1 required positional argument: {name!r}")


def _repr(self: Any) -> str:
    spec: _Spec = type(self).__record__
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in spec.shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = type(self).__record__.compared
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in type(self).__record__.hashed))


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True)
def record(cls: type[T]) -> type[T]:
    """The class as a frozen dataclass (see the module's docstring)."""
    own = [name for name in _METHODS if name in cls.__dict__]
    if own:
        raise TypeError(f"{cls.__qualname__} defines {', '.join(own)}: make it a dataclass, not a record")
    undocumented = not cls.__doc__
    if undocumented:  # (dataclass would write one from inspect.signature: 2 to 4 ms a class, tokenizing object's)
        cls.__doc__ = cls.__name__
    built: Any = dataclass(init=False, repr=False, eq=False)(cls)  # fields only: no generated methods
    for f in fields(built):
        if not f.init or f.kw_only is True:
            raise TypeError(f"{cls.__qualname__}.{f.name}: a record's fields are all plain __init__ arguments")
    spec = _Spec(built)
    for name, spec_of in (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq), ("__hash__", _hash),
                          ("__setattr__", _setattr), ("__delattr__", _delattr)):
        setattr(built, name, spec_of)
    built.__record__ = spec
    if undocumented:  # what dataclass writes: the class's name and its __init__'s parameters
        built.__doc__ = f"{cls.__name__}({', '.join(_parameter(f) for f in fields(built))})"
    return built


def _parameter(f: Field) -> str:
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", repr(f.type))
    default = "" if f.default is MISSING and f.default_factory is MISSING else \
        " = <factory>" if f.default is MISSING else f" = {f.default!r}"
    return f"{f.name}: {annotation}{default}"
