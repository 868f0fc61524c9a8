"""grader/records.py: a record behaves as @dataclass(frozen=True) does, for everything the grader uses."""
from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from grader.records import record


@record
class Rec:
    name: str
    weight: float = 1.0
    tags: tuple = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)
    note: str = field(default="", hash=False)

    def shout(self) -> str:
        return self.name.upper()


@dataclass(frozen=True)
class Std:  # the same class, as a dataclass
    name: str
    weight: float = 1.0
    tags: tuple = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)
    note: str = field(default="", hash=False)

    def shout(self) -> str:
        return self.name.upper()


CALLS = [
    (("a",), {}),
    (("a", 2.5), {}),
    (("a",), {"tags": (1, 2), "note": "n"}),
    ((), {"name": "b", "weight": 0.0, "extra": {"k": 1}}),
    (("a", 1.0, (), {"x": 2}, "z"), {}),
]
BAD_CALLS = [
    ((), {}),                                  # missing a required argument
    (("a", 1.0, (), {}, "z", "too many"), {}),  # too many positional arguments
    (("a",), {"name": "b"}),                   # two values for one argument
    (("a",), {"colour": "red"}),               # no such field
]


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_a_record_is_built_shown_compared_and_hashed_as_a_frozen_dataclass(args, kwargs):
    """The same arguments give the same fields, repr, equality and hash as @dataclass(frozen=True),
    and `replace`, `asdict`, `fields`, copy and pickle work on it as on a dataclass."""
    mine, theirs = Rec(*args, **kwargs), Std(*args, **kwargs)
    assert dataclasses.is_dataclass(mine)
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert [f.name for f in dataclasses.fields(mine)] == [f.name for f in dataclasses.fields(theirs)]
    assert repr(mine) == repr(theirs).replace("Std(", "Rec(")
    assert hash(mine) == hash(theirs)
    assert mine == Rec(*args, **kwargs) and mine != theirs  # equal to its own class only, as dataclasses are
    assert (mine == Rec("other")) == (theirs == Std("other"))
    assert mine == dataclasses.replace(mine, extra={"ignored": True})  # compare=False
    assert hash(mine) == hash(dataclasses.replace(mine, note="another"))  # hash=False
    changed = dataclasses.replace(mine, weight=9.0)
    assert changed.weight == 9.0 and dataclasses.asdict(changed) == {**dataclasses.asdict(mine), "weight": 9.0}
    assert copy.copy(mine) == mine and copy.deepcopy(mine) == mine
    assert pickle.loads(pickle.dumps(mine)) == mine
    assert mine.shout() == theirs.shout()
    assert list(vars(mine)) == list(vars(theirs))  # the fields set in their order


def test_defaults_from_a_factory_are_fresh_for_each_record():
    assert Rec("a").extra is not Rec("a").extra
    assert Rec("a").extra == {}


@pytest.mark.parametrize("args, kwargs", BAD_CALLS)
def test_wrong_arguments_raise_type_error_as_a_dataclass_does(args, kwargs):
    with pytest.raises(TypeError):
        Std(*args, **kwargs)
    with pytest.raises(TypeError):
        Rec(*args, **kwargs)


def test_a_record_is_frozen():
    mine = Rec("a")
    with pytest.raises(FrozenInstanceError):
        mine.name = "b"
    with pytest.raises(FrozenInstanceError):
        del mine.name
    with pytest.raises(FrozenInstanceError):
        mine.new_attribute = 1
    assert mine.name == "a"


def test_a_subclass_record_has_its_parents_fields_first():
    @record
    class Base:
        a: int
        b: int = 2

    @record
    class Child(Base):
        c: int = 3

    child = Child(1, c=5)
    assert (child.a, child.b, child.c) == (1, 2, 5)
    assert repr(child) == "test_a_subclass_record_has_its_parents_fields_first.<locals>.Child(a=1, b=2, c=5)"
    assert child != Base(1, 2)


@pytest.mark.parametrize("body", [
    {"__annotations__": {"a": "int"}, "__post_init__": lambda self: None},
    {"__annotations__": {"a": "int"}, "__repr__": lambda self: "mine"},
    {"__annotations__": {"a": "int"}, "a": field(default=0, init=False)},
    {"__annotations__": {"a": "int"}, "a": field(default=0, kw_only=True)},
])
def test_what_a_record_does_not_do_is_refused(body):
    """__post_init__, a method of its own among the generated ones, init=False and keyword-only
    fields: refused when the class is made, never silently ignored."""
    with pytest.raises(TypeError, match="record"):
        record(type("Odd", (), dict(body)))


def test_the_graders_value_types_are_records():
    """The types a cold grade builds are records (their methods are not compiled per process)."""
    from grader.course.model import Case, Problem
    from grader.grading.results import CaseResult, GradeResult, ProblemResult
    from grader.sandbox.runs import CaseRun
    for cls in (Case, Problem, CaseResult, ProblemResult, GradeResult, CaseRun):
        assert "__record__" in vars(cls), cls


def test_a_docstring_is_kept_or_written_from_the_fields():
    """A record's own docstring is kept; one without gets its name and fields, as dataclass
    writes it from the signature (without calling inspect.signature)."""
    @record
    class Documented:
        """Said here."""

        name: str

    assert Documented.__doc__ == "Said here."
    assert Rec.__doc__ == "Rec(name: str, weight: float = 1.0, tags: tuple = (), extra: dict = <factory>, note: str = '')"
