"""The comparison space of static scoring: concrete jail paths per axis, and symlink resolution in the jail view.

Static scoring expands patterns over concrete paths. Those are the task
environment's own paths (laid down under the layout) plus, for scored roots
in the system directories the jail mounts from the host (``/usr/bin/**`` on
the execute axis, typically), the host's entries there. Symlinks resolve as
they would inside the jail: an absolute target in the environment is a jail
path, and system paths resolve on the host (they are the same files).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from ...permissions.model import AXES
from ...permissions.patterns import literal_prefix, normalize
from .environment import Layout

__all__ = ["MAX_SYSTEM_ENTRIES", "jail_realpath", "scoring_universe"]

#: Where the jail shows host directories (read-only binds and merged-/usr links).
_SYSTEM_PREFIXES = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64")

#: A bound on host entries walked for one root, so a root like ``/usr/**`` stays cheap.
MAX_SYSTEM_ENTRIES = 20_000


def _is_system(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in _SYSTEM_PREFIXES)


def jail_realpath(layout: Layout, path: str) -> str:
    """``path`` with every symlink resolved as the jail sees it (at most 40 hops, like the kernel)."""
    parts = [p for p in normalize(path).split("/") if p]
    resolved = ""
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            resolved = posixpath.dirname(resolved) if resolved else ""
            continue
        candidate = f"{resolved}/{part}"
        if _is_system(candidate):
            # The jail binds these from the host: the host resolves them the same way.
            real = os.path.realpath(candidate + ("/" + "/".join(parts) if parts else ""))
            return real
        host = layout.host_root / candidate.lstrip("/")
        if host.is_symlink() and hops < 40:
            hops += 1
            target = os.readlink(host)
            parts = [p for p in target.split("/") if p and p != "."] + parts
            resolved = "" if target.startswith("/") else resolved
            continue
        resolved = candidate
    return resolved or "/"


def _system_entries(prefix: str) -> list[str]:
    found: list[str] = []
    if not os.path.isdir(prefix):
        return [prefix] if os.path.lexists(prefix) else []
    for directory, dirs, files in os.walk(prefix):
        for name in (*dirs, *files):
            found.append(f"{directory}/{name}")
            if len(found) >= MAX_SYSTEM_ENTRIES:
                return found
    return found


def scoring_universe(layout: Layout, spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per axis, the concrete jail paths the policy and the spec are compared over.

    The environment's paths (as laid down, before any run) count on every
    axis; host entries count under the scored roots that lie in the system
    directories. :func:`assay.designs.permission.scoring.score_policy` keeps only
    those within the axis's scored roots.
    """
    environment = layout.walk()
    universe: dict[str, list[str]] = {}
    for axis in AXES:
        paths = set(environment)
        for root in (spec.get("scored_roots") or {}).get(axis, []):
            prefix = literal_prefix(root)
            if _is_system(prefix):
                paths.update(_system_entries(prefix))
        universe[axis] = sorted(paths)
    return universe
