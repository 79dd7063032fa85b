"""Unpacking untrusted bundle archives without letting them escape their folder.

Every member is checked before anything is written: no absolute paths, no
``..`` segments, no links or device files, no encryption, no duplicate
names, and limits on file count, total size and compression ratio (zip
bombs). Extraction then counts the bytes it really writes against a budget
that grows with the archive's own size (:attr:`ArchiveLimits.max_expansion`),
so neither a header that lies about sizes nor many members that each stay
under the ratio can write much more than an honest bundle of that size would.
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
    #: Bytes written per byte of archive, over the whole archive (rows compress 10-50x), with a floor for tiny ones.
    max_expansion: int = 200
    min_budget_bytes: int = 64 << 20

    def budget(self, archive_bytes: int) -> int:
        """How many bytes an archive of ``archive_bytes`` may write in all."""
        return min(self.max_total_bytes, max(self.min_budget_bytes, archive_bytes * self.max_expansion))


def _member_path(name: str) -> PurePosixPath:
    if not name or "\\" in name or "\x00" in name:
        raise ArchiveError(f"member {name!r} has an unsafe name")
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("/") or (len(path.parts) > 0 and ":" in path.parts[0]):
        raise ArchiveError(f"member {name!r} has an absolute path")
    if any(part == ".." for part in path.parts):
        raise ArchiveError(f"member {name!r} escapes the archive folder (path traversal)")
    return path


def _check_members(archive: zipfile.ZipFile, limits: ArchiveLimits, budget: int) -> list[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > limits.max_files:
        raise ArchiveError(f"{len(members)} members exceed the limit of {limits.max_files}")
    total = 0
    seen: set[str] = set()
    for info in members:
        path = _member_path(info.filename)
        if info.flag_bits & 0x1:
            raise ArchiveError(f"member {info.filename!r} is encrypted; a bundle must be readable without a password")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveError(f"member {info.filename!r} is a symbolic link")
        # No file type at all (Python's writestr, many Windows tools) means a plain file; any other type is refused.
        if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ArchiveError(f"member {info.filename!r} is not a regular file or folder")
        key = path.as_posix().rstrip("/")
        if key in seen:
            raise ArchiveError(f"member {info.filename!r} appears twice")
        seen.add(key)
        total += info.file_size
        if total > budget:
            raise ArchiveError(f"uncompressed size exceeds this archive's budget of {budget} bytes")
        if info.compress_size and info.file_size / info.compress_size > limits.max_ratio:
            raise ArchiveError(f"member {info.filename!r} has a compression ratio over {limits.max_ratio} (zip bomb)")
    return members


def extract_archive(archive_path: Path, destination: Path, limits: ArchiveLimits = ArchiveLimits()) -> Path:
    """Check, then extract a zip archive into ``destination``; returns the bundle root inside it.

    The root is the destination itself, or its single top-level folder when
    the archive wraps everything in one. Raises :class:`ArchiveError`.
    """
    try:
        budget = limits.budget(archive_path.stat().st_size)
        with zipfile.ZipFile(archive_path) as archive:
            members = _check_members(archive, limits, budget)
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
                        if remaining < 0:
                            raise ArchiveError(f"member {info.filename!r} is larger than its header says")
                        if written > budget:
                            raise ArchiveError(f"extraction passed this archive's budget of {budget} bytes")
                        sink.write(chunk)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError, ValueError,
            RuntimeError) as exc:  # fmt: skip  # RuntimeError: zipfile's "password required"
        raise ArchiveError(f"not a readable zip archive: {exc}") from None
    except OSError as exc:
        raise ArchiveError(f"cannot extract: {exc.strerror or exc}") from None
    entries = list(destination.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not (destination / "bundle.json").exists():
        return entries[0]
    return destination
