"""Load and validate an assignment: `assignment.yaml` plus one YAML file per problem.

Every problem found is reported as `path:line: what is wrong (got X)`; all files are checked
before anything is raised, so `mha validate` lists every error at once.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import SpecError, SpecErrors
from ..paths import SUBMISSION_NAME
from . import generators as gen
from .code import CODE_KEY, CourseCode, check_reference, code_path, course_of, parse_function, read_code
from .fields import Errors, got, load_mapping, number_field, text_field, unknown_keys
from .functions import FunctionSpec, ReturnKind
from .model import Case, CompareKind, Comparison, Course, Mistake, Problem, Quiz, Visibility
from .placeholders import reference_placeholder, stub_placeholders, text_placeholder
from .quiz import load_quiz
from .yamlio import line_of

PROBLEM_KEYS = {"id", "title", "points", "function", "prompt", "compare", "cases", "hints",
                "mistakes", "timeout", "params"}
REQUIRED_PROBLEM_KEYS = ("id", "title", "points", "prompt", "cases")
CASE_KEYS = {"name", "visibility", "weight", "args", "expect", "raises", "let", "seed", "reveal"}
COMPARE_KEYS = {"kind", "rtol", "atol", "pattern", "min_weight"}
MISTAKE_KEYS = {"id", "message", "bug", "detector"}
BUG_ALIAS = "variant"  # `bug:` under its older name, still accepted
ASSIGNMENT_KEYS = {"title", "problems", "quiz", "optional", CODE_KEY}
OPTIONAL_KEYS = {"problems", "quiz"}
RAISABLE = ("ValueError", "TypeError", "IndexError", "ZeroDivisionError")
HEAD_PATTERNS = ("previous", "sink")

_DEFAULT_COMPARE = {
    ReturnKind.ARRAY: CompareKind.ALLCLOSE,
    ReturnKind.ARRAY_PAIR: CompareKind.ALLCLOSE,
    ReturnKind.INT: CompareKind.EQUAL,
    ReturnKind.SHAPES: CompareKind.SHAPES,
    ReturnKind.HEAD: CompareKind.HEAD_PATTERN,
    ReturnKind.HEAD_PAIR: CompareKind.HEAD_PAIR,
}


def _compare(node: Any, line: int | None, fn: FunctionSpec, errors: Errors) -> Comparison:
    default = _DEFAULT_COMPARE[fn.returns]
    if node is None:
        return Comparison(kind=default, pattern=None)
    if not isinstance(node, dict):
        errors.at(line, f"'compare' must be a mapping (got {got(node)})")
        return Comparison(kind=default)
    unknown_keys(node, COMPARE_KEYS, "'compare'", errors)
    kind = default
    if "kind" in node:
        names = [k.value for k in CompareKind]
        if node["kind"] not in names:
            errors.at(line_of(node, "kind"), f"'kind' must be one of {', '.join(names)} (got {got(node['kind'])})")
        elif CompareKind(node["kind"]) is not default:
            errors.at(line_of(node, "kind"), f"{fn.name} returns {fn.returns.value}, which is compared "
                      f"with {default.value!r} (got {node['kind']!r})")
    values: dict[str, Any] = {}
    for key in ("rtol", "atol"):
        if key in node:
            value = number_field(node, key, errors, minimum=0.0, maximum=1.0)
            if value is not None:
                values[key] = value
    if "min_weight" in node:
        value = number_field(node, "min_weight", errors, minimum=0.0, maximum=1.0)
        if value is not None:
            values["min_weight"] = value
    pattern = node.get("pattern")
    if kind is CompareKind.HEAD_PATTERN and pattern not in HEAD_PATTERNS:
        errors.at(line_of(node, "pattern" if "pattern" in node else None),
                  f"'pattern' must be one of {', '.join(HEAD_PATTERNS)} (got {got(pattern)})")
    return Comparison(kind=kind, pattern=pattern, **values)


def _case(node: Any, line: int | None, problem_id: str, fn: FunctionSpec, errors: Errors,
          params: set[str] | frozenset[str] = frozenset(), course: CourseCode | None = None) -> Case | None:
    if not isinstance(node, dict):
        errors.at(line, f"each case must be a mapping (got {got(node)})")
        return None
    before = len(errors.items)
    unknown_keys(node, CASE_KEYS, "a case", errors)
    for key in ("name", "visibility", "args"):
        if key not in node:
            errors.at(line_of(node), f"case is missing required key {key!r}")
    if len(errors.items) > before:
        return None
    name = text_field(node, "name", errors)
    visibility = node["visibility"]
    if visibility not in ("public", "hidden"):
        errors.at(line_of(node, "visibility"), f"'visibility' must be public or hidden (got {got(visibility)})")
    weight = number_field(node, "weight", errors, positive=True) if "weight" in node else 1.0
    if "seed" in node and (not isinstance(node["seed"], int) or isinstance(node["seed"], bool)):
        errors.at(line_of(node, "seed"), f"'seed' must be an int (got {got(node['seed'])})")
    if "reveal" in node and not isinstance(node["reveal"], bool):
        errors.at(line_of(node, "reveal"), f"'reveal' must be true or false (got {got(node['reveal'])})")
    names: set[str] = set(params)
    if "let" in node:
        names = gen.check_let(node["let"], lambda key, msg: errors.at(line_of(node["let"], key) or line_of(node, "let"), msg),
                              known=names)
    uses_params = any(p in params for spec in (node.get("args"), node.get("let")) for p in _dollar_names(spec))
    if "expect" in node and uses_params:
        errors.at(line_of(node, "expect"), "a case with 'expect' cannot use the problem's params "
                  "(its answer would differ per student; let the reference compute it)")
    args = node["args"]
    if not isinstance(args, dict):
        errors.at(line_of(node, "args"), f"'args' must be a mapping of parameter names (got {got(args)})")
        return None
    for key, spec in args.items():
        param = fn.param(key)
        if param is None:
            errors.at(line_of(args, key), f"{key!r} is not a parameter of {fn.signature}")
            continue
        def report(msg: str, key: str = key) -> None:
            errors.at(line_of(args, key), f"argument {key!r}: {msg}")
        gen.check_value(spec, param.kind, names, report,
                        None if course is None else (lambda name: course.get(name) is not None))
    for param in fn.params:
        if param.required and param.name not in args:
            errors.at(line_of(node, "args"), f"case {name!r} is missing argument {param.name!r} of {fn.signature}")
    if "expect" in node and "raises" in node:
        errors.at(line_of(node, "raises"), "a case has either 'expect' or 'raises', not both")
    if "raises" in node and node["raises"] not in RAISABLE:
        errors.at(line_of(node, "raises"), f"'raises' must be one of {', '.join(RAISABLE)} (got {got(node['raises'])})")
    if "expect" in node and fn.returns in (ReturnKind.HEAD, ReturnKind.HEAD_PAIR):
        errors.at(line_of(node, "expect"), f"{fn.name} is graded by the pattern it makes; 'expect' is not allowed")
    if len(errors.items) > before or name is None or weight is None:
        return None
    return Case(name=name, args=dict(args), visibility=Visibility(visibility), weight=weight,
                expect=node.get("expect"), has_expect="expect" in node, raises=node.get("raises"),
                line=line_of(node), let=dict(node.get("let", {})), seed=node.get("seed"),
                reveal=node.get("reveal", True))


def _check_shared(problems: list[Problem], quiz: Quiz | None, found: list[SpecError]) -> None:
    """A shared param is one number per student: every problem and quiz item that declares it must
    draw it the same way."""
    first: dict[str, tuple[Any, str]] = {}
    owners: list[tuple[Mapping[str, Any], str, int | None]] = [(p.params, str(p.path), None) for p in problems]
    if quiz is not None:
        owners += [(item.params, str(quiz.path), item.line) for item in quiz.items]
    for params, file, line in owners:
        for name, spec in params.items():
            if not gen.is_shared(spec):
                continue
            if name not in first:
                first[name] = (spec, file)
            elif spec != first[name][0]:
                found.append(SpecError(file, line or _param_line(Path(file), name),
                                       f"shared param {name!r} is drawn as {dict(spec)} here but as "
                                       f"{dict(first[name][0])} in {Path(first[name][1]).name}: a shared param "
                                       "must be declared the same everywhere"))


def _param_line(path: Path, name: str) -> int | None:
    """The line of `name:` under a problem file's top-level `params:` (None when not found)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    start = next((i for i, text in enumerate(lines) if text.startswith("params:")), None)
    if start is None:
        return None
    return next((i + 1 for i in range(start + 1, len(lines)) if re.match(rf"^\s+{re.escape(name)}\s*:", lines[i])), None)


def _dollar_names(spec: Any) -> set[str]:
    """Every $name used anywhere inside a value spec."""
    if isinstance(spec, str):
        return set(re.findall(r"\$([A-Za-z_]\w*)", spec))
    if isinstance(spec, dict):
        return set().union(*(_dollar_names(v) for v in spec.values()), set())
    if isinstance(spec, list):
        return set().union(*(_dollar_names(v) for v in spec), set())
    return set()


def _mistakes(node: Any, line: int | None, errors: Errors, course: CourseCode) -> tuple[Mistake, ...]:
    if not isinstance(node, list):
        errors.at(line, f"'mistakes' must be a list (got {got(node)})")
        return ()
    found = []
    seen: set[str] = set()
    for i, item in enumerate(node):
        item_line = line_of(node, i)
        if not isinstance(item, dict):
            errors.at(item_line, f"each mistake must be a mapping with id, message, bug or detector "
                      f"(got {got(item)})")
            continue
        unknown_keys(item, MISTAKE_KEYS, "a mistake", errors, aliases=frozenset({BUG_ALIAS}))
        missing = [k for k in ("id", "message") if k not in item]
        if "bug" in item and BUG_ALIAS in item:
            errors.at(line_of(item, BUG_ALIAS), f"'{BUG_ALIAS}' is another name for 'bug': give only 'bug'")
            continue
        bug_key = BUG_ALIAS if BUG_ALIAS in item else "bug"
        if bug_key in item and "detector" in item:
            errors.at(line_of(item, "detector"), f"a mistake has either {bug_key!r} or 'detector', not both")
            continue
        if not missing and bug_key not in item and "detector" not in item:
            missing = ["bug"]
        if missing:
            errors.at(item_line, f"mistake is missing required key {missing[0]!r}")
            continue
        if item["id"] in seen:
            errors.at(line_of(item, "id"), f"duplicate mistake id {item['id']!r}")
        seen.add(item["id"])
        key = "detector" if "detector" in item else bug_key
        if course.get(item[key]) is None:
            where = course.path.name if course.path else "the course code (assignment.yaml names none with 'code:')"
            kind = "detector" if key == "detector" else "bug"
            errors.at(line_of(item, key), f"unknown mistake {kind} {item[key]!r} (not a function of {where})")
            continue
        found.append(Mistake(id=str(item["id"]), message=str(item["message"]).strip(),
                             bug=item[key], line=item_line, detector=key == "detector"))
    return tuple(found)


def _function(node: Mapping[str, Any], path: Path, course: CourseCode, errors: Errors) -> FunctionSpec | None:
    """What the problem's function takes and returns: its own `function:` block, else the course
    code's declaration of `function:` (a name) or of the problem's id. It must have a reference."""
    block = node.get("function")
    if isinstance(block, dict):
        fn = parse_function(str(node.get("id")), block, lambda message, key: errors.at(
            line_of(block, key) if key in block else line_of(node, "function"), f"'function': {message}"))
    else:
        fn_name = path.stem if block is None else block
        fn = course.functions.get(fn_name) if isinstance(fn_name, str) else None
        if fn is None:
            known = ", ".join(course.functions) or "none declared"
            errors.at(line_of(node, "function" if "function" in node else "id"),
                      f"unknown function {fn_name!r} (declared by the course: {known}; or declare it with a "
                      "'function:' block of signature, params, returns)")
    if fn is not None:
        reference = course.get(fn.name)
        check_reference(fn, reference, course.path or Path("course.py"),
                        lambda message: errors.at(line_of(node, "function" if "function" in node else "id"), message))
        left = None if reference is None else reference_placeholder(fn.name, reference, course.path)
        if left is not None:
            errors.items.append(left)
    return fn


def _cases(node: Any, line: int | None, problem_id: str, fn: FunctionSpec, errors: Errors,
           params: set[str], course: CourseCode) -> list[Case]:
    """The problem's cases, each checked against `fn`; the invalid ones are left out (their errors recorded)."""
    if not isinstance(node, list) or not node:
        errors.at(line, f"'cases' must be a non-empty list (got {got(node)})")
        return []
    cases: list[Case] = []
    names: set[str] = set()
    for i, item in enumerate(node):
        case = _case(item, line_of(node, i), problem_id, fn, errors, params, course)
        if case is None:
            continue
        if case.name in names:
            errors.at(line_of(item, "name"), f"duplicate case name {case.name!r}")
        names.add(case.name)
        cases.append(case)
    return cases


def load_problem(path: Path, course: CourseCode | None = None) -> Problem:
    """Load one problem file (with the code of `course`, by default the course folder holding its
    problems/); raises SpecErrors listing everything wrong with it."""
    path = Path(path)
    errors = Errors(path)
    if course is None:
        course = course_of(path.parent.parent)
    node = load_mapping(path, "a problem file")
    unknown_keys(node, PROBLEM_KEYS, "a problem", errors)  # reported, and the rest still checked
    missing = [key for key in REQUIRED_PROBLEM_KEYS if key not in node]
    for key in missing:
        errors.at(1, f"missing required key {key!r}")
    if missing:
        raise SpecErrors(errors.items)
    problem_id = node["id"]
    if problem_id != path.stem:
        errors.at(line_of(node, "id"), f"'id' must equal the file name {path.stem!r} (got {got(problem_id)})")
    fn = _function(node, path, course, errors)  # None: the fields that need it (compare, cases) are not checked
    title = text_field(node, "title", errors)
    prompt = text_field(node, "prompt", errors)
    for key, value in (("title", title), ("prompt", prompt)):
        left = text_placeholder(key, value)
        if left is not None:
            errors.at(line_of(node, key), left)
    points = number_field(node, "points", errors, positive=True)
    timeout = number_field(node, "timeout", errors, positive=True) if "timeout" in node else None
    compare = _compare(node.get("compare"), line_of(node, "compare"), fn, errors) if fn is not None else None
    hints = node.get("hints", [])
    if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
        errors.at(line_of(node, "hints"), f"'hints' must be a list of text (got {got(hints)})")
        hints = []
    mistakes = _mistakes(node["mistakes"], line_of(node, "mistakes"), errors, course) if "mistakes" in node else ()
    params: set[str] = set()
    if "params" in node:
        params = gen.check_let(node["params"], lambda key, msg: errors.at(
            line_of(node["params"], key) or line_of(node, "params"), msg), label="params")
    if prompt is not None:
        for name in gen.placeholders(prompt):
            if name not in params:
                errors.at(line_of(node, "prompt"), f"'prompt' uses {{{name}}}, which is not a param "
                          f"(params: {', '.join(sorted(params)) or 'none defined'}; write {{{{ and }}}} for literal braces)")
    cases = _cases(node["cases"], line_of(node, "cases"), problem_id, fn, errors, params, course) \
        if fn is not None else []  # without the function, nothing can say what a case's args must be
    if errors.items or fn is None or compare is None or title is None or prompt is None or points is None:
        raise SpecErrors(errors.items)
    return Problem(id=problem_id, title=title, points=points, function=fn, prompt=prompt.strip() + "\n",
                   compare=compare, cases=tuple(cases), hints=tuple(h.strip() for h in hints),
                   mistakes=mistakes, timeout=timeout, path=path, params=dict(node.get("params") or {}),
                   code=course.path)


def load_course(root: Path) -> Course:
    """Load `root/assignment.yaml` and the problems it lists from `root/problems/`; SpecErrors
    with everything wrong in any of its files, sorted by file and line."""
    course, found = read_course(root)
    if found or course is None:
        raise SpecErrors(found)
    return course


def read_course(root: Path) -> tuple[Course | None, list[SpecError]]:
    """The course at `root` with what of it loads (the problems and the quiz that have no errors),
    and every error found in its files; None for the course when nothing of it can load (no
    assignment.yaml, or course code that fails). `mha validate` runs the later checks on the parts
    that load, so one run reports everything."""
    root = Path(root)
    path = root / "assignment.yaml"
    if not path.is_file():
        return None, [SpecError(str(path), None, "assignment file not found")]
    errors = Errors(path)
    try:
        node = load_mapping(path, "assignment.yaml")
    except SpecErrors as exc:
        return None, exc.errors
    unknown_keys(node, ASSIGNMENT_KEYS, "assignment.yaml", errors)
    title = text_field(node, "title", errors) if "title" in node else root.name
    course = _course(node, root, errors)
    if course is None:
        return None, errors.items
    entries = node.get("problems")
    if not isinstance(entries, list) or not entries:
        errors.at(line_of(node, "problems" if "problems" in node else None, default=1),
                  f"'problems' must be a non-empty list (got {got(entries)})")
        entries = []
    problems: list[Problem] = []
    problem_errors: list[SpecError] = []
    seen: dict[str, int | None] = {}
    for i, entry in enumerate(entries):
        entry_line = line_of(entries, i)
        points_override = None
        if isinstance(entry, dict):
            unknown_keys(entry, {"id", "points"}, "a problems entry", errors)
            if "points" in entry:
                points_override = number_field(entry, "points", errors, positive=True)
            entry = entry.get("id")
        if not isinstance(entry, str):
            errors.at(entry_line, f"each problems entry must be an id or {{id, points}} (got {got(entry)})")
            continue
        if entry in seen:
            errors.at(entry_line, f"duplicate problem id {entry!r} (first listed on line {seen[entry]})")
            continue
        seen[entry] = entry_line
        file = root / "problems" / f"{entry}.yaml"
        if not file.is_file():
            errors.at(entry_line, f"problem {entry!r} has no file problems/{entry}.yaml")
            continue
        try:
            problem = load_problem(file, course)
        except SpecErrors as exc:
            problem_errors.extend(exc.errors)
            continue
        if points_override is not None:
            problem = replace(problem, points=points_override)
        problems.append(problem)
    off_problems, off_items = _optional(node, errors)
    optional: list[Problem] = []
    for problem_id, entry_line in off_problems.items():
        if problem_id in seen:
            errors.at(entry_line, f"problem {problem_id!r} is listed under 'problems' and under 'optional' "
                                  f"(line {seen[problem_id]}): keep one")
            continue
        file = root / "problems" / f"{problem_id}.yaml"
        if not file.is_file():
            errors.at(entry_line, f"optional problem {problem_id!r} has no file problems/{problem_id}.yaml")
            continue
        try:
            optional.append(load_problem(file, course))  # validated like the others, graded once switched on
        except SpecErrors as exc:
            problem_errors.extend(exc.errors)
    listed = set(seen) | set(off_problems)
    for file in sorted((root / "problems").glob("*.yaml")):
        if file.stem not in listed:
            errors.at(None, f"problems/{file.name} is not listed under 'problems' or 'optional' "
                            f"(add it or move it out)")
    every_id = {**seen, **off_problems}
    quiz = _quiz(node, root, errors, problem_errors, every_id, course) if "quiz" in node else None
    if quiz is not None:
        known = {item.id for item in quiz.items}
        for item_id, entry_line in off_items.items():
            if item_id not in known:
                errors.at(entry_line, f"optional quiz item {item_id!r} is not in {Path(str(quiz.path)).name}")
        quiz = replace(quiz, items=tuple(i for i in quiz.items if i.id not in off_items),
                       optional=tuple(i for i in quiz.items if i.id in off_items))
    elif off_items and "quiz" not in node:  # a quiz file that failed to load has its own error
        errors.at(line_of(node, "optional"), "'optional' lists quiz items but the assignment has no quiz")
    _check_shared(problems + optional, quiz.with_optional() if quiz is not None else None, problem_errors)
    if (root / SUBMISSION_NAME).is_file():
        problem_errors.extend(stub_placeholders(root / SUBMISSION_NAME, every_id))
    loaded = Course(title=title if title is not None else root.name, root=root, problems=tuple(problems),
                    quiz=quiz, code=course.path, optional=tuple(optional))
    return loaded, errors.items + problem_errors


def _optional(node: Mapping[str, Any], errors: Errors) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """assignment.yaml's `optional:`: the problem ids and quiz item ids it switches off, each with
    its line (an instructor switches one on by moving it under `problems`, or off the quiz list)."""
    section = node.get("optional")
    if section is None:
        return {}, {}
    if not isinstance(section, dict):
        errors.at(line_of(node, "optional"), f"'optional' must be a mapping with 'problems' and/or 'quiz' "
                                             f"(got {got(section)})")
        return {}, {}
    unknown_keys(section, OPTIONAL_KEYS, "'optional'", errors)
    found: list[dict[str, int | None]] = []
    for key in ("problems", "quiz"):
        entries = section.get(key, [])
        ids: dict[str, int | None] = {}
        if not isinstance(entries, list):
            errors.at(line_of(section, key), f"'optional.{key}' must be a list of ids (got {got(entries)})")
            entries = []
        for i, entry in enumerate(entries):
            entry_line = line_of(entries, i)
            if not isinstance(entry, str):
                errors.at(entry_line, f"each 'optional.{key}' entry must be an id (got {got(entry)})")
            elif entry in ids:
                errors.at(entry_line, f"duplicate id {entry!r} in 'optional.{key}' (first on line {ids[entry]})")
            else:
                ids[entry] = entry_line
        found.append(ids)
    return found[0], found[1]


def _course(node: Mapping[str, Any], root: Path, errors: Errors) -> CourseCode | None:
    """The course code `code:` names, loaded (an empty CourseCode when it names none); None when it
    cannot be loaded (the errors say why)."""
    if CODE_KEY not in node:
        return CourseCode()
    path = code_path(root, node[CODE_KEY])
    if isinstance(path, str):
        errors.at(line_of(node, CODE_KEY), path)
        return None
    if not path.is_file():
        errors.at(line_of(node, CODE_KEY), f"course code {node[CODE_KEY]!r} not found beside assignment.yaml")
        return None
    try:
        return read_code(path)
    except SpecErrors as exc:
        errors.items.extend(exc.errors)
        return None


def _quiz(node: Mapping[str, Any], root: Path, errors: Errors, quiz_errors: list[SpecError],
          problem_ids: dict, course: CourseCode) -> Quiz | None:
    """The quiz named by `quiz:` (a path relative to the course folder), or None if invalid."""
    name = text_field(node, "quiz", errors)
    if name is None:
        return None
    file = root / name
    if not file.is_file():
        errors.at(line_of(node, "quiz"), f"quiz file {name!r} not found beside assignment.yaml")
        return None
    try:
        quiz = load_quiz(file, course)
    except SpecErrors as exc:
        quiz_errors.extend(exc.errors)
        return None
    for item in quiz.items:
        if item.id in problem_ids:
            quiz_errors.append(SpecError(str(file), item.line, f"quiz item id {item.id!r} is also a problem id"))
    return quiz

