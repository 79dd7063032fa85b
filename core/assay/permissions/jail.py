"""Run a command in a task's environment, confined to a permission set, and record what it did.

:func:`run_in_jail` starts a fresh helper interpreter (``python -m
assay.permissions.jail SPEC``) that, before anything of the task runs:

1. enters new mount, PID, IPC and network namespaces (and a user namespace
   when not root, to be allowed to mount), so the command has no network
   and cannot see or signal host processes;
2. forks the namespace's first process, which mounts the host's ``/usr``,
   ``/etc`` and merged-/usr links read-only, a minimal ``/dev`` (null, zero,
   full, random, urandom, tty), a fresh ``/proc``, and keeps the layout's
   ``/tmp``, then pivots into the layout (``pivot_root``) so the host tree
   is gone, and drops the capabilities a root command could leave the jail with;
3. with a policy, turns ``policy`` ∪ ``implicit`` into Landlock rules (see
   :func:`_landlock_rules` for the approximations) and restricts itself;
4. execs the command, under ``strace`` whenever a policy is given or a trace
   is asked for, so refusals are recorded as :class:`Denial` records.

With a policy, nothing runs unless Landlock is available
(:class:`LandlockUnavailable` is raised first), and any failure to set up
the jail stops the run with :class:`JailError` before the command starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import posixpath
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import JailError, LandlockUnavailable
from ..sandboxes import landlock
from .environment import Layout
from .model import AXES, PermissionSet
from .patterns import compile_pattern, is_literal, normalize
from .trace import STRACE_OPTIONS, Denial, find_strace, parse_strace

__all__ = [
    "Denial",
    "JailError",
    "JailResult",
    "LandlockUnavailable",
    "RUNTIME_IMPLICIT",
    "landlock_available",
    "run_in_jail",
]

#: What any dynamically linked program needs and nobody should be scored for.
#: ``/lib`` and ``/lib64`` are the merged-/usr names the loader uses (so traces
#: match); the execute entries are the dynamic loader, which the kernel opens
#: for execution when it starts any dynamically linked program (checked:
#: without EXECUTE on it, ``execve("/usr/bin/cat")`` fails with EACCES, while
#: shared libraries need only read, since Landlock does not govern ``mmap``).
#: ``/proc/self/**`` is enforced as read access to the jail's own ``/proc``,
#: see :func:`_landlock_rules`.
RUNTIME_IMPLICIT = PermissionSet(
    read=(
        "/usr/lib/**",
        "/usr/lib64/**",
        "/lib/**",
        "/lib64/**",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d/**",
        "/etc/localtime",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
        "/etc/locale.alias",  # /usr/share/locale/locale.alias links here on Debian
        "/usr/share/locale/**",
        "/dev/null",
        "/dev/urandom",
        "/dev/zero",
        "/dev/tty",  # bash probes it; the jail has no terminal, so opening it fails anyway
        "/proc/self/**",
        "/proc/filesystems",  # read by libselinux, which ls, cp and mv link
    ),
    write=("/tmp/**", "/dev/null", "/dev/tty"),
    execute=("/usr/lib/ld-linux*.so.*", "/usr/lib/*/ld-linux*.so.*", "/usr/lib64/ld-linux*.so.*"),
)

# What the harness itself needs inside the jail, whatever `implicit` says:
# strace must load and run (its binary is added at run time).
_HARNESS = PermissionSet(
    read=("/usr/lib/**", "/usr/lib64/**", "/etc/ld.so.cache"),
    execute=RUNTIME_IMPLICIT.execute,
)

_DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}

#: Exit status of a command killed by a signal is reported like a shell's: 128 + signal.
_SIGNAL_BASE = 128


@dataclass
class JailResult:
    """The outcome of one jailed run.

    ``exit_code`` is None on timeout (128 + N for a command killed by signal
    N); ``output`` is stdout and stderr interleaved; ``accessed`` is what the
    command really touched (exact jail paths), or None when it was not traced.
    """

    exit_code: int | None
    output: str
    timed_out: bool
    denials: list[Denial] = field(default_factory=list)
    accessed: PermissionSet | None = None


def landlock_available() -> bool:
    """Whether this kernel can enforce a policy (Landlock ABI 1 or later)."""
    return landlock.abi_version() >= 1


def run_in_jail(
    layout: Layout,
    command: str | Sequence[str],
    *,
    policy: PermissionSet | None,
    implicit: PermissionSet = RUNTIME_IMPLICIT,
    trace: bool = False,
    timeout_s: float = 30.0,
    cwd: str = "/",
    env: Mapping[str, str] | None = None,
) -> JailResult:
    """Run ``command`` with ``layout`` as ``/``, confined to ``policy`` ∪ ``implicit``.

    A string command runs as ``/bin/bash -c COMMAND`` (so the policy must let
    bash execute, as it would for an agent's shell). ``policy=None`` runs
    unrestricted, but still namespaced and without network. The command is
    traced when ``trace`` is set or a policy is given. ``env`` replaces the
    default environment (PATH, HOME=/tmp, TMPDIR=/tmp, LANG=C.UTF-8).

    Raises LandlockUnavailable (policy given, no Landlock), StraceNotFound
    (tracing without strace), ValueError (an invalid pattern, an empty
    command, a relative ``cwd``) or JailError (the jail could not be built);
    in each case before the command runs.
    """
    argv = ["/bin/bash", "-c", command] if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ValueError("empty command")
    if not cwd.startswith("/"):
        raise ValueError(f"cwd {cwd!r} must be an absolute jail path")
    if platform.system() != "Linux":
        raise JailError("the permission jail needs Linux (namespaces and Landlock)")
    if policy is not None:
        if not landlock_available():
            raise LandlockUnavailable(
                "this kernel has no Landlock support, so the policy cannot be enforced; "
                "refusing to run the command unconfined"
            )
        for permissions in (policy, implicit):
            for axis in AXES:
                for pattern in getattr(permissions, axis):
                    compile_pattern(pattern)  # ValueError naming the pattern
    strace = find_strace() if trace or policy is not None else None
    if strace is not None and not strace.startswith("/usr/"):
        raise JailError(f"strace is at {strace}, outside /usr, so the jail cannot run it")
    _scaffold(layout.host_root)
    spec: dict[str, Any] = {
        "root": str(Path(layout.host_root).resolve()),
        "argv": argv,
        "cwd": cwd,
        "env": dict(_DEFAULT_ENV if env is None else env),
        "strace": strace,
        "policy": None if policy is None else policy.union(implicit).union(_HARNESS).to_mapping(),
    }
    if strace is not None and spec["policy"] is not None:
        spec["policy"]["execute"].append(strace)
    return _launch(spec, timeout_s=timeout_s, cwd=cwd)


def _scaffold(root: Path) -> None:
    """Make the mount points and a world-writable /tmp on the host side."""
    for name in ("usr", "etc", "dev", "proc"):
        (root / name).mkdir(exist_ok=True)
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)


def _launch(spec: dict[str, Any], *, timeout_s: float, cwd: str) -> JailResult:
    """Start the helper, collect output, trace and setup errors; the parent half of the protocol."""
    error_read, error_write = os.pipe()
    trace_read, trace_write = os.pipe() if spec["strace"] else (None, None)
    spec["error_fd"], spec["trace_fd"] = error_write, trace_write
    pass_fds = [fd for fd in (error_write, trace_write) if fd is not None]
    chunks: list[bytes] = []
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "assay.permissions.jail", json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            start_new_session=True,
            env={
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                "PYTHONDONTWRITEBYTECODE": "1",
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            },
        )
    except OSError:
        for fd in (error_read, trace_read):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        for fd in pass_fds:
            os.close(fd)
    # The trace is read while the command runs, so strace never blocks on a full pipe.
    reader = (
        threading.Thread(target=lambda: chunks.append(_read_all(trace_read)), daemon=True)
        if trace_read is not None
        else None
    )
    if reader is not None:
        reader.start()
    timed_out = False
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        # The whole session: the helper, and (through its death signal) the
        # namespace's first process, whose exit kills everything left inside.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    if reader is not None:
        reader.join()
    error = _read_all(error_read).decode("utf-8", "replace").strip()
    if error:
        raise JailError(error)
    code = process.returncode
    accessed: PermissionSet | None = None
    denials: list[Denial] = []
    if spec["strace"]:
        accessed, denials = parse_strace(b"".join(chunks).decode("utf-8", "surrogateescape"), cwd=cwd)
    return JailResult(
        exit_code=None if timed_out else (_SIGNAL_BASE - code if code < 0 else code),
        output=output.decode("utf-8", "replace"),
        timed_out=timed_out,
        denials=denials,
        accessed=accessed,
    )


def _read_all(fd: int) -> bytes:
    data = bytearray()
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    finally:
        os.close(fd)
    return bytes(data)


# --------------------------------------------------------------------------
# Landlock rules: permission patterns as path-beneath rules, in the jail view.
# --------------------------------------------------------------------------

_LL = landlock
_READ_TREE = _LL.READ_FILE | _LL.READ_DIR
_MAKE = _LL.MAKE_REG | _LL.MAKE_DIR | _LL.MAKE_SYM | _LL.MAKE_FIFO | _LL.MAKE_SOCK
_ENTRIES = _MAKE | _LL.REMOVE_FILE | _LL.REMOVE_DIR | _LL.REFER
_WRITE_FILE = _LL.WRITE_FILE | _LL.TRUNCATE
_WRITE_TREE = _ENTRIES | _WRITE_FILE
# No TRUNCATE: a file the command creates needs none, but `> existing` does.
_CREATE = _LL.MAKE_REG | _LL.MAKE_DIR | _LL.WRITE_FILE
_EXEC = _LL.EXECUTE | _LL.READ_FILE

# Walking these for a wildcard would be slow or endless (/proc/N/root loops).
_NO_WALK = ("/proc", "/sys", "/dev")


def _landlock_rules(permissions: PermissionSet) -> dict[str, int]:
    """Path -> Landlock access bits for ``permissions``, resolved in the current (jail) file tree.

    A pattern means what :mod:`.patterns` says; Landlock can only grant rights
    on existing files and whole directory trees, so:

    * ``DIR/**`` grants the axis on the tree at DIR.
    * A literal file grants the axis on that file (a symlink: on its target).
      A literal directory grants only its listing (read) or its entries
      (write: create, remove, rename), not the files in it; as Landlock
      rights reach down a tree, the directories below get the same.
    * Other wildcards are expanded over the existing paths; symlinks they match
      are skipped for read and write (their targets need a pattern of their own).
    * Execute patterns are resolved with realpath (``/bin/gzip`` is
      ``/usr/bin/gzip``); executing also needs reading the file, so both are granted.
    * Landlock cannot name a path that does not exist yet. A write pattern for
      one grants *create* rights (make files and directories, write; never
      truncate, remove or rename) on its nearest existing parent directory, so
      the command may also create other files there and append to existing
      ones. A wildcard write pattern also grants them on the directory its
      wildcard starts in, so new matching files can be made. Missing read and
      execute paths are skipped.
    * ``/proc/self/...`` is granted as ``/proc``: each process's ``/proc/self``
      is a different directory, and the jail's /proc shows only its own processes.
    """
    rules: dict[str, int] = {}

    def grant(path: str, rights: int) -> None:
        rules[path] = rules.get(path, 0) | rights

    for axis in AXES:
        for pattern in getattr(permissions, axis):
            for path, rights in _pattern_rules(axis, normalize(pattern)):
                grant(path, rights)
    return rules


def _pattern_rules(axis: str, pattern: str) -> Iterator[tuple[str, int]]:
    for alias in ("/proc/self", "/proc/thread-self"):
        if pattern == alias or pattern.startswith(alias + "/"):
            pattern = "/proc/**"
    tree = {"read": _READ_TREE, "write": _WRITE_TREE, "execute": _EXEC}[axis]
    if pattern == "/**" or pattern.endswith("/**"):
        base = pattern[:-3] or "/"
        if is_literal(base):
            if os.path.isdir(base):
                yield _real(base, axis), tree
            elif axis == "write":
                yield from _create(base)
        else:
            for match in _expand(base):
                if os.path.isdir(match) and (axis == "execute" or not os.path.islink(match)):
                    yield _real(match, axis), tree
            if axis == "write":
                yield from _create_in(_literal_prefix(base))
        return
    if is_literal(pattern):
        if os.path.exists(pattern):
            yield from _literal(axis, pattern)
        elif axis == "write":
            yield from _create(pattern)
        return
    for match in _expand(pattern):
        if axis != "execute" and os.path.islink(match):
            continue
        yield from _literal(axis, match)
    if axis == "write":
        yield from _create_in(_literal_prefix(pattern))


def _literal(axis: str, path: str) -> Iterator[tuple[str, int]]:
    """Rules for one existing path named exactly."""
    real = _real(path, axis)
    if os.path.isdir(real):
        if axis == "read":
            yield real, _LL.READ_DIR
        elif axis == "write":
            yield real, _ENTRIES
    else:
        yield real, {"read": _LL.READ_FILE, "write": _WRITE_FILE, "execute": _EXEC}[axis]


def _create(path: str) -> Iterator[tuple[str, int]]:
    """Create rights for making the missing ``path`` (see _landlock_rules)."""
    yield from _create_in(posixpath.dirname(path))


def _create_in(directory: str) -> Iterator[tuple[str, int]]:
    """Create rights on ``directory``, or on its nearest existing ancestor."""
    directory = directory or "/"
    while not os.path.isdir(directory):
        directory = posixpath.dirname(directory)
    yield directory, _CREATE


def _real(path: str, axis: str) -> str:
    # Landlock follows symlinks when the rule is added anyway; resolving here
    # makes execute rules explicit and lets rules for one file merge.
    return os.path.realpath(path) if axis == "execute" else path


def _literal_prefix(pattern: str) -> str:
    """The longest leading run of literal segments of ``pattern`` ("" for the root)."""
    prefix = ""
    for segment in pattern.split("/")[1:]:
        if not is_literal("/" + segment):
            break
        prefix += "/" + segment
    return prefix


def _expand(pattern: str) -> list[str]:
    """Existing paths ``pattern`` matches, found by walking from its literal prefix.

    Directory symlinks are listed but not descended into, and /proc, /sys
    and /dev are not walked unless the prefix lies inside them.
    """
    regex = compile_pattern(pattern)
    prefix = _literal_prefix(pattern)
    rest = pattern[len(prefix) :].split("/")[1:]
    unbounded = any(len(segment) >= 2 and set(segment) == {"*"} for segment in rest)
    depth = sys.maxsize if unbounded else len(rest)
    top = prefix or "/"
    found = [top] if regex.fullmatch(top) else []
    stack = [(top, 0)]
    while stack:
        directory, level = stack.pop()
        if level >= depth:
            continue
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            path = posixpath.join(directory, entry.name)
            if regex.fullmatch(path):
                found.append(path)
            skip = path in _NO_WALK and not (prefix + "/").startswith(path + "/")
            if entry.is_dir(follow_symlinks=False) and not skip:
                stack.append((path, level + 1))
    return sorted(found)


# --------------------------------------------------------------------------
# The helper half: runs as `python -m assay.permissions.jail SPEC` (see _launch).
# --------------------------------------------------------------------------

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET, _CLONE_NEWIPC = (
    0x00020000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x08000000,
)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP = 1, 24
# chown, dac_override, fowner, fsetid, kill, setgid, setuid, net_bind_service, audit_write:
# what a root command needs to work with files it is allowed to touch.
_KEPT_CAPABILITIES = {0, 1, 3, 4, 5, 6, 7, 10, 29}
_CAP_SETPCAP = 8
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# statvfs f_flag bit -> mount flag, for the flags a user namespace locks on a bind mount.
_LOCKED = {2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME, 2048: _MS_NODIRATIME, 4096: _MS_RELATIME}
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_MERGED = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
_FIRST_PID = 1  # the namespace's first process, which holds the trace pipe


class _Setup(Exception):
    """A step of building the jail failed; the message says which."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise _Setup(f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def encode(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    result = _libc().mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data))
    _check(result, f"mount {source or fstype} on {target}")


def _enter_namespaces() -> None:
    """New mount, PID, IPC and network namespaces (and a user namespace when not root) for the children."""
    libc = _libc()
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        _check(libc.unshare(flags), "unshare")
        return
    # Without root, a user namespace makes us able to mount; it maps only our
    # own ids, the one mapping a process may write for itself.
    _check(libc.unshare(flags | _CLONE_NEWUSER), "unshare (with a user namespace)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
            handle.write(text)


def _drop_capabilities() -> None:
    """Shrink the bounding set to ordinary root file powers before the command runs.

    Mounting is done by then; what is left cannot remount, load modules,
    make device nodes or open files by handle, so a root command cannot
    leave the jail. (Without root the command has no capabilities anyway.)
    """
    libc = _libc()
    try:
        # Raw bytes: after pivot_root the interpreter cannot import a codec.
        fd = os.open("/proc/sys/kernel/cap_last_cap", os.O_RDONLY)
        try:
            last = int(os.read(fd, 16))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        last = 40
    for cap in [*sorted(set(range(last + 1)) - _KEPT_CAPABILITIES - {_CAP_SETPCAP}), _CAP_SETPCAP]:
        # EINVAL: a capability this kernel does not have.
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise _Setup(f"cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}")
    # This process keeps only what the command will have after exec, so that
    # strace, running as the command does, may open the trace descriptor it
    # holds (the kernel refuses that to a process with fewer capabilities).
    kept = sum(1 << cap for cap in _KEPT_CAPABILITIES) if os.getuid() == 0 else 0
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(kept, kept, 0, 0, 0, 0)  # effective, permitted, inheritable; twice 32 bits
    _check(libc.capset(header, data), "capset")


def _bind_read_only(source: str, target: str) -> None:
    """Bind ``source`` (and mounts below it) on ``target``, every one read-only."""
    _mount(source, target, None, _MS_BIND | _MS_REC)
    real = os.path.realpath(target)
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        # Mount points escape space, tab, newline and backslash as octal.
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in handle]
    for point in points:
        if point == real or point.startswith(real + "/"):
            locked = sum(bit for flag, bit in _LOCKED.items() if os.statvfs(point).f_flag & flag)
            _mount(None, point, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | locked)


def _mask_private(source: str, target: str) -> None:
    """Hide what an unprivileged host user could not read under ``source`` (shadow files, private keys).

    A root command in the jail keeps the file capabilities that bypass
    permission bits, so /etc/shadow would otherwise be readable there: each
    file that is not world-readable gets /dev/null bound over it, each such
    directory an empty read-only tmpfs. Walking /etc costs a few milliseconds.
    """
    for directory, dirs, files in os.walk(source):
        for name in list(dirs):
            path = os.path.join(directory, name)
            if not os.path.islink(path) and not os.stat(path).st_mode & 0o004:
                dirs.remove(name)  # masked whole: nothing below it is needed
                _mount(
                    "tmpfs",
                    target + path[len(source) :],
                    "tmpfs",
                    _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                    "mode=755,size=4k",
                )
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path) and os.path.isfile(path) and not os.stat(path).st_mode & 0o004:
                _mount("/dev/null", target + path[len(source) :], None, _MS_BIND)


def _build_root(root: str) -> bool:
    """Mount the system view under ``root`` and pivot into it; returns whether /proc is the jail's own."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount(root, root, None, _MS_BIND)  # pivot_root needs a mount point
    for name in ("usr", "etc"):
        _bind_read_only(f"/{name}", f"{root}/{name}")
    _mask_private("/etc", f"{root}/etc")
    for name in _MERGED:
        host, inside = f"/{name}", f"{root}/{name}"
        if os.path.islink(host) and not os.path.lexists(inside):
            os.symlink(os.readlink(host), inside)
        elif os.path.isdir(host) and not os.path.islink(host):
            os.makedirs(inside, exist_ok=True)
            _bind_read_only(host, inside)
    _mount("tmpfs", f"{root}/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=755,size=64k")
    for name in _DEVICES:
        if os.path.exists(f"/dev/{name}"):
            open(f"{root}/dev/{name}", "w").close()
            _mount(f"/dev/{name}", f"{root}/dev/{name}", None, _MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    try:
        _mount("proc", f"{root}/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        own_proc = True
    except _Setup:
        # A user namespace may not mount proc where the host hides parts of
        # it; the host's /proc, bound, still works (it lists host processes).
        _mount("/proc", f"{root}/proc", None, _MS_BIND | _MS_REC)
        own_proc = False
    os.chdir(root)
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is not None:
        _check(_libc().syscall(number, b".", b"."), "pivot_root")
        _check(_libc().umount2(b".", _MNT_DETACH), "detach the host root")
    else:  # an architecture we have no syscall number for: chroot is weaker but still hides the host
        os.chroot(".")
    os.chdir("/")
    return own_proc


def _fail(error_fd: int, message: str) -> None:
    os.write(error_fd, message.encode("utf-8", "replace"))
    os._exit(125)


def _exit_like(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    os._exit(_SIGNAL_BASE - code if code < 0 else code)


def _child_main(spec: dict[str, Any]) -> None:
    """The helper's body: namespaces, then the first process builds the jail and runs the command."""
    error_fd, trace_fd = spec["error_fd"], spec["trace_fd"]
    os.set_inheritable(error_fd, False)
    try:
        _enter_namespaces()
        first = os.fork()
    except (OSError, _Setup) as exc:
        _fail(error_fd, f"cannot create the jail's namespaces: {exc}")
    if first:
        os.close(error_fd)
        if trace_fd is not None:
            os.close(trace_fd)
        _exit_like(os.waitpid(first, 0)[1])
    # The namespace's first process: dies with the helper (a timeout kills the
    # helper), and everything in the namespace dies with it.
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        own_proc = _build_root(spec["root"])
        os.chdir(spec["cwd"])
        _drop_capabilities()
    except Exception as exc:  # noqa: BLE001 - any failure must stop the run, reported
        _fail(error_fd, f"cannot build the jail: {exc}")
    try:
        if spec["policy"] is not None:
            landlock.restrict_self_to(_landlock_rules(PermissionSet.from_mapping(spec["policy"])), deny_tcp=True)
    except Exception as exc:  # noqa: BLE001 - any failure must keep the command from running unconfined, reported
        _fail(error_fd, f"cannot apply the Landlock policy: {exc}")
    program = list(spec["argv"])
    if spec["strace"]:
        # strace reopens the pipe through this process's descriptor, so the
        # command does not inherit it (it is close-on-exec here) and cannot
        # write to the trace by accident. (The trace is a record, not a
        # boundary: Landlock enforces whatever it says.) The host's /proc has
        # another process 1, so there the descriptor is inherited instead.
        if own_proc:
            os.set_inheritable(trace_fd, False)
            output = f"/proc/{_FIRST_PID}/fd/{trace_fd}"
        else:
            output = f"/proc/self/fd/{trace_fd}"
        program = [spec["strace"], *STRACE_OPTIONS, "-o", output, "--", *program]
    worker = os.fork()
    if worker == 0:
        try:
            # execvpe: a bare name ("bash") is looked up on the command's PATH.
            os.execvpe(program[0], program, spec["env"])
        except OSError as exc:
            if spec["strace"]:
                _fail(error_fd, f"cannot start strace: {exc}")
            os.write(2, f"assay jail: {program[0]}: {exc.strerror}\n".encode())
            os._exit(127 if exc.errno == errno.ENOENT else 126)
    os.close(error_fd)
    while True:
        pid, status = os.wait()  # also reaps orphans the command leaves behind
        if pid == worker:
            _exit_like(status)


if __name__ == "__main__":
    _child_main(json.loads(sys.argv[1]))
