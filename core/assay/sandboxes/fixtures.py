"""Reading a case pack's fixtures without following anything the pack's author put in them.

A case pack is untrusted input: its fixture tree could hold a link to
``/etc/shadow`` or ``/proc/self/environ`` (the engine's API keys), added after
the pack's manifest was locked. The engine copies fixtures into work items
and reads fixture files into sandboxes as its own user, so it does both here,
through :class:`~assay.sandboxes.beneath.Beneath`: a link, a special file or a
path that leaves the pack is an error naming the fixture, never followed.
"""

from __future__ import annotations

import stat
from pathlib import Path

from ..errors import PackError
from .beneath import MAX_ENTRIES, Beneath, UnsafePath

__all__ = ["MAX_FIXTURE_BYTES", "copy_fixture_tree", "fixture_dir", "read_fixture"]

#: The largest single fixture file a case may use.
MAX_FIXTURE_BYTES = 64 << 20


def read_fixture(pack_root: Path | str, relative: str, limit: int = MAX_FIXTURE_BYTES) -> bytes:
    """The bytes of the pack file ``relative``; PackError when it is a link, not a regular file, or too big."""
    try:
        with Beneath(Path(pack_root).resolve()) as pack:
            return pack.read_bytes(relative, limit=limit)
    except (UnsafePath, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PackError(f"fixture {relative!r} of the pack cannot be used: {reason}") from None


def fixture_dir(pack_root: Path | str, relative: str) -> Path:
    """The pack directory ``relative`` as a host path, once no component of it is a link (else PackError).

    Beneath a path this returns, every access still goes through
    :class:`~assay.sandboxes.beneath.Beneath`; this only makes the path itself
    safe to open as a root.
    """
    root = Path(pack_root).resolve()
    try:
        with Beneath(root) as pack:
            pack.check(relative)
            if not pack.is_dir(relative):
                raise PackError(f"fixture tree {relative!r} is not a directory of the pack")
    except UnsafePath as exc:
        raise PackError(f"fixture tree {relative!r} of the pack cannot be used: {exc}") from None
    return root / relative.strip("/")


_CACHES = frozenset({"__pycache__"})


def copy_fixture_tree(pack_root: Path | str, relative: str, destination: Path) -> int:
    """Copy the pack directory ``relative`` into ``destination`` (an engine-made directory); returns files copied.

    Regular files keep their permission bits; a link or special file anywhere
    in the tree, or more than the walk limit of entries, is a PackError.
    """
    copied = 0
    try:
        with Beneath(Path(pack_root).resolve()) as pack, Beneath(destination) as target:
            if not pack.is_dir(relative):
                raise PackError(f"fixture tree {relative!r} is not a directory of the pack")
            base = relative.strip("/")
            for entry in pack.walk(base, limit=MAX_ENTRIES):
                inside = entry.path[len(base) :].lstrip("/")
                if _CACHES & set(inside.split("/")):
                    continue  # bytecode an installer compiled is no part of the pack (nor of its digest)
                if entry.kind == "dir":
                    target.mkdir(inside)
                elif entry.kind == "file":
                    info = pack.lstat(entry.path)
                    mode = stat.S_IMODE(info.st_mode) & 0o755 if info is not None else 0o644
                    target.write_bytes(inside, pack.read_bytes(entry.path, limit=MAX_FIXTURE_BYTES), mode=mode | 0o600)
                    copied += 1
                else:
                    raise PackError(
                        f"fixture tree {relative!r} holds {entry.path!r}, a {entry.kind}: packs hold no links"
                    )
    except (UnsafePath, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PackError(f"fixture tree {relative!r} of the pack cannot be copied: {reason}") from None
    return copied
