"""Deterministic zip and tar archives: the same files give byte-identical bytes.

Entries are sorted by name, stamped with one fixed time (1980-01-01, the earliest a zip can
hold) and fixed permissions, and compressed with fixed settings. A name ending in "/" is a
(empty) folder entry.
"""
from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterable, Mapping

__all__ = ["FIXED_TIME", "tar_bytes", "zip_bytes"]

FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def zip_bytes(files: Mapping[str, str | bytes], executable: Iterable[str] = (), stored: Iterable[str] = ()) -> bytes:
    """A zip of `files` (archive name -> content; text is UTF-8); names in `executable` get mode 755;
    names in `stored` are kept uncompressed (already compressed content, such as wheels)."""
    executable, stored = set(executable), set(stored)
    unknown = executable - set(files)
    if unknown:
        raise ValueError(f"executable names not in the archive: {', '.join(sorted(unknown))}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(files):
            content = files[name]
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.create_system = 3  # Unix, so the mode below is honoured on extraction
            if name.endswith("/"):
                info.external_attr = (0o40755 << 16) | 0x10  # a folder (and the MS-DOS folder bit)
                archive.writestr(info, b"")
                continue
            method = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            info.compress_type = method
            info.external_attr = ((0o100755 if name in executable else 0o100644) & 0xFFFF) << 16
            archive.writestr(info, content.encode("utf-8") if isinstance(content, str) else content,
                             compress_type=method, compresslevel=9 if method == zipfile.ZIP_DEFLATED else None)
    return buffer.getvalue()


def tar_bytes(files: Mapping[str, str | bytes], executable: Iterable[str] = ()) -> bytes:
    """An uncompressed tar of `files` (archive name -> content; text is UTF-8), sorted, owned by
    uid 0 with no names, stamped with the zip's fixed time; names in `executable` get mode 755."""
    executable = set(executable)
    unknown = executable - set(files)
    if unknown:
        raise ValueError(f"executable names not in the archive: {', '.join(sorted(unknown))}")
    stamp = 315532800  # FIXED_TIME, 1980-01-01 00:00:00 UTC
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        folders: set[str] = set()
        for name in sorted(files):
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):  # each folder once, before its files
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, stamp
                    archive.addfile(info)
            content = files[name]
            data = content.encode("utf-8") if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), stamp
            info.mode = 0o755 if name in executable else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
