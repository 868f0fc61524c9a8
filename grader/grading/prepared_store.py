"""The prepared-cases store: each seed's prepared cases of a course, kept on disk for the next batch.

With a course secret every student has their own seed, and preparing one seed's cases (building
every case's inputs and running the reference on them) costs several times what grading a
submission on them costs. `grade-all` keeps them here, one file per seed, so a second run
of the class (a changed submission, a late one, `--force`) and a class of 500 seeds read them
instead of computing them again.

A file is keyed on content: a SHA-256 of every file of the course folder (its YAML, its code,
its data files; not a student's attention.py or answers.yaml), of every file of the grader
package, and of the Python and numpy versions (`course_key`). The key names the folder and is
stored in the file; a file whose key or seed is not exactly the current one, that cannot be read
or parsed, or that is damaged in any way is ignored and prepared again. Nothing here is needed
for a correct grade: without a cache folder, cases are prepared as before.

A case is stored only when what is read back is identical to what was prepared (types, dtypes,
shapes, bytes, memory order: `_same`); any other case (an array that is a strided view, say) is
stored as "prepare it" and prepared afresh when read. So a case graded from the store is graded
on exactly the inputs and expected answer it would have been graded on without it.

A large array (BLOB_BYTES or more: a trained model's attention maps, say) is kept once, by its
content, in the key's `blobs/` folder (`<name>.array`), named by the SHA-256 of the file, and its
seeds' files name it. Students whose seeds draw the same model share it: read once per grader
process and kept in memory (the same read-only array), so it is also sent to their student
processes without being encoded again (session.py). A blob whose content does not match its name
is damage: the seed is prepared again.

Where: `<cache folder>/prepared/<key>/<seed>.cases` (paths.cache_dir: $MHA_CACHE_DIR, else
$XDG_CACHE_HOME/mha-exercises, else ~/.cache/mha-exercises), every folder mode 0700 and every
file 0600: it holds hidden cases and their answers, which student code, running as another
user when the grader is root, cannot read (docs/security.md). It is data only, never code: packed
as the seed cache is (seed_cases.pack: JSON, then the arrays' bytes, each strictly checked
against its dtype and shape when read; a blob is packed alike, one array). Arrays go to the file
as their bytes, never through base64 or JSON text: checking that a seed reads back exactly, and
writing it, costs a few milliseconds.
Written atomically (a temporary file, then a rename), so a reader sees a whole file or none.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..course.model import Case, Choice, Draw, DrawnWrongValue, QuizItem
from ..paths import PACKAGE, cache_dir, write_private
from .prepared import PreparedCase
from .seed_cases import array_bytes, decode, encode, packed, plain, unpack

__all__ = ["PreparedStore", "course_key"]

FORMAT = 4  # 3: packed (seed_cases.pack), blobs named in place; 4: arrays written as their bytes, blobs packed
FOLDER = "prepared"
SUFFIX = ".cases"
BLOBS = "blobs"  # in a key's folder: the large arrays, one file each, named by the SHA-256 of its content
BLOB_SUFFIX = ".array"
BLOB_BYTES = 48 << 10  # an array of at least this many bytes is kept as a blob (a trained model's maps)
BLOBS_KEPT = 64 << 20  # bytes of blobs a grader process keeps in memory
KEEP = 4  # versions of courses (keys) kept: each a folder of one file per seed
STUDENT_FILES = {"answers.yaml", "attention.py"}  # in a course folder, but the student's, not the course's


def _files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name not in STUDENT_FILES and not name.endswith((".pyc", ".pyo")):
                yield Path(folder, name)


def course_key(root: Path) -> str:
    """What a seed's prepared cases depend on besides the seed: the course's files, the grader's
    files (their content), Python's and numpy's versions."""
    h = hashlib.sha256(f"format {FORMAT}\0python {platform.python_version()}\0numpy {np.__version__}\0".encode())
    for label, base in (("grader", PACKAGE), ("course", Path(root).resolve())):
        for path in _files(base):
            h.update(f"{label}/{path.relative_to(base).as_posix()}\0".encode("utf-8", "surrogatepass"))
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _same(a: Any, b: Any) -> bool:
    """Whether `b` (read back) is `a` (prepared) exactly: the same types all the way down, arrays of
    the same dtype, shape, bytes and memory order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.flags.c_contiguous == b.flags.c_contiguous \
            and a.flags.f_contiguous == b.flags.f_contiguous and a.tobytes() == b.tobytes()
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a.hex() == b.hex() if a == a else b != b  # NaN is NaN; -0.0 is not 0.0
    return bool(a == b)


class PreparedStore:
    """The store of one course's prepared cases (see the module's text); `folder` None: no cache
    folder (nothing is kept)."""

    def __init__(self, course, folder: Path | None = None):
        base = cache_dir() if folder is None else folder
        self.key = course_key(course.root)
        # every case a batch grades, by (problem id, case name)
        self.cases: dict[tuple[str, str], tuple[Any, Any]] = {
            (problem.id, case.name): (problem, case)
            for problem in course.problems for case in problem.visible_cases(include_hidden=True)}
        # every quiz item, by ("", item id) as PreparedCases keeps its draws ("": no problem has that id)
        self.items: dict[tuple[str, str], Any] = {("", item.id): item for item in
                                                  (course.quiz.items if course.quiz is not None else ())}
        self.folder = base / FOLDER / self.key[:32] if base is not None else None
        self._pruned = False
        self._blobs: OrderedDict[str, np.ndarray] = OrderedDict()  # name -> its read-only array, most recent last
        self._blob_lock = threading.Lock()

    def _path(self, seed: int) -> Path | None:
        return self.folder / f"{int(seed)}{SUFFIX}" if self.folder is not None else None

    def load(self, seed: int) -> dict[tuple[str, str], Any] | None:
        """The seed's stored cases by (problem id, case name) and quiz draws by ("", item id) (None for
        one to prepare afresh), or None when there is no usable file for this key and seed (or it does
        not hold every case and item)."""
        path = self._path(seed)
        if path is None:
            return None
        try:
            data, arrays = unpack(path.read_bytes())
            if data.get("format") != FORMAT or data.get("key") != self.key or data.get("seed") != seed:
                return None
            found: dict[tuple[str, str], Any] = {
                (pid, name): None if stored is None else _case(stored, self.cases[pid, name][1], arrays, self._blob)
                for pid, name, stored in data["cases"]}
            if found.keys() != self.cases.keys():
                return None
            draws = {("", i): None if stored is None else _draw(stored, self.items["", i], seed)
                     for i, stored in data["quiz"]}
            return {**found, **draws} if draws.keys() == self.items.keys() else None
        except Exception:  # none yet, damaged, of another version: prepared again
            return None

    def save(self, seed: int, prepared: dict[tuple[str, str], Any]) -> None:
        """Keep the seed's prepared cases and quiz draws (`prepared`: by the keys of `cases` and
        `items`; each kept if it reads back exactly, else as None)."""
        path = self._path(seed)
        if path is None or self.folder is None or prepared.keys() != self.cases.keys() | self.items.keys():
            return
        arrays = _Arrays()
        written, quiz = [], []
        for (pid, name), case in prepared.items():
            if pid == "":
                drawn = _drawn(case)
                quiz.append([name, drawn if drawn is not None and _same_draw(case, _draw(drawn, case.item, seed))
                             else None])
            else:
                written.append((pid, name, case, _stored(case, arrays)))
        data = bytes(arrays.data)
        cases = [[pid, name, stored if stored is not None and _same_case(case, _case(stored, case.case, memoryview(data),
                                                                                      arrays.named)) else None]
                 for pid, name, case, stored in written]
        try:
            base = path.parent.parent.parent
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(base, 0o700)  # hidden cases: only the grader's user may enter
            path.parent.parent.mkdir(mode=0o700, exist_ok=True)
            os.chmod(path.parent.parent, 0o700)
            for blob, content in arrays.blobs.items():  # the large arrays, each once by its content
                blob_path = self.folder / BLOBS / f"{blob}{BLOB_SUFFIX}"
                if not blob_path.is_file():
                    write_private(blob_path, content)
            write_private(path, packed({"format": FORMAT, "key": self.key, "seed": seed, "cases": cases, "quiz": quiz},
                                       data))
            if not self._pruned:
                self._pruned = True
                _prune(path.parent.parent, keep=KEEP, current=path.parent)
        except (OSError, TypeError, ValueError):
            pass  # no cache this time (read-only home, full disk): grading does not need it

    # ------------------------------------------------ large arrays, kept once (see the module's text)

    def _blob(self, name: str) -> np.ndarray:
        """The named blob, as its read-only array (raises on any damage)."""
        with self._blob_lock:
            known = self._blobs.get(name)
            if known is not None:
                self._blobs.move_to_end(name)
                return known
        if len(name) != 64 or not all(c in "0123456789abcdef" for c in name) or self.folder is None:
            raise ValueError("not a blob's name")
        content = (self.folder / BLOBS / f"{name}{BLOB_SUFFIX}").read_bytes()
        if hashlib.sha256(content).hexdigest() != name:
            raise ValueError("a damaged blob")
        array = _blob_array(content)
        with self._blob_lock:
            array = self._blobs.setdefault(name, array)
            self._blobs.move_to_end(name)
            while len(self._blobs) > 1 and sum(a.nbytes for a in self._blobs.values()) > BLOBS_KEPT:
                self._blobs.popitem(last=False)
        return array


class _Arrays:
    """Where `_stored` puts a seed's arrays: a small one's bytes in `data` (the seed file's own,
    named by their place), a large one (BLOB_BYTES or more) as a blob file's content in `blobs`,
    named by the SHA-256 of that content."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.blobs: dict[str, bytes] = {}

    def __call__(self, value: np.ndarray) -> dict:
        if value.nbytes < BLOB_BYTES:
            return array_bytes(value, self.data)
        own = bytearray()
        content = packed(array_bytes(value, own), own)
        name = hashlib.sha256(content).hexdigest()
        self.blobs.setdefault(name, content)
        return {"blob": name}

    def named(self, name: str) -> np.ndarray:
        return _blob_array(self.blobs[name])


def _blob_array(content: bytes) -> np.ndarray:
    """The array a blob file holds, read-only (ValueError for anything else)."""
    node, data = unpack(content)
    array = decode(node, data)
    if not isinstance(array, np.ndarray) or not isinstance(node, dict) or "at" not in node:
        raise ValueError("a blob that is not an array")
    array.flags.writeable = False
    return array


def _stored(case: PreparedCase, arrays: _Arrays) -> dict | None:
    """A prepared case as JSON, its arrays' bytes put in `arrays`, or None when it does not fit
    JSON (read back, it is prepared afresh)."""
    try:
        stored = {"args": [encode(a, arrays=arrays) for a in case.args], "expected": encode(case.expected, arrays=arrays),
                  "inputs": case.inputs}
        return json.loads(json.dumps(stored))  # as it will be read
    except Exception:
        return None


def _case(stored: dict, case: Case, arrays: memoryview | None = None,
          blobs: Callable[[str], np.ndarray] | None = None) -> PreparedCase:
    """A stored case of the course's `case` (`arrays`, `blobs`: where its arrays' bytes are)."""
    return PreparedCase(case, tuple(decode(a, arrays, blobs) for a in stored["args"]),
                        decode(stored["expected"], arrays, blobs), inputs=stored["inputs"])


def _same_case(prepared: PreparedCase, read: PreparedCase) -> bool:
    return _same(prepared.args, read.args) and _same(prepared.expected, read.expected) \
        and prepared.inputs == read.inputs and prepared.wrong_answers is None and prepared.form is None


_DRAWN = ("params", "prompt", "answer", "feedback", "hint")  # a draw's plain fields (its item: the course's)


def _drawn(draw: Draw) -> dict | None:
    """A quiz draw as JSON (its item named by the caller), or None when it does not fit JSON."""
    try:
        stored = {**{name: getattr(draw, name) for name in _DRAWN},
                  "choices": [plain(c) for c in draw.choices], "wrong": [plain(w) for w in draw.wrong]}
        return json.loads(json.dumps(stored))  # as it will be read
    except Exception:
        return None


def _draw(stored: dict, item: QuizItem, seed: int) -> Draw:
    """A stored draw of the course's `item` for `seed`."""
    return Draw(item=item, seed=seed, params=stored["params"], prompt=stored["prompt"],
                choices=tuple(Choice(**c) for c in stored["choices"]), answer=stored["answer"],
                feedback=stored["feedback"], wrong=tuple(DrawnWrongValue(**w) for w in stored["wrong"]),
                hint=stored["hint"])


def _same_draw(drawn: Draw, read: Draw) -> bool:
    """Whether `read` is `drawn` exactly: equal, and spelled alike (1 and 1.0 are equal, not alike)."""
    return drawn == read and repr(drawn) == repr(read)


def _prune(folder: Path, keep: int, current: Path) -> None:
    """Delete all but the `keep` most recently used keys' folders (always keeping `current`)."""
    found = sorted((p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()),
                   key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in [p for p in found if p != current][max(0, keep - 1):]:
        shutil.rmtree(old, ignore_errors=True)
