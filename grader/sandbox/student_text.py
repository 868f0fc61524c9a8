"""The one boundary for text a student influences, on its way into the grader's data.

Every string a student can shape (a returned object's type name, an exception's class name and
message, what their code printed, a written answer, a notebook's cells and file name, a quiz key,
a file name in a class folder) is cleaned once, where it enters the grader's results, by
`student_text`, and carried from there as a `StudentText`. Only `student_text` makes one, so a
field typed `StudentText` (grading/results.py) holds cleaned text: a raw string cannot reach a
report by accident (mypy says so).

Cleaned text is inert in every report format: it holds no C0 or C1 control character (a
terminal's escape sequences: ESC, and CSI U+009B alone), no lone surrogate (which no UTF-8
encoder accepts), no bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069: text shown
in another order than it is stored), no line or paragraph separator (U+2028, U+2029), no
noncharacter (U+FFFE, U+FFFF, which XML refuses), and is bounded in length. Each such character
becomes a visible escape (`\\x9b`, `\\u202e`), so the text still says what the student sent.
Text on one line (names, messages) also has its line breaks escaped (`\\n`), so it can never
start a line of a report; text of several lines (printed output, written answers) keeps `\\n`
and tabs, and every report prefixes or fences each of its lines.
"""
from __future__ import annotations

import re

__all__ = ["StudentText", "student_text", "one_line", "EMPTY"]

# every character that can drive a terminal, reorder text, break a line or an encoder
_UNSAFE = "\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_ONE_LINE = re.compile(f"[{_UNSAFE}]")
_LINES = re.compile(f"(?:(?!\n|\t)[{_UNSAFE}])")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": " "}


class StudentText(str):
    """Text a student influenced, cleaned by `student_text` (see the module's docstring)."""

    __slots__ = ()


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def student_text(raw: object, limit: int = 500, *, lines: bool = False) -> StudentText:
    """`raw` (any object: a non-string is taken as its `str`, which cannot fail) as inert text
    of at most `limit` characters before escaping; `lines`: keep line breaks and tabs (printed
    output, written answers), else everything is on one line. A line break written as `\\r\\n` or
    `\\r` is kept as `\\n`."""
    if isinstance(raw, StudentText) and not lines and "\n" not in raw and "\t" not in raw and len(raw) <= limit:
        return raw
    try:
        text = raw if isinstance(raw, str) else str(raw)
    except Exception:  # a str() that raises: no text, rather than a lost result
        text = f"<{type(raw).__name__}>"
    text = str.__str__(text)[:limit]  # a plain str, whatever subclass it was
    if lines:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        return StudentText(_LINES.sub(_escape, text))
    return StudentText(_ONE_LINE.sub(_escape, text))


def one_line(raw: object, limit: int = 500) -> StudentText:
    """`student_text` on one line: for names, type names and messages shown within a line."""
    return student_text(raw, limit)


EMPTY = StudentText()
