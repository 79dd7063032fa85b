"""Engine-side file access to a tree an agent could have changed, without ever following its links.

A confined agent can leave anything in its workspace: a symlink to
``/etc/shadow`` or to ``/proc/<engine>/environ``, a FIFO that blocks a reader
forever, a link to ``/dev/zero``, a hard link, a directory swapped for a link
between two calls. Code outside the sandbox (the engine's own tools, post-run
reads of artifacts, writes of the agent's output, snapshots) must treat every
path in such a tree as an attack. :class:`Beneath` opens a tree's root once
and resolves every path from that descriptor with ``openat2(2)`` and
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV``: no component may be a symlink, nothing may leave the root,
cross a mount or go through ``/proc`` magic links. Where the kernel has no
``openat2`` (before Linux 5.6), the same guarantees come from walking one
component at a time with ``O_NOFOLLOW``.

On top of that: reads accept only regular files with one link, opened
non-blocking (a FIFO can never stall the event loop), and read at most a
byte limit; writes replace only such files, never through a link; listings
and deletions walk by descriptor and never descend into a link. Violations
raise :class:`UnsafePath`, a ``ValueError`` whose message is fit to show the
agent.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = [
    "Beneath",
    "Entry",
    "MAX_READ_BYTES",
    "UnsafePath",
    "openat2_available",
]

#: The largest file the engine reads out of a sandbox for one call (bigger files are refused, not truncated).
MAX_READ_BYTES = 4 << 20
#: The most entries one listing walks (an agent can create millions of files).
MAX_ENTRIES = 20_000

_RESOLVE_NO_XDEV, _RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x01, 0x02, 0x04, 0x08
_RESOLVE = _RESOLVE_NO_XDEV | _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}.get(platform.machine())
_O_PATH = getattr(os, "O_PATH", 0o10000000)


class UnsafePath(ValueError):
    """A path in an agent's tree that the engine will not follow: a link, a special file, outside the root."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _openat2(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    fd = _libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


def openat2_available() -> bool:
    """Whether this kernel has ``openat2`` (Linux 5.6 and later); otherwise a component walk is used."""
    if _SYS_OPENAT2 is None:
        return False
    try:
        os.close(_openat2(-100, "/", _O_PATH | os.O_DIRECTORY))  # AT_FDCWD
    except OSError as exc:
        return exc.errno not in (errno.ENOSYS, errno.EPERM)
    return True


_HAS_OPENAT2 = openat2_available()


def _parts(path: str | PurePosixPath) -> list[str]:
    """The components of a sandbox path ('/a/b', 'a/b'); '..' anywhere is refused outright."""
    parts = [part for part in PurePosixPath(str(path)).parts if part not in ("/", ".", "")]
    if ".." in parts:
        raise UnsafePath(f"path {path} goes up with '..'")
    if any("\x00" in part for part in parts):
        raise UnsafePath("path contains a NUL character")
    return parts


@dataclass(frozen=True)
class Entry:
    """One entry of a listing: its path below the root, its kind (file, dir, link, other) and size."""

    path: str
    kind: str
    size: int


class Beneath:
    """A directory tree the engine reads and writes without following anything an agent could have made.

    Opened on a trusted path (the engine created the directory); every other
    path is relative to it and resolved by descriptor. Use it as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, root: Path | str) -> None:
        """Open ``root``, a directory the engine itself created."""
        self.root = Path(root)
        self._fd = os.open(self.root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)

    def close(self) -> None:
        """Release the root descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Beneath:
        """The tree, open."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the root descriptor."""
        self.close()

    # ------------------------------------------------------------------ resolution

    def _open(self, parts: list[str], flags: int, mode: int = 0o644) -> int:
        """Open the path ``parts`` below the root with ``flags``; no component may be a link."""
        if not parts:
            return os.dup(self._fd) if flags & _O_PATH else os.open(".", flags | os.O_CLOEXEC, dir_fd=self._fd)
        try:
            if _HAS_OPENAT2:
                return _openat2(self._fd, "/".join(parts), flags, mode)
            return self._walk_open(parts, flags, mode)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EXDEV, errno.EMLINK):
                raise UnsafePath(f"{'/'.join(parts)} goes through a link or leaves the sandbox") from None
            if exc.errno == errno.ENOTDIR:  # a component is a file, or (walking) a link opened as itself
                raise UnsafePath(f"{'/'.join(parts)}: a component is not a directory") from None
            raise

    def _walk_open(self, parts: list[str], flags: int, mode: int) -> int:
        """The openat2 guarantees without openat2: each directory opened with O_NOFOLLOW, by descriptor."""
        fd = os.dup(self._fd)
        try:
            for part in parts[:-1]:
                following = os.open(part, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = following
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        finally:
            os.close(fd)

    def _parent(self, parts: list[str], create: bool = False) -> int:
        """A descriptor of the directory holding ``parts[-1]``, made (as real directories) when ``create``."""
        fd = self._open([], _O_PATH | os.O_DIRECTORY)
        try:
            for depth, part in enumerate(parts[:-1]):
                try:
                    following = self._open(parts[: depth + 1], _O_PATH | os.O_DIRECTORY)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    following = self._open(parts[: depth + 1], _O_PATH | os.O_DIRECTORY)
                except NotADirectoryError:
                    raise UnsafePath(f"{'/'.join(parts[: depth + 1])} is not a directory") from None
                os.close(fd)
                fd = following
            return fd
        except BaseException:
            os.close(fd)
            raise

    # ------------------------------------------------------------------ reads

    def lstat(self, path: str | PurePosixPath) -> os.stat_result | None:
        """What is at ``path`` (not following a final link), or None when nothing is."""
        parts = _parts(path)
        if not parts:
            return os.fstat(self._fd)
        try:
            parent = self._parent(parts)
        except (FileNotFoundError, UnsafePath):
            return None
        try:
            return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(parent)

    def check(self, path: str | PurePosixPath) -> None:
        """Raise UnsafePath when a component of ``path`` that exists is a link or a special file.

        Tools call it first, so an agent that points one at a link it planted
        is told so (and can be recorded), rather than just "not found".
        """
        parts = _parts(path)
        for depth in range(1, len(parts) + 1):
            info = self.lstat("/".join(parts[:depth]))
            if info is None:
                return
            if stat.S_ISLNK(info.st_mode):
                raise UnsafePath(f"{'/'.join(parts[:depth])} is a link, which the engine does not follow")
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                raise UnsafePath(f"{'/'.join(parts[:depth])} is not a regular file or directory")

    def read_bytes(self, path: str | PurePosixPath, limit: int = MAX_READ_BYTES) -> bytes:
        """The content of a regular file with one link; a larger file than ``limit`` is refused."""
        parts = _parts(path)
        fd = self._open(parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(f"{'/'.join(parts) or '/'} is not a regular file")
            if info.st_nlink > 1:
                raise UnsafePath(f"{'/'.join(parts)} has other hard links")
            if info.st_size > limit:
                raise UnsafePath(f"{'/'.join(parts)} is larger than {limit} bytes")
            chunks, total = [], 0
            while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:  # it grew while being read
                    raise UnsafePath(f"{'/'.join(parts)} is larger than {limit} bytes")
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_head(self, path: str | PurePosixPath, size: int) -> bytes:
        """The first ``size`` bytes of a regular file (of any length) reached without links."""
        parts = _parts(path)
        fd = self._open(parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePath(f"{'/'.join(parts) or '/'} is not a regular file")
            return os.read(fd, size)
        finally:
            os.close(fd)

    def fingerprint(self, path: str | PurePosixPath) -> str:
        """A digest of what is at ``path``, for state snapshots: content for a file, target for a link, else kind.

        A regular file is read in chunks whatever its size (a box's file-size
        limit bounds it); nothing is followed and no special file is opened.
        """
        import hashlib

        parts = _parts(path)
        info = self.lstat(path)
        if info is None:
            return "missing"
        if stat.S_ISLNK(info.st_mode):
            parent = self._parent(parts)
            try:
                target = os.readlink(parts[-1], dir_fd=parent)
            finally:
                os.close(parent)
            return "symlink:sha256:" + hashlib.sha256(os.fsencode(target)).hexdigest()
        if not stat.S_ISREG(info.st_mode):
            return f"special:{stat.S_IFMT(info.st_mode):o}"
        digest = hashlib.sha256()
        fd = self._open(parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "special:replaced"
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
        finally:
            os.close(fd)
        return "sha256:" + digest.hexdigest()

    def read_text(self, path: str | PurePosixPath, limit: int = MAX_READ_BYTES) -> str:
        """:meth:`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
        return self.read_bytes(path, limit).decode("utf-8", errors="replace")

    def is_file(self, path: str | PurePosixPath) -> bool:
        """Whether ``path`` is a regular file reached without links."""
        info = self.lstat(path)
        return info is not None and stat.S_ISREG(info.st_mode)

    def is_dir(self, path: str | PurePosixPath) -> bool:
        """Whether ``path`` is a directory reached without links."""
        info = self.lstat(path)
        return info is not None and stat.S_ISDIR(info.st_mode)

    def walk(self, path: str | PurePosixPath = "", limit: int = MAX_ENTRIES) -> Iterator[Entry]:
        """Every entry below ``path``, directory by directory in sorted order, never descending into a link.

        Stops with :class:`UnsafePath` after ``limit`` entries, so an agent's
        million files cannot make the engine walk forever.
        """
        base = _parts(path)
        count = 0
        stack = [base]
        while stack:
            directory = stack.pop()
            fd = self._open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                names = sorted(os.listdir(fd))
                found = []
                for name in names:
                    count += 1
                    if count > limit:
                        raise UnsafePath(f"more than {limit} entries below /{'/'.join(base)}")
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    kind = (
                        "file"
                        if stat.S_ISREG(info.st_mode)
                        else "dir"
                        if stat.S_ISDIR(info.st_mode)
                        else "link"
                        if stat.S_ISLNK(info.st_mode)
                        else "other"
                    )
                    found.append(Entry("/".join([*directory, name]), kind, info.st_size))
            finally:
                os.close(fd)
            yield from found
            stack.extend(entry.path.split("/") for entry in reversed(found) if entry.kind == "dir")

    def files(self, path: str | PurePosixPath = "") -> list[str]:
        """Paths of the regular files below ``path``, sorted."""
        return sorted(entry.path for entry in self.walk(path) if entry.kind == "file")

    # ------------------------------------------------------------------ writes

    def write_bytes(self, path: str | PurePosixPath, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a regular file, making missing parent directories; never writes through a link.

        The data goes to a new file that is then renamed over the old one, so
        a hard link the agent made to some other file is replaced, not written through.
        """
        parts = _parts(path)
        if not parts:
            raise UnsafePath("cannot write the root")
        parent = self._parent(parts, create=True)
        try:
            try:
                existing = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                raise UnsafePath(f"{'/'.join(parts)} exists and is not a regular file")
            scratch = f".{parts[-1]}.assay-{os.getpid()}-{id(data):x}"
            fd = os.open(
                scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(scratch, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        finally:
            os.close(parent)

    def write_text(self, path: str | PurePosixPath, text: str) -> None:
        """:meth:`write_bytes` of UTF-8 text."""
        self.write_bytes(path, text.encode("utf-8"))

    def mkdir(self, path: str | PurePosixPath) -> None:
        """Make a directory and its parents (as real directories; an existing link is refused)."""
        parts = _parts(path)
        if parts:
            os.close(self._parent([*parts, "x"], create=True))

    def delete(self, path: str | PurePosixPath) -> int:
        """Remove a file, a link (not its target) or a directory tree; returns how many entries went.

        The tree is removed by descriptor, so a directory swapped for a link
        mid-way stops the removal instead of redirecting it.
        """
        parts = _parts(path)
        if not parts:
            raise UnsafePath("cannot delete the root")
        parent = self._parent(parts)
        try:
            return _remove(parent, parts[-1])
        finally:
            os.close(parent)


def _remove(dir_fd: int, name: str) -> int:
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return 1
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if os.fstat(fd).st_ino != info.st_ino:
            raise UnsafePath(f"{name} changed while it was being removed")
        removed = sum(_remove(fd, child) for child in os.listdir(fd))
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return removed + 1
