"""Run a program confined: no network, resource limits, Landlock file access to one workspace.

Used by the local sandbox's ``code_run`` tool and by checkers that run a
task's tests. The interpreter and system libraries are readable and
executable; the workspace is the only writable place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CONFINE_FAILED", "run_confined"]

#: Exit code of a child whose confinement could not be set up (nothing ran).
CONFINE_FAILED = 126


def run_confined(
    workspace: Path, argv: Sequence[str], *, timeout_s: float = 20.0, limits: Mapping[str, int] | None = None
) -> tuple[int | None, str]:
    """Run ``argv`` (``python`` means this interpreter) in ``workspace``.

    Returns (exit code, or None on timeout; output).
    """
    limits = dict(limits or {})
    interpreter = os.path.realpath(sys.executable)
    runtime = sorted({sys.base_prefix, sys.prefix, os.path.dirname(interpreter)})
    spec = {
        "read": [*runtime, "/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/dev/null", "/dev/urandom"],
        "execute": [*runtime, "/usr", "/lib", "/lib64", "/bin"],
        "write": [str(workspace)],
        "limits": {
            "cpu_s": int(limits.get("cpu_s", 10)),
            "memory_bytes": int(limits.get("memory_mb", 512)) << 20,
            "file_bytes": 16 << 20,
        },
    }
    program = [interpreter, "-I", *argv[1:]] if argv and argv[0] in ("python", "python3") else list(argv)
    if program and not os.path.isabs(program[0]):
        for directory in ("/usr/bin", "/bin"):
            if os.path.exists(os.path.join(directory, program[0])):
                program[0] = os.path.join(directory, program[0])
                break
    try:
        result = subprocess.run(
            [sys.executable, "-m", "assay.sandboxes._confine", json.dumps(spec), "--", *program],
            cwd=workspace, capture_output=True, text=True, timeout=timeout_s,
            env={"PATH": "/usr/bin:/bin", "HOME": str(workspace), "TMPDIR": str(workspace),
                 "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return result.returncode, result.stdout + result.stderr
