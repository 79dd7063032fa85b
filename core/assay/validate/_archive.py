"""Unpacking untrusted bundle archives without letting them escape their folder.

Every member is checked before anything is written: no absolute paths, no
``..`` segments, no links or device files, no duplicate names, and limits on
file count, total size and compression ratio (zip bombs). Extraction then
counts the bytes it really writes, so a header that lies about sizes cannot
get past the limits either.
"""

from __future__ import annotations

import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ArchiveError

__all__ = ["ArchiveLimits", "extract_archive"]


@dataclass(frozen=True)
class ArchiveLimits:
    """Upper bounds for one archive."""

    max_files: int = 10_000
    max_total_bytes: int = 4 << 30
    max_ratio: int = 1_000


def _member_path(name: str) -> PurePosixPath:
    if not name or "\\" in name or "\x00" in name:
        raise ArchiveError(f"member {name!r} has an unsafe name")
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("/") or (len(path.parts) > 0 and ":" in path.parts[0]):
        raise ArchiveError(f"member {name!r} has an absolute path")
    if any(part == ".." for part in path.parts):
        raise ArchiveError(f"member {name!r} escapes the archive folder (path traversal)")
    return path


def _check_members(archive: zipfile.ZipFile, limits: ArchiveLimits) -> list[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > limits.max_files:
        raise ArchiveError(f"{len(members)} members exceed the limit of {limits.max_files}")
    total = 0
    seen: set[str] = set()
    for info in members:
        path = _member_path(info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveError(f"member {info.filename!r} is a symbolic link")
        if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ArchiveError(f"member {info.filename!r} is not a regular file or folder")
        key = path.as_posix().rstrip("/")
        if key in seen:
            raise ArchiveError(f"member {info.filename!r} appears twice")
        seen.add(key)
        total += info.file_size
        if total > limits.max_total_bytes:
            raise ArchiveError(f"uncompressed size exceeds the limit of {limits.max_total_bytes} bytes")
        if info.compress_size and info.file_size / info.compress_size > limits.max_ratio:
            raise ArchiveError(f"member {info.filename!r} has a compression ratio over {limits.max_ratio} (zip bomb)")
    return members


def extract_archive(archive_path: Path, destination: Path, limits: ArchiveLimits = ArchiveLimits()) -> Path:
    """Check, then extract a zip archive into ``destination``; returns the bundle root inside it.

    The root is the destination itself, or its single top-level folder when
    the archive wraps everything in one. Raises :class:`ArchiveError`.
    """
    try:
        with zipfile.ZipFile(archive_path) as archive:
            members = _check_members(archive, limits)
            written = 0
            root = destination.resolve()
            for info in members:
                target = (root / info.filename).resolve()
                if root != target and root not in target.parents:
                    raise ArchiveError(f"member {info.filename!r} escapes the archive folder")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "xb") as sink:
                    remaining = info.file_size
                    while chunk := source.read(1 << 20):
                        remaining -= len(chunk)
                        written += len(chunk)
                        if remaining < 0 or written > limits.max_total_bytes:
                            raise ArchiveError(f"member {info.filename!r} is larger than its header says")
                        sink.write(chunk)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
        raise ArchiveError(f"not a readable zip archive: {exc}") from None
    except OSError as exc:
        raise ArchiveError(f"cannot extract: {exc.strerror or exc}") from None
    entries = list(destination.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not (destination / "bundle.json").exists():
        return entries[0]
    return destination
