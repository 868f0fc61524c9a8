"""Per-student seeds: a seed from a keyed hash of the course secret and the student's id.

The same student id always gives the same seed, so `mha check`, hidden grading and every export
agree. Which id: `seed_key` in course.yaml, `email` (the default) or `sid`, the same for
Gradescope (its submission metadata), `grade-all`, `release` (the roster) and `mha numbers`.
Without a student, the default seed (0) is used. The secret never leaves the
instructor's side: it is read at the CLI boundary (course.yaml or MHA_COURSE_SECRET) and passed in.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..errors import InternalError, SpecError, SubmissionError
from ..records import record
from .yamlio import load_yaml

DEFAULT_SEED = 0
SECRET_ENV = "MHA_COURSE_SECRET"
SEED_KEYS = ("email", "sid")  # which id of a student picks their numbers (course.yaml `seed_key`)
DEFAULT_KEY = "email"            # every Gradescope user has one; a sid may be added later in the term
SEED_KEY_ALIAS = "variant_key"   # the same setting under its older name, still accepted


def normalize_student(student: str) -> str:
    """The id as it is hashed: no surrounding whitespace, lower case (Ann@X.edu is ann@x.edu)."""
    return student.strip().lower()


def student_seed(secret: str | None, student: str | None) -> int:
    """The seed of `student` (DEFAULT_SEED when no student is given)."""
    if student is None or not student.strip():
        return DEFAULT_SEED
    if not secret:
        raise SubmissionError(f"a course secret is needed for per-student seeds: set {SECRET_ENV} "
                              "or 'secret' in course.yaml")
    import hashlib  # here, not at the top: the default seed (most cold grades) needs neither
    import hmac
    digest = hmac.new(secret.encode(), normalize_student(student).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") or 1  # never the default seed


def student_token(student: str) -> str:
    """A file-name-safe, non-reversible name for a student's public seed cases."""
    import hashlib
    return hashlib.sha256(normalize_student(student).encode()).hexdigest()[:16]


@record
class CourseSettings:
    """course.yaml (and the environment): the secret, and which id of a student picks their numbers."""

    secret: str | None = None
    seed_key: str = DEFAULT_KEY
    path: Path | None = None         # course.yaml, when it exists
    key_line: int | None = None      # the line of `seed_key:` in it

    def key_error(self, where: str, student: str) -> SpecError:
        """The error for a student whose id of kind `seed_key` is missing."""
        other = next(k for k in SEED_KEYS if k != self.seed_key)
        setting = f"seed_key is {self.seed_key!r}" + ("" if self.key_line else " (the default)")
        return SpecError(str(self.path or "course.yaml"), self.key_line,
                         f"{where}: no {self.seed_key} for {student}, and {setting}: each student's numbers come "
                         f"from their {self.seed_key}; add it to the roster, or set 'seed_key: {other}' in "
                         "course.yaml before anything is released")


def course_settings(root: Path, environ: Mapping[str, str]) -> CourseSettings:
    """course.yaml beside assignment.yaml, if any. MHA_COURSE_SECRET, when set and not empty, wins over
    its `secret:`; `seed_key:` (email or sid, default email; `variant_key:` is accepted for it) is read
    from course.yaml only."""
    config = Path(root) / "course.yaml"
    data = load_yaml(config) if config.is_file() else None
    if data is not None and not isinstance(data, dict):
        raise SpecError(str(config), 1, "must map settings to values, like 'secret: ...'")
    data = data or {}
    lines = getattr(data, "key_lines", {})
    unknown = sorted(set(data) - {"secret", "seed_key", SEED_KEY_ALIAS})
    if unknown:
        raise SpecError(str(config), lines.get(unknown[0]), f"unknown setting {unknown[0]!r} "
                        "(known: secret, seed_key)")
    if "seed_key" in data and SEED_KEY_ALIAS in data:
        raise SpecError(str(config), lines.get(SEED_KEY_ALIAS),
                        f"'{SEED_KEY_ALIAS}' is another name for 'seed_key': give only 'seed_key'")
    name = SEED_KEY_ALIAS if SEED_KEY_ALIAS in data else "seed_key"
    secret = data.get("secret")
    if secret is not None and (not isinstance(secret, str) or len(secret) < 8):
        raise SpecError(str(config), lines.get("secret"), "'secret' must be text of at least 8 characters")
    key = data.get(name, DEFAULT_KEY)
    if key not in SEED_KEYS:
        raise SpecError(str(config), lines.get(name),
                        f"'seed_key' must be one of {', '.join(SEED_KEYS)} (got {key!r})")
    return CourseSettings(secret=environ.get(SECRET_ENV) or secret, seed_key=key,
                  path=config if config.is_file() else None, key_line=lines.get(name))


def course_secret(root: Path, environ: Mapping[str, str]) -> str | None:
    """MHA_COURSE_SECRET wins; otherwise `secret:` in course.yaml beside assignment.yaml."""
    return course_settings(root, environ).secret


def gradescope_student(metadata_path: Path, course: CourseSettings | None = None) -> str | None:
    """The first submitter's id of the course's kind (seed_key: email or sid) from Gradescope's
    submission_metadata.json; None when the file is missing or unreadable. A submitter without that
    id is an error naming it: falling back to another id would give the student other numbers."""
    course = course or CourseSettings()
    try:
        data = json.loads(Path(metadata_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, list) or not users or not isinstance(users[0], dict):
        return None
    value = users[0].get(course.seed_key)
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    who = next((str(users[0][k]) for k in ("email", "sid", "name") if users[0].get(k)), "the first submitter")
    raise course.key_error(Path(metadata_path).name, who)


PRAIRIELEARN_SEED = "mha_seed"  # the param the PrairieLearn export's server.py sets
MAX_DATA_BYTES = 16 << 20       # data.json holds the submitted files too


def prairielearn_seed(data_path: Path) -> int:
    """The seed that PrairieLearn's data.json names (params.mha_seed, which the exported question's
    server.py drew from PrairieLearn's `variant_seed`). Anything else is an error, never the default
    seed: grading other numbers than the student saw would be wrong."""
    try:
        with open(data_path, "rb") as handle:
            raw = handle.read(MAX_DATA_BYTES + 1)
        if len(raw) > MAX_DATA_BYTES:
            raise ValueError(f"more than {MAX_DATA_BYTES >> 20} MiB")
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise InternalError(f"{data_path}: cannot read PrairieLearn's data.json ({exc})") from None
    params = data.get("params") if isinstance(data, dict) else None
    seed = params.get(PRAIRIELEARN_SEED) if isinstance(params, dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InternalError(f"{data_path}: params.{PRAIRIELEARN_SEED} must be the student's seed, a whole number "
                            f"0 or more (got {seed!r}); export the course again with `mha export prairielearn`")
    return seed
