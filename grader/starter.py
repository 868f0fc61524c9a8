"""What a student starts from, made from the course and never copied from the instructor's
files: attention.py with one stub per graded function (its declared signature, a docstring,
`raise NotImplementedError`) and a blank answers.yaml. Used by release, the exports and
`mha init` (the student bundle's too: nothing here answers anything)."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .course.functions import FunctionSpec
from .course.model import MAX_WRITTEN, Draw, QuizKind
from .paths import SUBMISSION_NAME


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.12g}"

__all__ = ["ANSWER_FORMS", "stub", "student_module", "answers_template", "item_text", "starter_files"]

ANSWER_FORMS = {
    QuizKind.MULTIPLE_CHOICE: "one letter, like b",
    QuizKind.MULTIPLE_ANSWERS: "a list of letters, like [a, c]",
    QuizKind.NUMERIC: "a number, like 0.25",
    QuizKind.WRITTEN: "a few sentences in your own words, in quotes",
}

DEFAULT_MODULE_DOC = """Your implementations for: {title}.

Replace each `raise NotImplementedError(...)` with your code, then run `mha check`
(or `mha check PROBLEM`) for instant feedback. `mha show PROBLEM` prints the full task.
Do not rename the functions or change their parameters."""


def _docstring(text: str, indent: str) -> str:
    text = text.strip().replace('"""', '\\"\\"\\"')
    body = text.replace("\n", "\n" + indent).replace(indent + "\n", "\n")
    return f'{indent}"""{body}' + (f"\n{indent}" if "\n\n" in text and not indent else "") + '"""'


def stub(fn: FunctionSpec, doc: str | None = None, problem_id: str | None = None) -> str:
    """A stub for `fn`: its signature, a docstring (`doc`, else its declared signature) and
    `raise NotImplementedError`."""
    params = ", ".join(p.name if p.required else f"{p.name}={p.default!r}" for p in fn.params)
    see = f" (see `mha show {problem_id}`)" if problem_id else ""
    return (f"def {fn.name}({params}):\n{_docstring(doc or fn.signature, '    ')}\n"
            f"    raise NotImplementedError(\"{fn.name}: not implemented yet{see}\")")


def _instructor_parts(source: str | None) -> tuple[str | None, list[str], dict[str, str]]:
    """Of the instructor's attention.py, only what cannot hold an answer: the module's docstring,
    its absolute top-level imports and each function's docstring (never a function's body)."""
    if source is None:
        return None, [], {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None, [], {}
    imports = [ast.unparse(n) for n in tree.body
               if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and not n.level)]
    docs = {n.name: doc for n in tree.body if isinstance(n, ast.FunctionDef) and (doc := ast.get_docstring(n))}
    return ast.get_docstring(tree), imports, docs


def _instructor_source(root: Path | None) -> str | None:
    path = None if root is None else Path(root) / SUBMISSION_NAME
    try:
        return path.read_text(encoding="utf-8") if path is not None and path.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def student_module(course) -> str:
    """attention.py as students get it: one stub per graded function of the course, generated from
    its declarations; from the instructor's own attention.py in the course folder (which may be
    fully implemented) only the docstrings and imports are taken. `course`: a Course, or
    anything with `title`, `problems` (with id, title, function) and `root` (None: no instructor file)."""
    module_doc, imports, docs = _instructor_parts(_instructor_source(getattr(course, "root", None)))
    parts = [_docstring(module_doc or DEFAULT_MODULE_DOC.format(title=course.title), "")]
    if imports:
        parts.append("\n".join(imports))
    seen = set()
    for problem in course.problems:
        fn = problem.function
        if fn.name in seen:
            continue
        seen.add(fn.name)
        parts.append(stub(fn, docs.get(fn.name) or f"{problem.title}.\n\n{fn.signature}", problem.id))
    head = parts[0] + ("\n" + parts[1] if imports else "")
    return head + "\n\n\n" + "\n\n\n".join(parts[2 if imports else 1:]) + "\n"


def item_text(v: Draw) -> str:
    """The student's view of one drawn quiz item (`mha show ITEM`): prompt, choices and how to
    answer. It needs only the draw, so the student bundle shows an item as the course does."""
    item = v.item
    title = f"{item.title} ({item.points:g} points, {item.kind.value.replace('_', ' ')})"
    lines = [title, "=" * len(title), "", v.prompt.rstrip(), ""]
    lines += [f"  {c.letter}) {c.text}" for c in v.choices]
    if v.choices:
        lines.append("")
    lines.append(f"Answer in answers.yaml as `{item.id}: ...`, with {ANSWER_FORMS[item.kind]}.")
    if item.manual:
        lines.append("Written item: collected with your submission and graded by hand; "
                     "`mha check` only checks that it is text of the allowed length.")
        return "\n".join(lines) + "\n"
    lines.append("Hidden item: `mha check` only checks the form of your answer; `mha grade` grades it."
                 if item.hidden else f"Run `mha check {item.id}` to check your answer.")
    return "\n".join(lines) + "\n"


def _graded_by(item) -> str:
    if item.kind is QuizKind.WRITTEN:
        return " (graded by hand)"
    return " (hidden: graded by mha grade)" if item.hidden else ""


def answers_template(title: str, items, key: Mapping[str, Any] | None = None) -> str:
    """answers.yaml for students (blank) or the answer key (with `key`), one line per quiz item."""
    def shown(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, list):
            return "[" + ", ".join(value) + "]"
        return _number_text(value) if isinstance(value, (int, float)) else str(value)

    head = [f"# {title}: answers. `mha show ITEM` prints an item; `mha check` checks the public ones.",
            "# Write one letter (b), a list of letters ([a, c]) or a number (0.25) after each colon."]
    if any(item.kind is QuizKind.WRITTEN for item in items):
        head.append(f'# Written items: your own words in quotes ("..."), at most {MAX_WRITTEN} characters; '
                    "graded by hand.")
    head.append("")
    rows = [(f"{item.id}: {shown((key or {}).get(item.id))}",
             f"# {ANSWER_FORMS[item.kind]}{_graded_by(item)}")
            for item in items]
    width = max(len(left) for left, _ in rows)
    return "\n".join(head + [f"{left:<{width}}  {comment}" for left, comment in rows]) + "\n"


def starter_files(course, quiz_title: str | None = None, items=None) -> dict[str, str]:
    """What a student starts from: attention.py stubs and, with a quiz, a blank answers.yaml
    (`quiz_title` and `items` when `assignment` has no `quiz`, as a student bundle's seed cases)."""
    files = {SUBMISSION_NAME: student_module(course)}
    quiz = getattr(course, "quiz", None)
    if quiz is not None:
        quiz_title, items = quiz.title, quiz.items
    if items:
        files["answers.yaml"] = answers_template(quiz_title or "Concept quiz", items)
    return files


def write_starters(files: Mapping[str, str], folder: Path, force: bool = False) -> list[Path]:
    """Write the starter `files` into `folder` (made if needed); a file already there is kept
    (SubmissionError naming it) unless `force`. Returns the paths written."""
    from .errors import SubmissionError
    from .paths import write_atomically
    folder = Path(folder)
    there = [folder / name for name in files if (folder / name).exists()]
    if there and not force:
        raise SubmissionError(f"{there[0]} already exists: nothing was written (--force replaces it)")
    for name, text in files.items():
        write_atomically(folder / name, text)
    return [folder / name for name in files]
