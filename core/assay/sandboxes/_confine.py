"""Confine, then exec: ``python -m assay.sandboxes._confine SPEC_JSON -- PROGRAM ARGS...``.

Runs in the child only. In order: a new network namespace with no
interfaces but loopback down (no network), resource limits (CPU seconds,
address space, file size, processes), Landlock file access, then exec of the
program. Any failure exits 126 before the program runs, so code never runs
with fewer restrictions than asked.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

from .landlock import LandlockError, restrict_self

_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000


def _no_network() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) == 0:
        return
    # Without root, a user namespace first makes us root inside it.
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
    with open("/proc/self/setgroups", "w") as handle:
        handle.write("deny")
    with open("/proc/self/uid_map", "w") as handle:
        handle.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as handle:
        handle.write(f"{gid} {gid} 1")


def main() -> None:
    """Apply the spec's restrictions and exec the program after ``--``."""
    split = sys.argv.index("--")
    spec, program = json.loads(sys.argv[1]), sys.argv[split + 1 :]
    try:
        if spec.get("no_network", True):
            _no_network()
        limits = spec.get("limits", {})
        if "cpu_s" in limits:
            resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"]))
        if "memory_bytes" in limits:
            resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
        if "file_bytes" in limits:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
        restrict_self(spec.get("read", []), spec.get("write", []), spec.get("execute", []))
    except (OSError, LandlockError, ValueError) as exc:
        sys.stderr.write(f"assay sandbox: cannot confine: {exc}\n")
        os._exit(126)
    os.execv(program[0], program)


if __name__ == "__main__":
    main()
