"""Run a command in a task's environment, confined to a permission set, and record what it did.

:func:`run_in_jail` runs the command in a box (:mod:`assay.sandboxes.box`)
whose root is the task's environment: the host's ``/usr``, ``/etc`` (private
files masked) and merged-/usr links read-only, a fresh ``/proc`` with
``/proc/sys`` read-only, a minimal ``/dev``, the environment's own ``/tmp``;
new user (root mapped to an unprivileged uid when assay runs as root),
mount, PID, IPC, UTS and network namespaces, so the command has no network
and cannot see or signal host processes; aggregate and per-process limits;
the seccomp filter. With a policy, ``policy`` ∪ ``implicit`` becomes Landlock
rules resolved inside the box (:func:`assay.permissions.rules.landlock_rules`),
and the command runs traced: ``strace`` watches from outside the box, so
refusals are recorded as :class:`Denial` records the command cannot forge or
hide.

With a policy, nothing runs unless Landlock is available
(:class:`LandlockUnavailable` is raised first), and any failure to set up
the jail stops the run with :class:`JailError` before the command starts.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ConfinementError, JailError, LandlockUnavailable
from ...permissions.model import AXES, PermissionSet
from ...permissions.patterns import compile_pattern
from ...permissions.trace import Denial, find_strace, parse_strace
from ...sandboxes import landlock
from ...sandboxes.beneath import Beneath
from ...sandboxes.box import FILE_OVERRIDE, HELPER_DIR, Box, Limits, Mount, run_in_box, system_mounts
from .environment import Layout

__all__ = [
    "Denial",
    "INPUTS_DIR",
    "JAIL_LIMITS",
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

_DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}

#: Where a command finds its engine-made inputs (``inputs`` of :func:`run_in_jail`): read-only, outside the tree.
INPUTS_DIR = "/.assay"

#: What one jailed command may use: a task's commands are small file operations.
JAIL_LIMITS = Limits(processes=64, memory_bytes=1 << 30, file_bytes=64 << 20, cpu_seconds=60)


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
    create_within: Sequence[str] | None = None,
    inputs: Path | None = None,
    read_everything: bool = False,
) -> JailResult:
    """Run ``command`` with ``layout`` as ``/``, confined to ``policy`` ∪ ``implicit``.

    A string command runs as ``/bin/bash -c COMMAND`` (so the policy must let
    bash execute, as it would for an agent's shell). ``policy=None`` runs
    with no file restriction, but still boxed and without network. The
    command is traced when ``trace`` is set or a policy is given. ``env``
    replaces the default environment (PATH, HOME=/tmp, TMPDIR=/tmp,
    LANG=C.UTF-8). ``create_within`` bounds where a write pattern for a
    missing path may grant create rights (see :func:`~assay.permissions.rules.landlock_rules`).
    ``inputs`` is an engine directory bound read-only at :data:`INPUTS_DIR`
    (what a verifier reads besides the environment: nothing in the tree can
    fill or replace it); ``read_everything`` keeps the file-override
    capabilities (:data:`~assay.sandboxes.box.FILE_OVERRIDE`) so that the
    command reads the tree's files whatever modes they were left with.

    Before every command the parts of ``/`` the box is built on (the mount
    points, the merged-/usr links, ``/tmp``) are put back as the box needs
    them, whatever an earlier command made of them.

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
    traced = trace or policy is not None
    if traced:
        find_strace()  # StraceNotFound, naming the package, before anything runs
    root = Path(layout.host_root).resolve()
    mounts = system_mounts(python=False)
    if inputs is not None:
        mounts = (*mounts, Mount("ro", INPUTS_DIR, str(Path(inputs).resolve())))
    _scaffold(root, mounts)
    box = Box(
        mounts=mounts,
        root=str(root),
        cwd=cwd,
        env=dict(_DEFAULT_ENV if env is None else env),
        policy=None if policy is None else policy.union(implicit).to_mapping(),
        create_within=tuple(create_within) if create_within is not None else None,
        # Only the environment's own links resolve in the policy: ones a command planted grant nothing.
        trusted_links=layout.links,
        owned=(str(root),),
        limits=JAIL_LIMITS,
        trace=traced,
        caps=FILE_OVERRIDE if read_everything else (),
    )
    try:
        result = run_in_box(box, argv, timeout_s=timeout_s)
    except ConfinementError as exc:
        raise JailError(str(exc)) from None
    accessed: PermissionSet | None = None
    denials: list[Denial] = []
    if result.trace is not None:
        accessed, denials = parse_strace(result.trace, cwd=cwd, begin=result.trace_begin)
    return JailResult(result.exit_code, result.output, result.timed_out, denials, accessed)


def _scaffold(root: Path, mounts: Sequence[Mount]) -> None:
    """Put back the parts of ``/`` a box is built on, never following what a command left.

    Earlier commands ran with this tree as ``/`` and may have replaced any
    of these entries: a mount point with a link to a host path or a file, a
    merged-/usr link (``/bin``) with a directory of their own programs, which
    bubblewrap would refuse to link over (no box) or, worse, a verifier would
    run. Each is reached by descriptor without following links; a mount
    point that is not a real directory, and a merged-/usr name that is not
    exactly the host's link, is removed and made afresh (bubblewrap makes
    the link), so the box is built from the host's parts alone.
    """
    top = {m.dest.strip("/"): m for m in mounts if m.dest.count("/") == 1 and m.kind != "mask"}
    for name in ("dev", "proc", HELPER_DIR.lstrip("/"), "tmp"):
        top.setdefault(name, Mount("dir", "/" + name))
    with Beneath(root) as tree:
        for name, mount in sorted(top.items()):
            if mount.kind == "symlink":
                if tree.lstat(name) is not None and tree.readlink(name) != mount.source:
                    tree.delete(name)
                continue
            if tree.lstat(name) is not None and not tree.is_dir(name):
                tree.delete(name)
            tree.mkdir(name)
            tree.chmod(name, 0o1777 if name == "tmp" else 0o755)
