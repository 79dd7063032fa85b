"""The last step inside a box, before the command (run by the system Python from a bundle of these modules).

Runs as the box's PID 2 (bubblewrap is PID 1), after the namespaces and the
view are in place. In order, and any failure stops the box before the
command runs (the reason goes to the error descriptor the engine reads):

1. close every inherited descriptor but stdin, stdout, stderr and the error
   descriptor (which is closed on exec);
2. the per-process limits, and ``RLIMIT_NPROC``, which the kernel counts per
   user namespace, so it bounds the whole box;
3. Landlock: the box's path rules (or its permission policy, resolved here,
   in the box's view), TCP refused, and (ABI 6+) no signals to or abstract
   sockets of processes outside the box;
4. the seccomp filter of :mod:`assay.sandboxes.seccomp`;
5. one NUL byte to the status descriptor: confined;
6. when the box is traced, wait until the engine says strace is attached,
   then one call naming a random path, which marks in the trace where the
   command begins;
7. ``execve`` of the command, with exactly the box's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
from typing import Any

from .landlock import restrict_self_to
from .seccomp import apply_filter

_LIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "cpu": resource.RLIMIT_CPU,
    "nofile": resource.RLIMIT_NOFILE,
}


def _fail(error_fd: int, message: str) -> None:
    os.write(error_fd, message.encode("utf-8", "replace"))
    os._exit(125)


def _program(argv: list[str], env: dict[str, str]) -> str:
    """The executable for ``argv[0]``: as given when it holds a slash, else looked up on the box's PATH."""
    name = argv[0]
    if "/" in name:
        return name
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return name


def _read_spec(fd: int) -> dict[str, Any]:
    """The box's spec from the descriptor the engine passed (then closed: nothing in the box may read it)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    spec: dict[str, Any] = json.loads(b"".join(chunks))
    return spec


def main() -> None:
    """Confine this process as the spec says, then become the command."""
    spec = _read_spec(int(sys.argv[1]))
    error_fd = int(spec["status_fd"])
    go_fd = spec.get("go_fd")
    keep = sorted({error_fd, *([int(go_fd)] if go_fd is not None else [])})
    try:
        os.set_inheritable(error_fd, False)
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        for name, value in spec["limits"].items():
            resource.setrlimit(_LIMITS[name], (int(value), int(value)))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(spec["cwd"])
        rules = {path: int(bits) for path, bits in spec["rules"].items()}
        if spec.get("policy") is not None:
            # A permission policy is resolved here, in the box's own view of the files.
            from ..permissions.model import PermissionSet
            from ..permissions.rules import landlock_rules

            within = spec.get("create_within")
            rules = landlock_rules(
                PermissionSet.from_mapping(spec["policy"]),
                create_within=within,
                trusted_links=spec.get("trusted_links"),
            )
        restrict_self_to(rules, deny_tcp=True, scope=True)
        apply_filter()
    except Exception as exc:  # noqa: BLE001 - any failure must stop the box, and say why
        _fail(error_fd, f"{type(exc).__name__}: {exc}")
    argv, env = list(spec["argv"]), dict(spec["env"])
    program = _program(argv, env)
    os.write(error_fd, b"\0")  # confined: from here on, whatever happens is the command's doing
    if go_fd is not None:
        # Traced: wait until the tracer outside the box is attached, then mark where the command begins.
        os.read(int(go_fd), 2)
        os.close(int(go_fd))
    if spec.get("trace_begin"):
        with contextlib.suppress(OSError):  # the path never exists: the call itself is the mark
            os.stat(spec["trace_begin"])
    try:
        os.execve(program, argv, env)
    except OSError as exc:
        os.write(2, f"assay box: {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
