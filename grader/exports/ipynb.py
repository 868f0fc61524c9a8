"""Notebooks (nbformat 4.5) built as plain dicts and written as JSON text in nbformat's own form,
without importing nbformat.

The exports build a notebook from a few cells of text with fixed ids. Importing nbformat loads
jsonschema and its format checkers, which took about two seconds of CPU on a slow machine, in
every `mha export` of a notebook. The text written here is what `nbformat.writes` gives for the
same notebook, byte for byte, and the tests hold every export to that and to nbformat's schema.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

from ..errors import InternalError

__all__ = ["new_code_cell", "new_markdown_cell", "new_raw_cell", "new_notebook", "writes"]

CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")  # nbformat 4.5's rule for a cell's id


def new_code_cell(source: str) -> dict:
    """A code cell never run; its id is set by the caller."""
    return {"cell_type": "code", "execution_count": None, "id": "", "metadata": {}, "outputs": [], "source": source}


def new_markdown_cell(source: str) -> dict:
    """A Markdown cell; its id is set by the caller."""
    return {"cell_type": "markdown", "id": "", "metadata": {}, "source": source}


def new_raw_cell(source: str) -> dict:
    """A raw cell; its id is set by the caller."""
    return {"cell_type": "raw", "id": "", "metadata": {}, "source": source}


def new_notebook(cells: Iterable[dict], metadata: dict) -> dict:
    return {"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def writes(notebook: dict) -> str:
    """The notebook as nbformat writes it (keys sorted, an indent of one, each source split into
    its lines), ending in a newline. A cell id nbformat would refuse is an error of the export."""
    cells = []
    for cell in notebook["cells"]:
        if not CELL_ID.match(cell["id"]):
            raise InternalError(f"notebook cell id {cell['id']!r}: nbformat takes 1 to 64 letters, digits, - or _")
        cells.append({**cell, "source": cell["source"].splitlines(True)})
    return json.dumps({**notebook, "cells": cells}, indent=1, sort_keys=True, separators=(",", ": "),
                      ensure_ascii=False) + "\n"
