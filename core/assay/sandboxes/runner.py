"""Run a program in a box whose only writable place is one workspace (``code_run``, a task's tests, checkers).

The box (:mod:`assay.sandboxes.box`) sees the system directories read-only,
the workspace read-write at its own path, a small private ``/tmp``, and
nothing else of the host; it has no network, its own PID namespace, the
aggregate and per-process limits given, Landlock and the seccomp filter.
``python`` and ``python3`` in the command mean the box's Python
(:func:`~assay.sandboxes.box.box_python`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ConfinementError
from .box import Box, Limits, Mount, box_python, run_in_box, system_mounts

__all__ = [
    "CONFINE_FAILED",
    "mask_timings",
    "run_confined",
    "workspace_limits",
]

#: Exit code reported when the box could not be set up (nothing ran); the output says why.
#: Never an exit status (those are 0 to 255): the child's own exit status and output cannot pass for it, so code that
#: ran and then printed "cannot confine" and exited 125 is still recorded as having run.
CONFINE_FAILED = -1


# Test runners print how long they took ("Ran 3 tests in 0.004s", pytest's "== 2 passed in 0.12s ==").
_TIMING = re.compile(r"(?m)^(Ran \d+ tests? in |=+ .* in )\d+(?:\.\d+)?s\b")


def mask_timings(output: str) -> str:
    """Test-runner output with its durations masked (``<time>s``).

    What reaches a result row must be the same for the same agent, byte for
    byte, however loaded the machine is; a duration never is.
    """
    return _TIMING.sub(lambda match: match.group(1) + "<time>s", output)


def workspace_limits(limits: Mapping[str, int] | None = None) -> Limits:
    """Box limits from the sandbox options ``cpu_s``, ``memory_mb``, ``processes``, ``file_mb``, ``tmp_mb``."""
    options = dict(limits or {})
    return Limits(
        processes=int(options.get("processes", 64)),
        memory_bytes=int(options.get("memory_mb", 512)) << 20,
        file_bytes=int(options.get("file_mb", 16)) << 20,
        cpu_seconds=int(options.get("cpu_s", 10)),
        tmp_bytes=int(options.get("tmp_mb", 64)) << 20,
    )


def _environment(workspace: str) -> dict[str, str]:
    """The whole environment of a workspace box: nothing of the engine's (no API keys) reaches it."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": workspace,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run_confined(
    workspace: Path,
    argv: Sequence[str],
    *,
    timeout_s: float = 20.0,
    limits: Mapping[str, int] | None = None,
    links: Mapping[str, str] | None = None,
) -> tuple[int | None, str]:
    """Run ``argv`` in ``workspace``; returns (exit code, or None on timeout; output).

    ``links`` maps box paths to paths relative to the workspace: each becomes
    a symlink in the box's own (read-only) skeleton, so the exec sandbox's
    code sees its files store at ``/workspace`` as the file tools do. The link
    is resolved inside the box, so whatever the agent made of its target
    reaches nothing the box cannot already see.

    A box that cannot be set up runs nothing and reports :data:`CONFINE_FAILED`
    with ``assay sandbox: cannot confine: ...`` as its output.
    """
    box_limits = workspace_limits(limits)
    root = str(Path(workspace).resolve())
    aliases = []
    for dest, relative in sorted((links or {}).items()):
        if not dest.startswith("/") or ".." in Path(relative).parts or Path(relative).is_absolute():
            raise ValueError(f"a box link must be an absolute box path to a path inside the workspace: {dest}")
        aliases.append(Mount("symlink", dest, f"{root}/{relative}"))
    program = list(argv)
    if program and program[0] in ("python", "python3"):
        # -B, not PYTHONDONTWRITEBYTECODE (which -I ignores): a cached module written in the same second as the
        # source it was compiled from, at the same size, would hide a later edit of that source from the checker.
        program = [box_python(), "-I", "-B", *program[1:]]
    box = Box(
        mounts=(
            *system_mounts(),
            Mount("tmpfs", "/tmp", size=box_limits.tmp_bytes),
            Mount("rw", root, root),
            *aliases,
        ),
        cwd=root,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": root,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        owned=(root,),
        limits=box_limits,
    )
    try:
        result = run_in_box(box, program, timeout_s=timeout_s)
    except ConfinementError as exc:
        return CONFINE_FAILED, f"assay sandbox: cannot confine: {exc}"
    return (None if result.timed_out else result.exit_code), (
        "timed out\n" + result.output if result.timed_out else result.output
    )
