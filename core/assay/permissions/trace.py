"""What a command really touched, read from ``strace`` output.

The jail and ``assay permissions trace`` run commands under ``strace`` with
:data:`STRACE_OPTIONS` (follow forks, quiet, ``-y`` so descriptors print the
path they refer to) and hand the text to :func:`parse_strace`, which returns
the exact paths read, written and executed, and the calls refused with
``EACCES``, ``EPERM`` or ``EROFS`` as :class:`Denial` records.

Only the accesses the jail enforces are counted: opening a file or directory
(read, write or both, by its flags), executing, and changing a directory's
entries (create, remove, rename, link, ``mknod``, ``truncate``). Metadata
calls (``stat``, ``access``, ``readlink``, ``chmod``, ``utimensat``...) are
not, because Landlock does not govern them either, and nor are ``O_PATH``
opens. Paths are reported as the command named them (relative ones resolved
against the process's working directory, which is tracked through ``chdir``,
``fchdir`` and forks), not with symlinks resolved.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import StraceNotFound
from .model import AXES, PermissionSet

__all__ = [
    "Denial",
    "STRACE_OPTIONS",
    "StraceNotFound",
    "UNKNOWN_PATH",
    "find_strace",
    "parse_strace",
    "with_interpreters",
]

#: Options every traced run uses; the output file (``-o``) and the command follow. ``--decode-pids=pidns``
#: (strace 5.19 and later) names a boxed child in strace's PID numbering too, so forks can be followed.
STRACE_OPTIONS = (
    "-f", "-qq", "-y", "--decode-pids=pidns", "--seccomp-bpf", "-e", "trace=%file,%process,fchdir,ftruncate,bind",
)  # fmt: skip

# errno names that mean "the sandbox said no" (EROFS: the read-only system mounts). Landlock refuses moving or
# linking a file into a directory with other rights (its REFER right) with EXDEV, which for these calls means that.
_REFUSED = ("EACCES", "EPERM", "EROFS")
_REFUSED_REFER = ("rename", "renameat", "renameat2", "link", "linkat")

_LINE = re.compile(r"^(?:(?P<pid>\d+)\s+|\[pid\s+(?P<bpid>\d+)\]\s+)?(?P<rest>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>\s?(?P<tail>.*)$")
_PIDNS = re.compile(r"/\* (\d+) in strace's PID NS \*/")
# A descriptor as -y prints it: ``3</path>``, and ``3</path>(deleted)`` once the file is unlinked.
_FD = re.compile(r"^(?P<fd>AT_FDCWD|-?\d+)(?:<(?P<path>.*)>(?:\(deleted\))?)?$", re.S)
_PID_CHANGED = re.compile(r"\s*<pid changed to (?P<pid>\d+) \.\.\.>$")
# strace's other report of a thread's execve: the leader's line names the thread whose call supersedes it.
_SUPERSEDED = re.compile(r"\+\+\+ superseded by execve in pid (?P<pid>\d+) \+\+\+")
# bind() of a pathname UNIX socket makes a file (Landlock's MAKE_SOCK right); an abstract one (``@"..."``) does not.
_SUN_PATH = re.compile(r'sun_path=("(?:[^"\\]|\\.)*")')

# syscall -> (index of the dirfd or None, index of the path)
_PATH_ARGS = {
    "open": (None, 0), "openat": (0, 1), "openat2": (0, 1), "creat": (None, 0),
    "execve": (None, 0), "execveat": (0, 1),
    "unlink": (None, 0), "unlinkat": (0, 1), "rmdir": (None, 0),
    "mkdir": (None, 0), "mkdirat": (0, 1), "mknod": (None, 0), "mknodat": (0, 1),
    "truncate": (None, 0), "chdir": (None, 0),
}  # fmt: skip
# Calls naming two paths: (dirfd, path) of the source and of the destination.
_TWO_PATHS = {
    "rename": ((None, 0), (None, 1)), "renameat": ((0, 1), (2, 3)), "renameat2": ((0, 1), (2, 3)),
    "link": ((None, 0), (None, 1)), "linkat": ((0, 1), (2, 3)),
    "symlink": (None, (None, 1)), "symlinkat": (None, (1, 2)),
}  # fmt: skip
_WRITES = {"creat", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "mknod", "mknodat", "truncate", *_TWO_PATHS}
_FORKS = {"clone", "clone3", "fork", "vfork"}
_OPENS = {"open", "openat", "openat2"}
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")


#: The path of a denial the trace could not name (a refused call on a descriptor strace could not resolve).
UNKNOWN_PATH = "(unknown)"


@dataclass(frozen=True)
class Denial:
    """One refused access: ``op`` is read, write or execute; ``syscall`` the call refused."""

    op: str
    path: str
    syscall: str


def find_strace() -> str:
    """The absolute, symlink-free path of ``strace`` on PATH, or StraceNotFound naming the package to install."""
    found = shutil.which("strace")
    if not found:
        raise StraceNotFound(
            "strace is not installed (not on PATH); install the 'strace' package, e.g. apt-get install strace"
        )
    return os.path.realpath(found)


@dataclass
class _Call:
    pid: int | None
    name: str
    args: list[str]
    ret: str


def parse_strace(text: str, *, cwd: str = "/", begin: str | None = None) -> tuple[PermissionSet, list[Denial]]:
    """Parse ``strace -f -y`` output into (paths accessed, denials).

    The set holds exact paths, deduplicated and sorted per axis; denials keep
    the order they happened in, without repeats. ``cwd`` is the working
    directory the traced command started in, used for relative paths.
    ``begin`` is the path whose lookup marks where the command begins (a
    box's tracer also sees the box being built): with it, a process counts
    only from that call on, and so do the processes it starts afterwards.
    Lines that are not system calls (signals, exits, strace's own messages)
    are skipped, and ``<unfinished ...>`` / ``<... resumed>`` pairs of
    concurrent processes are joined before anything is interpreted.
    """
    accessed: dict[str, set[str]] = {axis: set() for axis in AXES}
    denials: dict[Denial, None] = {}
    # The working directory belongs to a process's fs context, which threads and clone(CLONE_FS) children share:
    # each pid maps to a context, and a chdir in one is seen by all that share it.
    contexts: dict[int | None, int] = {}
    cwds: dict[int, str] = {}

    def context(pid: int | None) -> int:
        if pid not in contexts:
            contexts[pid] = len(cwds)
            cwds[contexts[pid]] = cwd
        return contexts[pid]

    refused_exec: dict[int | None, str] = {}
    armed: set[int | None] | None = set() if begin is not None else None
    for call in _calls(text):
        if armed is not None and call.pid not in armed:
            if any(_unquote(argument) == begin for argument in call.args):
                armed.add(call.pid)
                contexts.pop(call.pid, None)
                context(call.pid)
            continue
        here = cwds[context(call.pid)]
        refused = _refused(call.ret) or (call.name in _REFUSED_REFER and call.ret.split()[:2] == ["-1", "EXDEV"])
        if call.name in _FORKS:
            # A child in another PID namespace (a box) is named in strace's own numbering in a comment.
            translated = _PIDNS.search(call.ret)
            child = translated.group(1) if translated else call.ret.split("<", 1)[0].split("/*", 1)[0].strip()
            if child.isdigit() and int(child) not in contexts:
                shares = any("CLONE_FS" in argument or "CLONE_THREAD" in argument for argument in call.args)
                if shares:
                    contexts[int(child)] = context(call.pid)
                else:
                    contexts[int(child)] = len(cwds)
                    cwds[contexts[int(child)]] = here
                if armed is not None:
                    armed.add(int(child))
            continue
        if call.name == "fchdir":
            target = _FD.match(call.args[0].strip()) if call.args else None
            if target and target.group("path") and not refused and call.ret.startswith("0"):
                cwds[context(call.pid)] = _decode(target.group("path"))
            continue
        for op, path in _accesses(call, here):
            if path is None:
                if refused and op != "chdir":
                    denials.setdefault(Denial(op.split("+")[-1], UNKNOWN_PATH, call.name), None)
                continue
            if op == "chdir":
                if call.ret.startswith("0"):
                    cwds[context(call.pid)] = path
            elif refused:
                if op == "read" and refused_exec.get(call.pid) == path:
                    continue  # the shell opening a file it could not execute, to say why
                if op == "execute":
                    refused_exec[call.pid] = path
                denials.setdefault(Denial(op, path, call.name), None)
            elif not call.ret.startswith("-1"):
                for axis in op.split("+"):
                    accessed[axis].add(path)
    found = PermissionSet(*(tuple(sorted(accessed[axis])) for axis in AXES))
    return found, list(denials)


def _refused(ret: str) -> bool:
    parts = ret.split()
    return len(parts) >= 2 and parts[0] == "-1" and parts[1] in _REFUSED


def _accesses(call: _Call, cwd: str) -> Iterator[tuple[str, str | None]]:
    """(op, absolute path) pairs of one call; op is an axis, ``read+write`` or ``chdir``.

    The path is None when the trace cannot say it (a descriptor strace could
    not name): a refused call is still a denial, of an unknown path.
    """
    if call.name in _TWO_PATHS:
        source, destination = _TWO_PATHS[call.name]
        # A rename takes the source away as surely as it makes the destination;
        # a link or symlink only makes the destination.
        if source is not None and call.name.startswith("rename"):
            yield "write", _path(call, *source, cwd)
        yield "write", _path(call, *destination, cwd)
        return
    if call.name == "ftruncate":  # a descriptor, named by -y
        target = _FD.match(call.args[0].strip()) if call.args else None
        yield "write", posixpath.normpath(_decode(target.group("path"))) if target and target.group("path") else None
        return
    if call.name == "bind":
        if len(call.args) > 1 and "AF_UNIX" in call.args[1]:
            found = _SUN_PATH.search(call.args[1])
            name = _unquote(found.group(1)) if found else None
            if name:
                yield "write", posixpath.normpath(posixpath.join(cwd, name))
        return
    if call.name not in _PATH_ARGS:
        return
    path = _path(call, *_PATH_ARGS[call.name], cwd)
    if call.name == "chdir":
        yield "chdir", path
    elif call.name.startswith("execve"):
        yield "execute", path
    elif call.name in _WRITES:
        yield "write", path
    elif call.name in _OPENS:
        flags = _open_flags(call)
        if "O_PATH" in flags:
            return
        if "O_RDWR" in flags:
            yield ("write" if _refused(call.ret) else "read+write"), path
        elif any(flag in flags for flag in _WRITE_FLAGS):
            yield "write", path
        else:
            yield "read", path


def _open_flags(call: _Call) -> set[str]:
    index = 1 if call.name == "open" else 2
    if len(call.args) <= index:
        return set()
    raw = call.args[index]
    if call.name == "openat2":
        found = re.search(r"flags=([A-Z0-9_|]+)", raw)
        raw = found.group(1) if found else ""
    return set(raw.split("|"))


def _path(call: _Call, dirfd_index: int | None, path_index: int, cwd: str) -> str | None:
    """The absolute, normalized path a call named, or None when it cannot be known."""
    if len(call.args) <= path_index:
        return None
    name = _unquote(call.args[path_index])
    if name == "" and dirfd_index is not None and "AT_EMPTY_PATH" in " ".join(call.args):
        # execveat(fd, "", AT_EMPTY_PATH): the call acts on the descriptor itself, which -y names.
        fd = _FD.match(call.args[dirfd_index].strip()) if len(call.args) > dirfd_index else None
        return posixpath.normpath(_decode(fd.group("path"))) if fd and fd.group("path") else None
    if name is None or name == "":
        return None
    if not name.startswith("/"):
        base = cwd
        if dirfd_index is not None and len(call.args) > dirfd_index:
            fd = _FD.match(call.args[dirfd_index].strip())
            if fd is None:
                return None
            if fd.group("path"):
                base = _decode(fd.group("path"))
            elif fd.group("fd") != "AT_FDCWD":
                return None  # a directory descriptor strace could not name (no -y)
        name = posixpath.join(base, name)
    normalized = posixpath.normpath(name)
    return "/" + normalized.lstrip("/")


def _calls(text: str) -> Iterator[_Call]:
    """Complete calls, in the order they started, with unfinished/resumed halves joined."""
    pending: dict[int | None, tuple[int, str]] = {}
    finished: dict[int, _Call] = {}
    for number, line in enumerate(text.splitlines()):
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            continue
        pid_text = match.group("pid") or match.group("bpid")
        pid = int(pid_text) if pid_text else None
        rest = match.group("rest").strip()
        superseded = _SUPERSEDED.search(rest)
        if superseded and pid is not None and int(superseded.group("pid")) in pending:
            # The thread's execve, left unfinished, resumes under the leader's pid: move its first half there.
            pending[pid] = pending.pop(int(superseded.group("pid")))
            continue
        if not rest or rest.startswith(("---", "+++", "strace:")) or superseded:
            continue
        changed = _PID_CHANGED.search(rest)
        if changed:
            # A thread's execve: the kernel gives the process the leader's pid, and the call resumes under it.
            pending[int(changed.group("pid"))] = (number, rest[: changed.start()])
            continue
        if rest.endswith("<unfinished ...>"):
            pending[pid] = (number, rest[: -len("<unfinished ...>")].rstrip())
            continue
        resumed = _RESUMED.match(rest)
        if resumed:
            if pid not in pending:
                continue  # the first half was never seen (e.g. attached mid-call)
            number, head = pending.pop(pid)
            rest = head + resumed.group("tail")
        call = _parse_call(pid, rest)
        if call is not None:
            finished[number] = call
    for number in sorted(finished):
        yield finished[number]


def _parse_call(pid: int | None, text: str) -> _Call | None:
    """One ``name(args) = ret`` line as a _Call, or None if it is not one."""
    name = re.match(r"(\w+)\(", text)
    if name is None:
        return None
    split = _split_args(text, name.end())
    if split is None:
        return None
    args, end = split
    ret = re.match(r"\s*=\s*(.*)$", text[end:], re.S)
    return _Call(pid, name.group(1), args, ret.group(1).strip()) if ret else None


def _split_args(text: str, start: int) -> tuple[list[str], int] | None:
    """Arguments of the call whose '(' ends at ``start``: (top-level arguments, index after ')').

    Commas and parentheses inside quoted strings, brackets, braces and the
    ``-y`` annotations (``3</a(b, c>``, where strace escapes only ``>``) do not count.
    """
    args: list[str] = []
    depth, index, begin = 0, start, start
    while index < len(text):
        char = text[index]
        if char in '"<':
            if char == "<" and not _annotates(text, index):
                index += 1
                continue
            close = '"' if char == '"' else ">"
            index += 1
            while index < len(text) and text[index] != close:
                index += 2 if text[index] == "\\" else 1
        elif char in "([{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == ")":
            if depth == 0:
                tail = text[begin:index].strip()
                if tail or args:
                    args.append(tail)
                return args, index + 1
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[begin:index].strip())
            begin = index + 1
        index += 1
    return None


def _annotates(text: str, index: int) -> bool:
    """Whether the '<' at ``index`` opens a ``-y`` path annotation (it follows a descriptor)."""
    return index > 0 and (text[index - 1].isdigit() or text.endswith("AT_FDCWD", 0, index))


_ESCAPES = {
    "n": b"\n",
    "t": b"\t",
    "r": b"\r",
    "v": b"\v",
    "f": b"\f",
    "a": b"\a",
    "b": b"\b",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
}


def _unquote(token: str) -> str | None:
    """Decode a strace C string literal (``"..."``, maybe followed by ``...``); None if not a string."""
    token = token.strip()
    if token.endswith("..."):
        token = token[:-3]
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        return None
    return _decode(token[1:-1])


def _decode(body: str) -> str:
    """Undo strace's C escapes (``\\n``, ``\\"``, octal ``\\303``, hex ``\\xc3``) in a string or annotation."""
    out, i = bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 >= len(body):
            out += char.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2 : i + 4]):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif nxt in "01234567":
            octal = re.match(r"[0-7]{1,3}", body[i + 1 : i + 4])
            assert octal is not None  # nxt, its first character, is an octal digit
            digits = octal.group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        else:
            out += _ESCAPES.get(nxt, nxt.encode("utf-8", "surrogateescape"))
            i += 2
    return os.fsdecode(bytes(out))


def with_interpreters(accessed: PermissionSet, read_head: Callable[[str], bytes | None]) -> PermissionSet:
    """``accessed`` plus the ``#!`` interpreter of every executed script.

    The kernel opens a script's interpreter itself, so strace never shows it,
    yet Landlock requires execute on it: a spec derived from a trace without
    it would deny the oracle. ``read_head(path)`` returns the first bytes of
    an executed file (as the jail sees it), or None.
    """
    extra = []
    for path in accessed.execute:
        head = read_head(path) or b""
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].split()
            if words and words[0].startswith(b"/"):
                interpreter = words[0].decode("utf-8", "surrogateescape")
                if interpreter not in accessed.execute and interpreter not in extra:
                    extra.append(interpreter)
    return PermissionSet(accessed.read, accessed.write, tuple(sorted((*accessed.execute, *extra))))
