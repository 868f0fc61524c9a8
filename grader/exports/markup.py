"""The little Markdown the quiz texts use, as HTML for Canvas and Moodle.

Paragraphs (separated by blank lines), indented code blocks, `code`, **strong** and *emphasis*.
Everything is HTML-escaped first, so a quiz text can never inject markup.
"""
from __future__ import annotations

import html
import re

__all__ = ["to_html"]

_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])")


def _inline(text: str) -> str:
    parts = _CODE.split(html.escape(text, quote=False))
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # inside backticks: no emphasis
            out.append(f"<code>{part}</code>")
        else:
            out.append(_EM.sub(r"<em>\1</em>", _STRONG.sub(r"<strong>\1</strong>", part)))
    return "".join(out)


def to_html(markdown: str) -> str:
    """HTML for `markdown`: one <p> per paragraph, <pre><code> for lines indented 4 spaces."""
    blocks = re.split(r"\n\s*\n", markdown.strip("\n"))
    out = []
    for block in blocks:
        lines = block.split("\n")
        if all(line.startswith("    ") or not line.strip() for line in lines):
            code = "\n".join(line[4:] for line in lines)
            out.append(f"<pre><code>{html.escape(code, quote=False)}</code></pre>")
        else:
            out.append(f"<p>{_inline(' '.join(line.strip() for line in lines if line.strip()))}</p>")
    return "\n".join(out)
