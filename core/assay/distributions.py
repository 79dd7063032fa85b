"""A digest of what a distribution installed: which code a plugin really is, beyond the name and version it claims.

A distribution's RECORD lists its installed files. The digest is taken over the
files as they are now (relative path and content hash, sorted), not over the
hashes RECORD claims, so an installed file edited after installation changes it.
An editable install records only a path file; the import packages it names are
then read from the directory that file points at. Compiled caches and the
``.dist-info`` folder are left out: they differ between machines that run the
same code.
"""

from __future__ import annotations

import functools
import hashlib
import os
from importlib import metadata
from pathlib import Path

__all__ = ["files_digest"]

_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _skipped(relative: str) -> bool:
    parts = relative.replace("\\", "/").split("/")
    return (
        parts[0].endswith(".dist-info")
        or parts[0] == ".."
        or "__pycache__" in parts
        or relative.endswith(_SKIPPED_SUFFIXES)
    )


def _file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _editable_roots(dist: metadata.Distribution, listed: list[str]) -> list[tuple[str, Path]]:
    """(package, folder) of the import packages an editable install maps through its ``.pth`` file."""
    packages = sorted({entry.split("/", 1)[0] for entry in listed if "/" in entry and not _skipped(entry)})
    roots: list[tuple[str, Path]] = []
    for entry in listed:
        if not entry.endswith(".pth"):
            continue
        try:
            lines = Path(str(dist.locate_file(entry))).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            base = Path(line.strip())
            if not line.strip() or line.startswith(("#", "import")) or not base.is_dir():
                continue
            roots += [(package, base / package) for package in packages if (base / package).is_dir()]
    return roots


@functools.cache
def files_digest(distribution: str | None) -> str | None:
    """``sha256:<hex>`` over the installed files of ``distribution``, or None when it is not installed.

    Computed once per process and distribution (a run asks for it once per
    registered component).
    """
    if not distribution:
        return None
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    listed = [str(entry) for entry in dist.files or ()]
    lines: list[str] = []
    for relative in listed:
        if _skipped(relative):
            continue
        content = _file_sha256(Path(str(dist.locate_file(relative))))
        lines.append(f"{relative}\0{content or 'unreadable'}")
    for package, folder in _editable_roots(dist, listed):
        for directory, subdirectories, files in os.walk(folder):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in files:
                path = Path(directory, name)
                relative = f"{package}/{path.relative_to(folder).as_posix()}"
                if not _skipped(relative) and not path.is_symlink():
                    lines.append(f"{relative}\0{_file_sha256(path) or 'unreadable'}")
    total = hashlib.sha256("\n".join(sorted(set(lines))).encode("utf-8"))
    return f"sha256:{total.hexdigest()}"
