"""Case inputs: the value grammar of problem files, validated at load and realized at grading.

A case argument is a literal (number, bool, nested list) or a seeded generator:

    {random: normal, shape: [n, d], scale: 1.0}      standard normal times scale
    {random: uniform, shape: [n, d], low: -1, high: 1}
    {random: simplex, shape: [n, T]}                 rows (last axis) that sum to 1
    {identity: n}                                    the n x n identity (one-hot positions)
    {mask: causal | full | random, shape: [n, m]}    bool mask, True = may attend
    {course: fn, with: {name: value, ...}}           fn(name=value, ...) of the course code: an array
                                                     the course computes (values: ints, "$var"
                                                     products, or plain words such as d8_h2)

A case may define integer variables in `let:` (an int, `{randint: [lo, hi]}` inclusive,
`{choice: [...]}`, or a product such as "$h*$d_k") and use them as "$name" in shapes and int
arguments. A problem's or quiz item's `params:` are drawn per student; one marked `shared: true`
(`{randint: [0, 3], shared: true}`) is drawn from the student's seed and its name alone, so every
problem and item that declares it gives that student the same number. Every random draw is
seeded: by the case's `seed`, or by a stable hash of the problem id and case name, mixed with the
argument name.
"""
from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .functions import ParamKind

RANDOM_KINDS = ("normal", "uniform", "simplex")
MASK_KINDS = ("causal", "full", "random")
_GENERATOR_KEYS = {
    "random": {"random", "shape", "scale", "low", "high", "seed"},
    "identity": {"identity"},
    "mask": {"mask", "shape", "p", "seed"},
    "course": {"course", "with"},
}
_WORD = re.compile(r"^[A-Za-z_][\w.]*$")  # a literal word passed to a course generator
_EXPR = re.compile(r"^\s*(\$[A-Za-z_]\w*|\d+)(\s*\*\s*(\$[A-Za-z_]\w*|\d+))*\s*$")

Report = Callable[[str], None]  # reports one problem with the value being checked


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _expr_vars(text: str) -> list[str]:
    return re.findall(r"\$([A-Za-z_]\w*)", text)


def check_int(value: Any, names: set[str], what: str, report: Report) -> None:
    """An int, or a "$var" product expression over known variables."""
    if isinstance(value, str):
        if not _EXPR.match(value):
            report(f"{what} must be an int or a product like \"$h*$d_k\" (got {value!r})")
            return
        for var in _expr_vars(value):
            if var not in names:
                report(f"{what} uses undefined variable ${var} (define it under 'let')")
    elif not isinstance(value, int) or isinstance(value, bool):
        report(f"{what} must be an int (got {value!r})")


def _check_shape(shape: Any, names: set[str], report: Report) -> None:
    if not isinstance(shape, list) or not shape:
        report(f"'shape' must be a non-empty list of sizes (got {shape!r})")
        return
    for size in shape:
        check_int(size, names, "each size in 'shape'", report)


def _check_nested(value: Any, leaf: Callable[[Any], bool], leaf_name: str, report: Report) -> None:
    arr_shape: list[int] = []

    def walk(v: Any, depth: int) -> bool:
        if isinstance(v, list):
            if depth == len(arr_shape):
                arr_shape.append(len(v))
            elif arr_shape[depth] != len(v):
                return False
            return all(walk(x, depth + 1) for x in v)
        return depth == len(arr_shape) and leaf(v)

    if not walk(value, 0):
        report(f"must be a rectangular nested list of {leaf_name}s (got {value!r})"[:200])


def _check_course(spec: dict, names: set[str], report: Report, course_has: Callable[[str], bool] | None) -> None:
    name = spec["course"]
    if not isinstance(name, str) or not _WORD.match(name):
        report(f"'course' must name a function of the course code (got {name!r})")
    elif course_has is not None and not course_has(name):
        report(f"'course': {name!r} is not a function of the course code")
    given = spec.get("with", {})
    if not isinstance(given, dict):
        report(f"'with' must be a mapping of argument names (got {given!r})")
        return
    for key, value in given.items():
        if not isinstance(key, str) or not key.isidentifier():
            report(f"'with': argument names must be identifiers (got {key!r})")
        elif isinstance(value, str) and not value.lstrip().startswith("$"):
            if not _WORD.match(value):
                report(f"'with.{key}' must be an int, a \"$var\" product or a plain word (got {value!r})")
        else:
            check_int(value, names, f"'with.{key}'", report)


def check_value(spec: Any, kind: ParamKind, names: set[str], report: Report,
                course_has: Callable[[str], bool] | None = None) -> None:
    """Validate one argument spec for a parameter of `kind`; call report() for each problem.
    `course_has(name)` says whether the course code has a function `name` (None: not checked)."""
    if kind is ParamKind.INT:
        check_int(spec, names, "value", report)
        return
    if kind is ParamKind.BOOL:
        if not isinstance(spec, bool):
            report(f"must be true or false (got {spec!r})")
        return
    if isinstance(spec, dict):
        generator = next((k for k in _GENERATOR_KEYS if k in spec), None)
        allowed_for_kind = ("mask", "course") if kind is ParamKind.MASK else ("random", "identity", "course")
        if generator is None or generator not in allowed_for_kind:
            keys = " or ".join(repr(k) for k in allowed_for_kind)
            report(f"a generator needs the key {keys} (got keys {sorted(map(str, spec))})")
            return
        unknown = set(spec) - _GENERATOR_KEYS[generator]
        if unknown:
            report(f"unknown key {sorted(map(str, unknown))[0]!r} in a {generator!r} generator "
                   f"(allowed: {', '.join(sorted(_GENERATOR_KEYS[generator]))})")
        if generator == "identity":
            check_int(spec["identity"], names, "'identity'", report)
            return
        if generator == "course":
            _check_course(spec, names, report, course_has)
            return
        options = RANDOM_KINDS if generator == "random" else MASK_KINDS
        if spec[generator] not in options:
            report(f"{generator!r} must be one of {', '.join(options)} (got {spec[generator]!r})")
        if "shape" not in spec:
            report(f"a {generator!r} generator needs 'shape'")
        else:
            _check_shape(spec["shape"], names, report)
        for key in ("scale", "low", "high", "p"):
            if key in spec and not is_number(spec[key]):
                report(f"{key!r} must be a number (got {spec[key]!r})")
        if "seed" in spec and (not isinstance(spec["seed"], int) or isinstance(spec["seed"], bool)):
            report(f"'seed' must be an int (got {spec['seed']!r})")
        return
    if kind is ParamKind.MASK:
        _check_nested(spec, lambda v: isinstance(v, bool), "true/false value", report)
    else:
        _check_nested(spec, is_number, "number", report)


def check_let(let: Any, report_at: Callable[[Any, str], None], known: set[str] | frozenset[str] = frozenset(),
              label: str = "let") -> set[str]:
    """Validate a `let:` (or `params:`) block, which may use the `known` names; returns all names."""
    names: set[str] = set(known)
    if not isinstance(let, dict):
        report_at(None, f"{label!r} must be a mapping of variable names (got {let!r})")
        return names
    for name, spec in let.items():
        def report(msg: str, name=name) -> None:
            report_at(name, f"{label}.{name}: {msg}")
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_]\w*$", name):
            report(f"variable names must be identifiers (got {name!r})")
            continue
        if isinstance(spec, dict) and "shared" in spec:
            if label != "params":
                report("'shared' is for a problem's or quiz item's params, not a case's let")
            elif spec["shared"] is not True:
                report(f"'shared' must be true (got {spec['shared']!r})")
            spec = {k: v for k, v in spec.items() if k != "shared"}
        if isinstance(spec, dict):
            if set(spec) == {"randint"}:
                r = spec["randint"]
                if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)
                        and r[0] <= r[1]):
                    report(f"'randint' must be [low, high] ints with low <= high (got {r!r})")
            elif set(spec) == {"choice"}:
                c = spec["choice"]
                if not (isinstance(c, list) and c and all(isinstance(x, int) for x in c)):
                    report(f"'choice' must be a non-empty list of ints (got {c!r})")
            else:
                report(f"must be an int, {{randint: [lo, hi]}}, {{choice: [...]}} or \"$a*$b\" (got {dict(spec)!r})")
        else:
            check_int(spec, names, "value", report)
        names.add(name)
    return names


def case_seed(problem_id: str, case_name: str, explicit: int | None, seed: int = 0) -> int:
    """The seed of a case: explicit, or a stable hash of where it lives (and of the student's seed)."""
    if explicit is not None:
        return explicit
    where = f"{problem_id}/{case_name}" if not seed else f"{seed}/{problem_id}/{case_name}"
    return zlib.crc32(where.encode())


def is_shared(spec: Any) -> bool:
    """A param drawn once per student for the whole course (`shared: true`)."""
    return isinstance(spec, dict) and spec.get("shared") is True


def draw_shared(params: Mapping[str, Any], where: str, seed: int) -> dict[str, int]:
    """Integer params for one student's seed: the shared ones from the seed and their names alone
    (the same in every problem and item), the others from `where` too."""
    shared = {name: {k: v for k, v in spec.items() if k != "shared"}
              for name, spec in params.items() if is_shared(spec)}
    env = realize_let(shared, zlib.crc32(f"params/shared/{seed}".encode())) if shared else {}
    own = {name: spec for name, spec in params.items() if name not in shared}
    return realize_let(own, zlib.crc32(where.encode()), base=env)


def draw_params(params: Mapping[str, Any], problem_id: str, seed: int) -> dict[str, int]:
    """A problem's integer params for one student's seed (the same seed, the same numbers)."""
    return draw_shared(params, f"params/{problem_id}/{seed}", seed)


def distinct_seeds(params_of: Callable[[int], Mapping[str, Any]], count: int, seed: int) -> list[int]:
    """Up to `count` seeds from `seed` on whose params (`params_of(seed)`) differ: fewer when the
    params have fewer values than that within 100 tries a seed wanted."""
    seeds, seen = [], set()
    for candidate in range(seed, seed + 100 * count):
        drawn = tuple(sorted(params_of(candidate).items()))
        if drawn not in seen:
            seen.add(drawn)
            seeds.append(candidate)
            if len(seeds) == count:
                break
    return seeds


# {name} in a prompt or feedback text is a param; {{ and }} are literal braces. Nothing is evaluated.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)\}")


def placeholders(text: str) -> list[str]:
    return [m.group(1) for m in PLACEHOLDER.finditer(text) if m.group(1)]


def fill(text: str, params: Mapping[str, int]) -> str:
    """Replace each {name} with its param; {{ and }} stand for literal braces."""
    def one(match: re.Match) -> str:
        name = match.group(1)
        return match.group(0)[0] if name is None else str(params[name])
    return PLACEHOLDER.sub(one, text)


def _rng(seed: int, salt: str) -> np.random.Generator:
    # what np.random.default_rng([seed, crc]) builds, without its checks: a third less time, and a
    # student's seed makes some 190 generators
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(salt.encode())])))


def _eval_int(value: Any, env: Mapping[str, int]) -> int:
    if isinstance(value, str):
        result = 1
        for factor in value.split("*"):
            factor = factor.strip()
            result *= env[factor[1:]] if factor.startswith("$") else int(factor)
        return result
    return int(value)


@functools.lru_cache(maxsize=4096)
def _let_draw(seed: int, name: str, low: int, high: int | None) -> int:
    """The integer a `let:` name draws: rng.integers(low, high) of its own generator (`high` None:
    integers(low), a choice's index). Kept, because a student's seed draws the same names again for
    every case of a problem, and the shared ones for every problem and quiz item: a generator costs
    tens of microseconds to seed, the lookup well under one."""
    rng = _rng(seed, f"let:{name}")
    return int(rng.integers(low) if high is None else rng.integers(low, high))


def realize_let(let: Mapping[str, Any], seed: int, base: Mapping[str, int] | None = None) -> dict[str, int]:
    """Draw a `let:` block's integers (which may use the names in `base`)."""
    env: dict[str, int] = dict(base or {})
    for name, spec in let.items():
        if isinstance(spec, dict) and "randint" in spec:
            lo, hi = spec["randint"]
            env[name] = _let_draw(seed, name, int(lo), int(hi) + 1)
        elif isinstance(spec, dict) and "choice" in spec:
            env[name] = int(spec["choice"][_let_draw(seed, name, len(spec["choice"]), None)])
        else:
            env[name] = _eval_int(spec, env)
    return env


def let_values(let: Mapping[str, Any], limit: int) -> list[dict[str, int]] | None:
    """Every set of integers a `let:` block can draw (what `realize_let` returns for some seed), in
    the block's order; None when there are more than `limit` of them."""
    found: list[dict[str, int]] = [{}]
    for name, spec in let.items():
        if isinstance(spec, dict) and "randint" in spec:
            lo, hi = spec["randint"]
            options = [int(v) for v in range(lo, hi + 1)]
        elif isinstance(spec, dict) and "choice" in spec:
            options = list(dict.fromkeys(int(v) for v in spec["choice"]))
        else:
            found = [{**env, name: _eval_int(spec, env)} for env in found]
            continue
        if len(found) * len(options) > limit:
            return None
        found = [{**env, name: value} for env in found for value in options]
    return found


def _from_course(spec: Mapping[str, Any], kind: ParamKind, env: Mapping[str, int],
                 course_fn: Callable[[str], Callable | None] | None) -> np.ndarray:
    fn = course_fn(spec["course"]) if course_fn is not None else None
    if fn is None:
        raise ValueError(f"the course code has no function {spec['course']!r}")
    given = {key: value if isinstance(value, str) and not value.lstrip().startswith("$") else _eval_int(value, env)
             for key, value in spec.get("with", {}).items()}
    dtype = bool if kind is ParamKind.MASK else np.float64
    try:
        value = np.array(fn(**given), dtype=dtype)
    except Exception as exc:
        raise ValueError(f"{spec['course']}({', '.join(f'{k}={v!r}' for k, v in given.items())}) raised "
                         f"{type(exc).__name__}: {exc}") from exc
    if dtype is np.float64 and not np.all(np.isfinite(value)):
        raise ValueError(f"{spec['course']} returned a value that is not finite")
    return value


def realize(spec: Any, kind: ParamKind, env: Mapping[str, int], seed: int, salt: str,
            course_fn: Callable[[str], Callable | None] | None = None) -> Any:
    """Turn a validated spec into the value passed to both the student and the reference
    (`course_fn(name)`: the course code's function `name`, for a `course` generator)."""
    if kind is ParamKind.INT:
        return _eval_int(spec, env)
    if kind is ParamKind.BOOL:
        return bool(spec)
    if not isinstance(spec, dict):
        return np.array(spec, dtype=bool if kind is ParamKind.MASK else np.float64)
    if "identity" in spec:
        return np.eye(_eval_int(spec["identity"], env))
    if "course" in spec:
        return _from_course(spec, kind, env, course_fn)
    shape = tuple(_eval_int(s, env) for s in spec["shape"])
    rng = _rng(spec.get("seed", seed), salt)
    if "mask" in spec:
        if spec["mask"] == "full":
            return np.ones(shape, dtype=bool)
        if spec["mask"] == "causal":
            return np.tri(shape[0], shape[1], dtype=bool)
        mask = rng.random(shape) < spec.get("p", 0.6)
        mask[..., 0] = True  # every query may attend somewhere
        return mask
    if spec["random"] == "normal":
        return rng.standard_normal(shape) * spec.get("scale", 1.0)
    if spec["random"] == "uniform":
        return rng.uniform(spec.get("low", -1.0), spec.get("high", 1.0), shape)
    w = rng.random(shape) + 0.05
    return w / w.sum(axis=-1, keepdims=True)  # simplex rows
