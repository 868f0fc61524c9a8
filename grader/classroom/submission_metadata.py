"""Gradescope's "export submissions" download: its `submission_metadata.yml`, which names the
submitters of each submission folder.

Gradescope writes it with Ruby tags (`!ruby/object:BigDecimal 18:0.1e2`); they are read as plain
data by a SafeLoader, so nothing in the file constructs a Python object.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..course.seeds import CourseSettings
from ..course.yamlio import yaml
from ..errors import SubmissionError

__all__ = ["GRADESCOPE_METADATA", "first_submitter", "read_metadata"]

GRADESCOPE_METADATA = "submission_metadata.yml"


class _MetadataLoader(yaml.SafeLoader):
    """SafeLoader that reads Ruby-tagged values as plain data."""


def _untagged(loader: _MetadataLoader, suffix: str, node: yaml.ScalarNode | yaml.SequenceNode | yaml.MappingNode):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_MetadataLoader.add_multi_constructor("!", _untagged)


def read_metadata(metadata: Path) -> dict[Any, Any]:
    """The file's mapping of submission folders to their entries; a SubmissionError (file:line)
    when it cannot be read or is not such a mapping."""
    try:
        data = yaml.load(metadata.read_text(encoding="utf-8"), Loader=_MetadataLoader)  # noqa: S506 - a SafeLoader
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmissionError(f"{metadata}: cannot read file ({exc})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise SubmissionError(f"{metadata}{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SubmissionError(f"{metadata}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SubmissionError(f"{metadata}: expected a mapping of submission folders to their submitters "
                              f"(got {type(data).__name__})")
    return data


def first_submitter(entry: object, folder_name: str, settings: CourseSettings) -> str:
    """The first submitter's id of the course's kind (seed_key); another id would give other numbers."""
    submitters = entry.get(":submitters") if isinstance(entry, dict) else None
    first = submitters[0] if isinstance(submitters, list) and submitters and isinstance(submitters[0], dict) else {}
    value = first.get(f":{settings.seed_key}")
    if value is not None and str(value).strip():
        return str(value).strip()
    who = next((str(first[k]) for k in (":email", ":sid", ":name") if first.get(k)), "its first submitter")
    raise settings.key_error(f"{GRADESCOPE_METADATA}, {folder_name}", who)
