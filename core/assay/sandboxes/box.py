"""One confinement layer for every child an agent can influence: a *box*.

Every stage that runs something an agent wrote or chose (the exec stage's
``code_run``, the trajectory stage's tests and checkers, the permission
stage's commands and verifiers, ``assay permissions trace --env``) runs it
through :func:`run_in_box`, which gives the child, in this order:

1. **An unprivileged identity.** When assay runs as root, the box is started
   as an unprivileged uid (65534 unless ``ASSAY_SANDBOX_UID`` says otherwise),
   so the user namespace maps the box's root to that uid: the box's root has
   no power over host files, ``/proc/sys`` or the host's processes. Without
   root the engine's own uid is used. The writable parts of the box are
   handed to that uid first.
2. **Namespaces and mounts from bubblewrap** (``bwrap``, what Flatpak builds
   on): new user (nested ones disabled), mount, PID, IPC, UTS, network and
   cgroup namespaces; a view holding only what the box needs (system
   directories read-only, ``/etc`` with private files masked, a fresh
   ``/proc`` with ``/proc/sys`` read-only, a minimal ``/dev``, and the
   writable tree of the task); a cleared environment; a new session; the
   box dies with its parent.
3. **Aggregate limits**: a cgroup per box (processes and memory) where the
   machine lets assay make one (root; v1 or v2), else ``RLIMIT_NPROC``,
   which the kernel counts per user namespace, i.e. per box. Per-process
   limits always: CPU seconds, address space, file size, open files, no core
   dumps. A wall-clock limit kills the whole tree: the box's PID 1, and with
   it every process in the namespace.
4. **Inside, before the command** (:mod:`assay.sandboxes._inside`): every
   inherited descriptor closed, Landlock (files, TCP, and from ABI 6 signals
   and abstract sockets outside the box), the seccomp filter of
   :mod:`assay.sandboxes.seccomp`, then ``execve``.
5. **A trace the box cannot reach** (when asked): ``strace`` runs outside the
   box, as its parent, writing to a file the box cannot see; the box's
   command is marked in the trace by a call to a random path, so the trace
   holds only what the command and its children did.

The output the engine keeps is bounded (head and tail), so a child that
prints forever cannot exhaust the engine's memory.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfinementError
from . import landlock

__all__ = [
    "BOX_FAILED",
    "BOX_INODES",
    "Box",
    "BoxResult",
    "FILE_OVERRIDE",
    "Limits",
    "MERGED_USR",
    "Mount",
    "TRACE_BYTES",
    "box_dir",
    "box_python",
    "bwrap_path",
    "check_box",
    "item_disk_mb",
    "remove_box_dir",
    "run_in_box",
    "sandbox_ids",
    "system_mounts",
]

#: Exit status of a box whose confinement could not be set up: nothing of the command ran.
BOX_FAILED = 125
#: The largest trace one traced command may leave (a command that makes more is stopped there).
TRACE_BYTES = 32 << 20
_READY = b"\0"
#: Environment variable naming the uid (and gid) boxes run as when assay runs as root.
SANDBOX_UID_ENV = "ASSAY_SANDBOX_UID"
_DEFAULT_SANDBOX_ID = 65534
#: Merged-/usr names: symlinks into /usr on current systems, real directories on older ones.
MERGED_USR = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
# What of the fresh /proc must stay read-only (Flatpak binds the same).
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")


@dataclass(frozen=True)
class Limits:
    """What one box may use at most; every field applies to the whole box unless it says per process."""

    processes: int = 64
    memory_bytes: int = 1 << 30
    file_bytes: int = 64 << 20  # per file written
    cpu_seconds: int = 60  # per process
    open_files: int = 256  # per process
    output_bytes: int = 1 << 20  # of stdout and stderr kept by the engine (head and tail)
    tmp_bytes: int = 64 << 20  # the box's own /tmp, when it has one


@dataclass(frozen=True)
class Mount:
    """One entry of a box's view: ``ro``/``rw`` bind of a host path, ``tmpfs``, ``symlink`` or ``mask``.

    ``mask`` hides ``dest`` (an empty file or directory over it). For
    ``symlink``, ``source`` is the link's target.
    """

    kind: str
    dest: str
    source: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class Box:
    """What one confined child sees and may do.

    ``root`` is a host directory that becomes ``/`` (read-write), with
    ``mounts`` laid over it; without one, ``/`` is an empty, read-only
    skeleton holding only ``mounts``. ``rules`` are Landlock path-beneath
    rules in the box's own paths (path -> access bits of
    :mod:`assay.sandboxes.landlock`); ``None`` derives them from the mounts
    (read and execute on read-only ones, everything on writable ones).
    ``policy`` gives the rules as permission patterns instead (``read``,
    ``write``, ``execute`` lists), resolved inside the box's own view by
    :func:`assay.permissions.rules.landlock_rules`, with ``create_within``
    bounding where create rights may land and ``trusted_links`` naming the
    only links in the writable tree a rule may go through, with their targets. ``owned`` are host paths to hand to
    the box's uid before it starts (its writable trees). With ``trace`` the
    command runs under ``strace``, from outside the box. ``caps`` are the
    capabilities the command keeps, inside its own user namespace only (see
    :data:`FILE_OVERRIDE`); every other one is dropped.
    """

    mounts: tuple[Mount, ...]
    root: str | None = None
    cwd: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)
    rules: Mapping[str, int] | None = None
    policy: Mapping[str, Sequence[str]] | None = None
    create_within: tuple[str, ...] | None = None
    trusted_links: tuple[tuple[str, str], ...] | None = None
    owned: tuple[str, ...] = ()
    limits: Limits = Limits()
    trace: bool = False
    caps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.caps) - set(FILE_OVERRIDE))
        if unknown:
            raise ValueError(f"a box keeps no capability but {', '.join(FILE_OVERRIDE)}, not {unknown[0]}")


#: The capabilities a verifier's box keeps: file-mode override and directory search, which inside the box's user
#: namespace apply only to files the box's own uid owns (the task's tree), so a verifier reads what the agent made
#: unreadable (a stolen copy chmod 000, say), while host files, owned by uids the namespace does not map, stay as
#: closed as ever. Landlock and the seccomp filter apply all the same.
FILE_OVERRIDE = ("CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH")


@dataclass
class BoxResult:
    """How a box ended: the command's exit status (None on timeout; 128 + N when killed by signal N).

    ``output`` is stdout and stderr interleaved, cut in the middle beyond the
    box's ``output_bytes``. ``trace`` is strace's record (traced boxes only);
    ``cgroup`` says which aggregate limits applied (``v1``, ``v2`` or ``rlimit``).
    """

    exit_code: int | None
    output: str
    timed_out: bool
    trace: str | None = None
    trace_begin: str | None = None
    cgroup: str = "rlimit"


# ---------------------------------------------------------------------------- the host side


@functools.cache
def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    found = shutil.which("bwrap")
    return os.path.realpath(found) if found else None


def sandbox_ids() -> tuple[int, int] | None:
    """The (uid, gid) boxes run as when assay is root, or None (not root: boxes run as assay's own uid)."""
    if os.geteuid() != 0:
        return None
    value = os.environ.get(SANDBOX_UID_ENV, "")
    try:
        uid = int(value) if value else _DEFAULT_SANDBOX_ID
    except ValueError:
        raise ConfinementError(f"{SANDBOX_UID_ENV}={value!r} is not a number") from None
    if uid == 0:
        raise ConfinementError(f"{SANDBOX_UID_ENV} must not be 0: a box must not be root on the host")
    return uid, uid


def check_box() -> None:
    """Refuse clearly (ConfinementError) when this machine cannot build boxes; nothing should run unconfined."""
    if sys.platform != "linux":
        raise ConfinementError("confined runs need Linux (namespaces, Landlock and seccomp)")
    if bwrap_path() is None:
        raise ConfinementError(
            "bubblewrap is not installed: install the 'bubblewrap' package (make system-tools does, on Debian)"
        )
    if landlock.abi_version() < 1:
        raise ConfinementError("this kernel has no Landlock, so a box cannot confine file access; refusing to run")
    from .seccomp import SECCOMP_AVAILABLE

    if not SECCOMP_AVAILABLE:
        raise ConfinementError(f"no seccomp filter is defined for this architecture ({os.uname().machine})")


#: The Python a box runs (its helper, ``code_run``, a task's tests): the system's, whose files any uid can read.
SYSTEM_PYTHON = "/usr/bin/python3"
# The modules the box's helper needs, copied into a bundle the box's uid can read (see _helper_bundle).
_HELPER_MODULES = (
    "errors.py",
    "sandboxes/landlock.py",
    "sandboxes/seccomp.py",
    "sandboxes/_inside.py",
    "permissions/patterns.py",
    "permissions/model.py",
    "permissions/rules.py",
)
HELPER_DIR = "/.assay-helper"


def box_python() -> str:
    """The interpreter a box runs: the system Python (Debian's python3), else this one when the box can reach it."""
    if os.path.isfile(SYSTEM_PYTHON):
        return SYSTEM_PYTHON
    interpreter = os.path.realpath(sys.executable)
    if sandbox_ids() is None:  # not root: the box runs as this user, who can reach this interpreter
        return interpreter
    raise ConfinementError(
        f"no system Python at {SYSTEM_PYTHON} for boxes to run: install the 'python3' package (make system-tools does)"
    )


def _python_mounts(interpreter: str) -> list[Mount]:
    """What the box needs to run ``interpreter`` besides /usr: its installation, when it lives elsewhere."""
    if interpreter.startswith("/usr/"):
        return []
    prefix = os.path.dirname(os.path.dirname(interpreter))
    return [
        Mount("ro", directory, directory) for directory in sorted({prefix, sys.base_prefix}) if os.path.isdir(directory)
    ]


_HELPER_STUB = '"""The box helper\'s copy of assay (see assay.sandboxes.box)."""\n'
_HELPER_STUBS = ("assay/__init__.py", "assay/sandboxes/__init__.py", "assay/permissions/__init__.py")


def _helper_files() -> dict[str, bytes]:
    """The helper bundle's files by relative path: the helper's modules, package stubs, and the empty mask file."""
    package = Path(__file__).resolve().parents[1]
    files = {f"assay/{name}": (package / name).read_bytes() for name in _HELPER_MODULES}
    files.update({stub: _HELPER_STUB.encode() for stub in _HELPER_STUBS})
    files["empty"] = b""  # what masked files show
    return files


def _holds(bundle: Path, files: Mapping[str, bytes]) -> bool:
    """Whether ``bundle`` is a directory of this user's, writable by no one else, holding exactly ``files``."""
    try:
        info = os.lstat(bundle)
        if not os.path.isdir(bundle) or os.path.islink(bundle):
            return False
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return False
        for name, data in files.items():
            path = bundle / name
            if path.is_symlink() or path.stat().st_mode & 0o022 or path.read_bytes() != data:
                return False
    except OSError:
        return False
    return True


def _write_bundle(files: Mapping[str, bytes]) -> Path:
    """A new private directory holding ``files``, readable (not writable) by every uid."""
    bundle = Path(tempfile.mkdtemp(prefix="assay-box-helper-new-"))
    for name, data in files.items():
        (bundle / name).parent.mkdir(parents=True, exist_ok=True)
        (bundle / name).write_bytes(data)
    for directory, _dirs, names in os.walk(bundle):
        os.chmod(directory, 0o755)
        for name in names:
            os.chmod(os.path.join(directory, name), 0o644)
    return bundle


@functools.cache
def _helper_bundle() -> str:
    """A directory holding just the helper's modules, readable by any uid.

    The box runs the helper with the system Python and must not need the
    engine's installation (which may sit in a home directory the box's uid
    cannot enter, and holds more than a box should see): ``assay`` and
    ``assay.sandboxes`` are empty packages there. The directory is named by
    the user and a digest of its contents, so every process of one assay
    version shares one (nothing piles up in /tmp, even after a crash); one
    that is not this user's, or not exactly these files, is never used.
    """
    files = _helper_files()
    digest = hashlib.sha256(json.dumps({k: v.hex() for k, v in sorted(files.items())}).encode()).hexdigest()[:16]
    shared = Path(tempfile.gettempdir()) / f"assay-box-helper-{os.geteuid()}-{digest}"
    if _holds(shared, files):
        return str(shared)
    staged = _write_bundle(files)
    with contextlib.suppress(OSError):  # another process made it first, or someone else holds the name
        os.rename(staged, shared)
    if _holds(shared, files):
        shutil.rmtree(staged, ignore_errors=True)
        return str(shared)
    # The shared name is taken by something this process cannot trust: keep a private bundle, removed at exit.
    atexit.register(shutil.rmtree, staged, True)
    return str(staged)


@functools.cache
def _private_etc_entries() -> tuple[tuple[str, bool], ...]:
    """Entries under /etc an unprivileged user could not read (path, is a directory): masked in every box."""
    masked: list[tuple[str, bool]] = []
    for directory, dirs, files in os.walk("/etc"):
        for name in list(dirs):
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(path) and not os.stat(path).st_mode & 0o005:
                    dirs.remove(name)
                    masked.append((path, True))
        for name in files:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(path) and os.path.isfile(path) and not os.stat(path).st_mode & 0o004:
                    masked.append((path, False))
    return tuple(masked)


def system_mounts(*, python: bool = True) -> tuple[Mount, ...]:
    """The read-only system view every box has: /usr, the merged-/usr names, /etc (private files masked).

    With ``python``, the box Python's installation too when it lies outside
    /usr (:func:`box_python`; the helper always finds it).
    """
    mounts = [Mount("ro", "/usr", "/usr")]
    for name in MERGED_USR:
        host = f"/{name}"
        if os.path.islink(host):
            mounts.append(Mount("symlink", host, os.readlink(host)))
        elif os.path.isdir(host):
            mounts.append(Mount("ro", host, host))
    mounts.append(Mount("ro", "/etc", "/etc"))
    mounts += [Mount("mask", path, None, 1 if is_dir else 0) for path, is_dir in _private_etc_entries()]
    if python:
        mounts += _python_mounts(box_python())
    return tuple(mounts)


#: Environment variable with the disk budget of one work item's box directory, in MiB (default 256).
DISK_MB_ENV = "ASSAY_BOX_DISK_MB"
#: The most files and directories one work item's box directory holds (root only): each costs kernel memory
#: whatever its size, and a snapshot walks them all.
BOX_INODES = 65_536
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def item_disk_mb() -> int:
    """A work item's disk budget in MiB: ``ASSAY_BOX_DISK_MB``, default 256 (ConfinementError for a bad value)."""
    value = os.environ.get(DISK_MB_ENV, "") or "256"
    try:
        size = int(value)
    except ValueError:
        raise ConfinementError(f"{DISK_MB_ENV}={value!r} is not a whole number of MiB") from None
    if size < 16:
        raise ConfinementError(f"{DISK_MB_ENV}={value!r} is too small: a work item needs at least 16 MiB")
    return size


def box_dir(prefix: str, size_mb: int | None = None) -> Path:
    """A fresh directory for a work item's boxes: like ``mkdtemp``, but enterable (not listable) by the box's uid.

    bubblewrap runs as the box's uid and must reach the trees it binds; what
    it binds below here is handed to that uid by :attr:`Box.owned`. When
    assay runs as root, the directory is a tmpfs of ``size_mb`` MiB (default:
    the whole item budget, :func:`item_disk_mb`): everything the item's boxes write, over all their
    processes and files, fits in that or fails with ENOSPC, and at most
    :data:`BOX_INODES` files and directories do. Its name carries
    the engine's pid and start time, so a later engine unmounts the tmpfs of
    one that was killed before it could (see :func:`_sweep_orphans`). Without
    root there is no such mount, and only the per-file size limit and the
    box's small private /tmp bound the disk (see docs/threat-model.md).
    Remove it with :func:`remove_box_dir`.
    """
    if not (os.geteuid() == 0 and sys.platform == "linux"):
        path = Path(tempfile.mkdtemp(prefix=prefix))
        path.chmod(0o711)
        return path
    _sweep_orphans()
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{_owner_tag(os.getpid())}-"))
    path.chmod(0o711)
    size = item_disk_mb() if size_mb is None else size_mb
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={size}m,nr_inodes={BOX_INODES},mode=0711".encode()
    if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), options) != 0:
        error = ctypes.get_errno()
        shutil.rmtree(path, ignore_errors=True)
        raise ConfinementError(f"cannot make the size-limited box directory {path}: {os.strerror(error)}")
    return path


_OWNED_NAME = re.compile(r"^assay-.*?-(\d+)\.(\d+)-[^/]*$")


def _owner_tag(pid: int) -> str:
    """``PID.START``: a process named so that a recycled pid does not pass for it (START from /proc/PID/stat)."""
    return f"{pid}.{_start_time(pid)}"


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


@functools.cache
def _sweep_orphans() -> None:
    """Unmount and remove box directories whose engine died without doing so (once per process).

    Only tmpfs mounts in the temporary directory whose names carry an owner
    tag are considered (only root can make mounts, so the mount table is
    trustworthy), and only those whose owner is no longer running.
    """
    temp = os.path.realpath(tempfile.gettempdir())
    try:
        table = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return
    for line in table.splitlines():
        fields = line.split(" ")
        try:
            mount_point = fields[4].encode().decode("unicode_escape")
            fstype = fields[fields.index("-") + 1]
        except (IndexError, ValueError, UnicodeDecodeError):
            continue
        match = _OWNED_NAME.match(os.path.basename(mount_point))
        if fstype != "tmpfs" or os.path.dirname(mount_point) != temp or match is None:
            continue
        pid, start = int(match.group(1)), int(match.group(2))
        if _start_time(pid) != start:
            remove_box_dir(Path(mount_point))


def remove_box_dir(path: Path) -> None:
    """Delete a :func:`box_dir` and everything in it.

    A tmpfs is unmounted, which frees its contents at once whatever the agent
    made in it; otherwise the tree is removed by descriptor at any depth
    (:func:`~assay.sandboxes.beneath.remove_tree`).
    """
    from .beneath import remove_tree

    if os.path.ismount(path):
        import ctypes

        ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(path), _MNT_DETACH)
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return
    with contextlib.suppress(FileNotFoundError):
        remove_tree(path)


def _derived_rules(box: Box) -> dict[str, int]:
    """Landlock rules from the view: read+execute on read-only mounts, all rights on writable ones."""
    read_exec = landlock.READ_FILE | landlock.READ_DIR | landlock.EXECUTE
    everything = (1 << 16) - 1
    rules: dict[str, int] = {"/dev": read_exec | landlock.WRITE_FILE, "/proc": landlock.READ_FILE | landlock.READ_DIR}
    if box.root is not None:
        rules["/"] = everything
    for mount in box.mounts:
        if mount.kind == "ro":
            rules[mount.dest] = rules.get(mount.dest, 0) | read_exec
        elif mount.kind in ("rw", "tmpfs"):
            rules[mount.dest] = rules.get(mount.dest, 0) | everything
    return rules


def _spec_descriptor(data: bytes) -> int:
    """A read descriptor positioned at the start of ``data``: an unlinked file in memory, closed on exec.

    How the engine hands a box its set-up: what a process's argv holds stays
    readable in ``/proc/<pid>/cmdline`` to everything in the box.
    """
    fd = os.memfd_create("assay-box-spec", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _bwrap_argv(box: Box, info_fd: int, block_fd: int) -> list[str]:
    """bubblewrap's arguments for ``box``.

    bubblewrap runs as the box's unprivileged uid, so every host path it binds
    must be reachable by that uid (the stages make their box directories with
    :func:`box_dir`); one that is not stops the box with bubblewrap's message.
    """
    bwrap = bwrap_path()
    assert bwrap is not None  # check_box() ran first
    argv = [
        bwrap,
        "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--disable-userns", "--die-with-parent", "--new-session", "--clearenv",
        "--uid", "0", "--gid", "0", "--hostname", "assay-box",
        "--info-fd", str(info_fd), "--block-fd", str(block_fd),
    ]  # fmt: skip
    if box.root is not None:
        argv += ["--bind", box.root, "/"]
    # Parents before children, so a tmpfs on /tmp never hides a workspace bound below it.
    for mount in sorted(box.mounts, key=lambda m: len([p for p in m.dest.split("/") if p])):
        if mount.kind == "ro":
            argv += ["--ro-bind", str(mount.source), mount.dest]
        elif mount.kind == "rw":
            argv += ["--bind", str(mount.source), mount.dest]
        elif mount.kind == "tmpfs":
            argv += (["--size", str(mount.size)] if mount.size else []) + ["--tmpfs", mount.dest]
        elif mount.kind == "symlink":
            if box.root is not None and _same_link(os.path.join(box.root, mount.dest.lstrip("/")), str(mount.source)):
                continue  # made on the bound root by an earlier box: bubblewrap would refuse to make it again
            argv += ["--symlink", str(mount.source), mount.dest]
        elif mount.kind == "mask":
            if mount.size:  # a directory: an empty read-only tmpfs over it
                argv += ["--perms", "0555", "--size", "4096", "--tmpfs", mount.dest, "--remount-ro", mount.dest]
            else:  # a file: an empty one over it (not /dev/null: binds are nodev, so a device would not open)
                argv += ["--ro-bind", os.path.join(_helper_bundle(), "empty"), mount.dest]
    argv += ["--proc", "/proc"]
    for path in _PROC_READ_ONLY:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev", "--ro-bind", _helper_bundle(), HELPER_DIR, "--chdir", box.cwd]
    for cap in box.caps:
        argv += ["--cap-add", cap]
    return argv


def _same_link(path: str, target: str) -> bool:
    return os.path.islink(path) and os.readlink(path) == target


def _check_reachable(box: Box, ids: tuple[int, int]) -> None:
    """Refuse, naming the blocking directory, a bind source the box's uid cannot reach (bubblewrap runs as it)."""
    uid, gid = ids
    sources = [box.root] if box.root is not None else []
    sources += [str(mount.source) for mount in box.mounts if mount.kind in ("ro", "rw")]
    for source in sources:
        for ancestor in reversed(Path(source).parents):
            info = os.stat(ancestor)
            mode = info.st_mode
            if not (mode & 0o001 or (info.st_uid == uid and mode & 0o100) or (info.st_gid == gid and mode & 0o010)):
                raise ConfinementError(
                    f"{source} cannot be reached by the box's uid {uid}: {ancestor} (mode {mode & 0o777:04o}) "
                    "does not let it through; make box directories with assay.sandboxes.box.box_dir()"
                )


def _owned_by(paths: Sequence[str], ids: tuple[int, int]) -> None:
    """Hand the box's writable trees to its uid, never following a link and at any depth the agent made.

    Whatever lies deeper than the engine ever writes (see
    :data:`~assay.sandboxes.beneath.MAX_DEPTH`) was made by a box, so it
    already belongs to the box's uid and is not walked.
    """
    from .beneath import Beneath

    uid, gid = ids
    for top in paths:
        with Beneath(top) as tree:
            tree.chown_all(uid, gid)


class _Cgroup:
    """One box's cgroup (processes and memory), where the machine lets assay make one."""

    def __init__(self, dirs: list[Path], version: str) -> None:
        self.dirs, self.version = dirs, version

    @classmethod
    def make(cls, limits: Limits) -> _Cgroup | None:
        """A fresh cgroup with the box's limits, or None when cgroups cannot be used here."""
        name = f"assay-box-{os.getpid()}-{secrets.token_hex(4)}"
        base = Path("/sys/fs/cgroup")
        try:
            if (base / "cgroup.controllers").is_file():
                here = base / _own_cgroup("")
                parent = here / "assay"
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+pids +memory")
                box = parent / name
                box.mkdir()
                (box / "pids.max").write_text(str(limits.processes))
                (box / "memory.max").write_text(str(limits.memory_bytes))
                with contextlib.suppress(OSError):
                    (box / "memory.swap.max").write_text("0")
                return cls([box], "v2")
            dirs = []
            for controller, settings in (
                ("pids", {"pids.max": limits.processes}),
                ("memory", {"memory.limit_in_bytes": limits.memory_bytes}),
            ):
                box = base / controller / _own_cgroup(controller) / name
                box.mkdir()
                dirs.append(box)
                for key, value in settings.items():
                    (box / key).write_text(str(value))
                with contextlib.suppress(OSError):
                    (box / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
            return cls(dirs, "v1")
        except OSError:
            return None

    def add(self, pid: int) -> None:
        """Move a process (and so everything it will start) into the cgroup."""
        for directory in self.dirs:
            (directory / "cgroup.procs").write_text(str(pid))

    def kill(self) -> None:
        """SIGKILL every process still in the cgroup."""
        for directory in self.dirs:
            kill = directory / "cgroup.kill"
            if kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
                continue
            with contextlib.suppress(OSError):
                for line in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(line), signal.SIGKILL)

    def remove(self) -> None:
        """Remove the (empty) cgroup; a few retries while the kernel reaps the last processes."""
        for directory in self.dirs:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill()
                    time.sleep(0.01)


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path for ``controller`` ("" for the v2 hierarchy), relative to the mount."""
    with open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return path.lstrip("/")
    return ""


class _Output:
    """Collects a child's output keeping its head and tail within a byte budget."""

    def __init__(self, fd: int, budget: int) -> None:
        self.head_budget, self.tail_budget = budget // 4, budget - budget // 4
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):
                room = self.head_budget - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                if len(self.tail) > self.tail_budget:
                    cut = len(self.tail) - self.tail_budget
                    self.dropped += cut
                    del self.tail[:cut]
        finally:
            os.close(fd)

    def text(self) -> str:
        """What was kept, with a marker where bytes were dropped."""
        self.thread.join()
        middle = f"\n[... {self.dropped} bytes of output dropped ...]\n".encode() if self.dropped else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


def run_in_box(box: Box, argv: Sequence[str], *, timeout_s: float) -> BoxResult:
    """Run ``argv`` in ``box`` and wait at most ``timeout_s`` seconds; the whole tree dies at the deadline.

    Raises ConfinementError when the box cannot be built (before anything of
    the command runs), and ValueError for an empty command or a relative cwd.
    """
    if not argv:
        raise ValueError("empty command")
    if not box.cwd.startswith("/"):
        raise ValueError(f"cwd {box.cwd!r} must be an absolute path in the box")
    check_box()
    ids = sandbox_ids()
    if ids is not None:
        if box.owned:
            _owned_by(box.owned, ids)
        _check_reachable(box, ids)
    deadline = time.monotonic() + timeout_s
    trace_begin = f"/.assay-trace-begin-{secrets.token_hex(8)}" if box.trace else None
    status_read, status_write = os.pipe()
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    go_read, go_write = os.pipe() if box.trace else (-1, -1)
    output_read, output_write = os.pipe()
    spec = {
        "rules": box.rules if box.rules is not None else _derived_rules(box),
        "policy": {axis: list(patterns) for axis, patterns in box.policy.items()} if box.policy is not None else None,
        "create_within": list(box.create_within) if box.create_within is not None else None,
        "trusted_links": dict(box.trusted_links) if box.trusted_links is not None else None,
        "limits": {
            "nproc": box.limits.processes,
            "as": box.limits.memory_bytes,
            "fsize": box.limits.file_bytes,
            "cpu": box.limits.cpu_seconds,
            "nofile": box.limits.open_files,
        },
        "env": dict(box.env),
        "cwd": box.cwd,
        "argv": list(argv),
        "status_fd": status_write,
        "go_fd": go_read if box.trace else None,
        "trace_begin": trace_begin,
    }
    # The spec (host paths, rules, the trace marker) goes on a descriptor the helper reads and closes: an argv
    # would stay readable to the box in /proc/<pid>/cmdline for as long as the box runs.
    spec_fd = _spec_descriptor(json.dumps(spec).encode())
    # bubblewrap stays the box's PID 1, so its options (host paths) go on a descriptor it reads and closes too.
    bwrap, *options = _bwrap_argv(box, info_write, block_read)
    options_fd = _spec_descriptor(b"".join(option.encode() + b"\0" for option in options))
    start = f"import sys; sys.path.insert(0, {HELPER_DIR!r}); from assay.sandboxes._inside import main; main()"
    command = [
        bwrap, "--args", str(options_fd),
        "--", box_python(), "-I", "-S", "-B", "-c", start, str(spec_fd),
    ]  # fmt: skip
    cgroup = _Cgroup.make(box.limits) if ids is not None else None
    passed = tuple(fd for fd in (status_write, info_write, block_read, go_read, spec_fd, options_fd) if fd >= 0)
    scratch: str | None = None
    tracer: subprocess.Popen[bytes] | None = None
    try:
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output_write,
                stderr=output_write,
                pass_fds=passed,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                user=ids[0] if ids is not None else None,
                group=ids[1] if ids is not None else None,
                extra_groups=[] if ids is not None else None,
            )
        finally:
            for fd in (*passed, output_write):
                os.close(fd)
        output = _Output(output_read, box.limits.output_bytes)
        box_pid = _box_pid(info_read)
        if box_pid is not None and cgroup is not None:
            try:
                cgroup.add(box_pid)
            except OSError:
                cgroup.kill()
                cgroup.remove()
                cgroup = None
        with contextlib.suppress(BrokenPipeError):
            os.write(block_write, b"go")
        status = bytearray()
        if box.trace and box_pid is not None:
            # The helper confines itself untraced, says so, and waits: strace attaches to it from outside the
            # box (so the box can neither reach nor stop the record), then the helper becomes the command.
            status += _read_status(status_read, deadline)
            if bytes(status) == _READY:
                scratch, tracer = _attach_tracer(box_pid, ids, deadline)
                with contextlib.suppress(BrokenPipeError):
                    os.write(go_write, b"go")
        timed_out = trace_cut = False
        watching = tracer is not None
        while True:
            try:
                # Traced boxes are watched in short steps: strace stopped by the kernel (its record reached
                # TRACE_BYTES) ends the box, since what the command did next would go unrecorded. (strace also
                # ends, normally, when the command does, a moment before the box.)
                step = 0.05 if watching else max(0.0, deadline - time.monotonic())
                process.wait(timeout=min(step, max(0.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                if watching and tracer is not None and tracer.poll() is not None:
                    watching = False
                    if tracer.returncode != 0:
                        timed_out = trace_cut = True
                        break
        # Whatever is still running in the box dies now: its PID 1 (and with it the namespace), the session
        # of bwrap, and anything left in the cgroup. (Only on timeout: after a normal end those pids are
        # reaped and could by now name other processes.)
        if timed_out:
            if box_pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(box_pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill()
        process.wait()
        text = output.text()
        if trace_cut:
            text += f"\nassay: the command's trace passed {TRACE_BYTES >> 20} MiB, so the command was stopped\n"
        status += _read_all(status_read)
        status_read = -1
        # The helper writes one NUL byte once it is confined, or the reason it could not be.
        if bytes(status) != _READY and (status or not timed_out):
            reason = status.decode("utf-8", "replace").strip() if status else (text.strip() or "bwrap failed")
            raise ConfinementError(f"the box could not be set up, so nothing ran: {reason}")
        trace = None
        if tracer is not None and scratch is not None:
            try:
                tracer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                tracer.kill()
                tracer.wait()
            with contextlib.suppress(FileNotFoundError):
                trace = Path(scratch, "trace").read_text(encoding="utf-8", errors="surrogateescape")
        code = process.returncode
        return BoxResult(
            exit_code=None if timed_out else (128 - code if code < 0 else code),
            output=text,
            timed_out=timed_out,
            trace=trace,
            trace_begin=trace_begin,
            cgroup=cgroup.version if cgroup is not None else "rlimit",
        )
    finally:
        if tracer is not None and tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        for fd in (info_read, block_write, status_read, go_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if cgroup is not None:
            cgroup.remove()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _read_status(fd: int, deadline: float) -> bytes:
    """The helper's first status byte (ready, or the start of a reason), or nothing by the deadline."""
    import select

    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    return os.read(fd, 1) if ready else b""


def _attach_tracer(box_pid: int, ids: tuple[int, int] | None, deadline: float) -> tuple[str, subprocess.Popen[bytes]]:
    """Start strace on the box's helper (the child of its PID 1) and wait until it is attached.

    strace runs as the box's uid outside the box: as the owner of the box's
    user namespace it may trace the box, while nothing in the box can see it
    (another PID namespace) or its output file (not in the box's view).
    """

    from ..permissions.trace import STRACE_OPTIONS, find_strace

    helper = _only_child(box_pid)
    scratch = tempfile.mkdtemp(prefix="assay-trace-")
    tracer: subprocess.Popen[bytes] | None = None
    try:
        if ids is not None:
            os.chown(scratch, *ids)
        options = [option for option in STRACE_OPTIONS if option != "--seccomp-bpf"]  # only for tracees it starts
        # The record is bounded: at TRACE_BYTES the kernel stops strace (SIGXFSZ), and run_in_box then stops the
        # box. prlimit(1) sets the limit for strace as it starts (the engine may not change another uid's limits).
        limit = [_prlimit(), f"--fsize={TRACE_BYTES}", "--core=0", "--"]
        tracer = subprocess.Popen(
            [*limit, find_strace(), *options, "-o", os.path.join(scratch, "trace"), "-p", str(helper)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            user=ids[0] if ids is not None else None,
            group=ids[1] if ids is not None else None,
            extra_groups=[] if ids is not None else None,
        )
        while _tracer_of(helper) == 0:
            if tracer.poll() is not None or time.monotonic() > deadline:
                raise ConfinementError("strace could not attach to the box, so its command was not run")
            time.sleep(0.001)
    except BaseException:
        if tracer is not None and tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch, tracer


@functools.cache
def _prlimit() -> str:
    """util-linux's prlimit(1), which starts a program with resource limits (ConfinementError when missing)."""
    found = shutil.which("prlimit", path="/usr/bin:/bin")
    if found is None:
        raise ConfinementError("prlimit is not installed; install the 'util-linux' package (make system-tools does)")
    return found


def _only_child(pid: int) -> int:
    """The one child of ``pid`` (the box's PID 1 starts exactly one: the helper)."""
    for _ in range(1000):
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if children:
                return int(children[0])
        time.sleep(0.001)
    raise ConfinementError("the box's helper did not start")


def _tracer_of(pid: int) -> int:
    """The TracerPid of a process (0: not traced)."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
        for line in handle:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return 0


def _box_pid(info_fd: int) -> int | None:
    """The host pid of the box's PID 1, from bubblewrap's ``--info-fd`` JSON (None if bwrap died first)."""
    data = _read_all(info_fd, until=b"}")
    try:
        pid = json.loads(data.decode("utf-8"))["child-pid"]
    except (ValueError, KeyError, UnicodeDecodeError):
        return None
    return int(pid) if isinstance(pid, int) else None


def _read_all(fd: int, until: bytes | None = None) -> bytes:
    data = bytearray()
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
            if until is not None and until in chunk:
                break
    except OSError:
        pass
    finally:
        if until is None:
            os.close(fd)
    return bytes(data)
