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
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_PATH_BYTES",
    "MAX_READ_BYTES",
    "UnsafePath",
    "openat2_available",
    "remove_tree",
]

#: The largest file the engine reads out of a sandbox for one call (bigger files are refused, not truncated).
MAX_READ_BYTES = 4 << 20
#: The most entries one listing walks (an agent can create millions of files).
MAX_ENTRIES = 20_000
#: The deepest path the engine names or walks into, in components (agents' code can nest thousands deep).
MAX_DEPTH = 64
#: The longest path the engine names, in bytes (the kernel's own limit is 4096).
MAX_PATH_BYTES = 2048

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
    text = str(path)
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise UnsafePath(f"path is longer than {MAX_PATH_BYTES} bytes")
    parts = [part for part in PurePosixPath(text).parts if part not in ("/", ".", "")]
    if ".." in parts:
        raise UnsafePath(f"path {path} goes up with '..'")
    if any("\x00" in part for part in parts):
        raise UnsafePath("path contains a NUL character")
    if len(parts) > MAX_DEPTH:
        raise UnsafePath(f"path is deeper than {MAX_DEPTH} directories")
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
        """A digest of what is at ``path`` for state snapshots, in one of the spec's ``state_digest`` forms.

        ``sha256:<hex>`` for a regular file's content, ``sparse:sha256:<hex>``
        for one with holes (see :func:`_data_digest`), ``symlink:sha256:<hex>``
        over a link's target (never followed), ``special:<kind>`` for a FIFO,
        socket, device or directory (none is opened), ``special:replaced`` for
        a file swapped for another kind while it was read,
        ``unreadable:<errno name>`` for one the engine may not read, and
        ``missing`` for one gone. It never raises for what an agent left: any
        of these is the agent's state, recorded, and no row can be refused for
        it. A regular file is read in chunks whatever its size (a box's
        file-size limit bounds it).
        """
        import hashlib

        parts = _parts(path)
        try:
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
                return "special:" + _special_kind(info.st_mode)
            fd = self._open(parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            return "missing"
        except UnsafePath:
            return "special:replaced"  # a component was swapped for a link or a special file meanwhile
        except OSError as exc:
            return "unreadable:" + (errno.errorcode.get(exc.errno or 0) or "EIO")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "special:replaced"
            sparse, hexdigest = _data_digest(fd)
            return ("sparse:sha256:" if sparse else "sha256:") + hexdigest
        except OSError as exc:
            return "unreadable:" + (errno.errorcode.get(exc.errno or 0) or "EIO")
        finally:
            os.close(fd)

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
        million files cannot make the engine walk forever. A directory
        :data:`MAX_DEPTH` levels down is listed with kind ``deep`` and not
        entered (what lies below it is not walked).
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
                    entry_path = "/".join([*directory, name])
                    too_far = len(directory) + 1 >= MAX_DEPTH or len(os.fsencode(entry_path)) >= MAX_PATH_BYTES - 256
                    if kind == "dir" and too_far:
                        kind = "deep"
                    found.append(Entry(entry_path, kind, info.st_size))
            finally:
                os.close(fd)
            yield from found
            stack.extend(entry.path.split("/") for entry in reversed(found) if entry.kind == "dir")

    def chown_all(self, uid: int, gid: int, limit: int = 1 << 20) -> int:
        """Give the root and everything below it (links themselves, never their targets) to ``uid``:``gid``.

        Walks like :meth:`walk` (by descriptor, never into a link, not below
        :data:`MAX_DEPTH`) and changes only what another user owns; returns how
        many entries changed. Stops with UnsafePath after ``limit`` entries.
        """
        changed, count = 0, 0
        stack: list[list[str]] = [[]]
        while stack:
            directory = stack.pop()
            fd = self._open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if not directory and (os.fstat(fd).st_uid, os.fstat(fd).st_gid) != (uid, gid):
                    os.fchown(fd, uid, gid)
                    changed += 1
                for name in os.listdir(fd):
                    count += 1
                    if count > limit:
                        raise UnsafePath(f"more than {limit} entries to hand over")
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if (info.st_uid, info.st_gid) != (uid, gid):
                        os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
                        changed += 1
                    path_bytes = len(os.fsencode("/".join([*directory, name])))
                    if (
                        stat.S_ISDIR(info.st_mode)
                        and len(directory) + 1 < MAX_DEPTH
                        and path_bytes < MAX_PATH_BYTES - 256
                    ):
                        stack.append([*directory, name])
            finally:
                os.close(fd)
        return changed

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

    def chmod(self, path: str | PurePosixPath, mode: int) -> None:
        """Set the mode of a file or directory reached without links (a link itself is refused)."""
        parts = _parts(path)
        fd = self._open(parts, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            info = os.fstat(fd)
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise UnsafePath(f"{'/'.join(parts) or '/'} is not a regular file or directory")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)

    def readlink(self, path: str | PurePosixPath) -> str | None:
        """The target of the link at ``path`` (never followed), or None when no link is there."""
        parts = _parts(path)
        info = self.lstat(path)
        if not parts or info is None or not stat.S_ISLNK(info.st_mode):
            return None
        parent = self._parent(parts)
        try:
            return os.readlink(parts[-1], dir_fd=parent)
        finally:
            os.close(parent)

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


def _data_digest(fd: int) -> tuple[bool, str]:
    """A digest of a file's content that reads only its data, never its holes.

    An agent can make a file of terabytes that holds nothing (a sparse file);
    hashing it byte by byte would take the engine hours. A file without holes
    (every file written the ordinary way) gets the plain SHA-256 of its
    content, as ``sha256sum`` gives; a file with holes gets the SHA-256 of its
    size and data extents (offset, length, bytes), which is as unique and
    costs only the data the box's disk limit allows. Returns (has holes, hex
    digest).
    """
    import hashlib

    size = os.fstat(fd).st_size
    extents: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
            extents.append((start, end))
            offset = end
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data after offset, the rest is a hole
            raise
    sparse = sum(end - start for start, end in extents) != size
    digest = hashlib.sha256()
    if sparse:
        digest.update(b"sparse:%d" % size)
    for start, end in extents:
        if sparse:
            digest.update(b"@%d+%d:" % (start, end - start))
        os.lseek(fd, start, os.SEEK_SET)
        position = start
        while position < end and (chunk := os.read(fd, min(1 << 20, end - position))):
            digest.update(chunk)
            position += len(chunk)
    return sparse, digest.hexdigest()


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "char-device"),
    (stat.S_ISBLK, "block-device"),
    (stat.S_ISDIR, "directory"),
)


def _special_kind(mode: int) -> str:
    """The ``special:`` kind of a file type that is neither a regular file nor a link."""
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), "other")


def _remove(dir_fd: int, name: str) -> int:
    """Remove ``name`` in ``dir_fd`` and everything below it, by descriptor, at any depth; returns entries removed.

    Iterative, holding at most :data:`_OPEN_DIRECTORIES` descriptors: a
    directory deeper than that is first moved up to the top of the tree
    being removed (a rename within it), so an agent's tree thousands of levels
    deep is removed without recursion or running out of descriptors. No link
    is followed, and a directory swapped for something else mid-way stops the
    removal.
    """
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return 1
    top = _open_directory(dir_fd, name)
    if os.fstat(top).st_ino != info.st_ino:
        os.close(top)
        raise UnsafePath(f"{name} changed while it was being removed")
    removed = 0
    # Each frame: (descriptor, its name in the frame below, the names left to handle in it).
    stack: list[tuple[int, str, list[str]]] = [(top, name, sorted(os.listdir(top), reverse=True))]
    moved = 0
    try:
        while stack:
            fd, own_name, pending = stack[-1]
            if not pending:
                pending.extend(sorted(os.listdir(fd), reverse=True))  # moved-up directories, late arrivals
                if pending:
                    continue
                stack.pop()
                os.close(fd)
                if stack:
                    os.rmdir(own_name, dir_fd=stack[-1][0])
                    removed += 1
                continue
            child = pending.pop()
            try:
                child_info = os.stat(child, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(child_info.st_mode):
                os.unlink(child, dir_fd=fd)
                removed += 1
                continue
            if len(stack) >= _OPEN_DIRECTORIES:
                moved += 1
                os.rename(child, f".assay-removing-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                continue
            child_fd = _open_directory(fd, child)
            if os.fstat(child_fd).st_ino != child_info.st_ino:
                os.close(child_fd)
                raise UnsafePath(f"{child} changed while it was being removed")
            stack.append((child_fd, child, sorted(os.listdir(child_fd), reverse=True)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return removed + 1


def _open_directory(dir_fd: int, name: str) -> int:
    """Open a directory to empty it; one its owner made unreadable (mode 000) is made readable first."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return os.open(name, flags, dir_fd=dir_fd)


def remove_tree(path: Path | str) -> int:
    """Remove a directory tree the engine made and an agent filled, at any depth, following nothing inside it."""
    path = Path(path)
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _remove(parent, path.name)
    finally:
        os.close(parent)


#: How many directory descriptors a removal holds at once (see _remove).
_OPEN_DIRECTORIES = 32
