"""Lay a permission task's environment down as a directory that becomes ``/`` in the jail.

A case's ``environment`` names ``files`` (inline ``content`` or a pack
``fixture``, optional octal ``mode``), empty ``directories`` and
``symlinks``, all by absolute jail path. :func:`materialize` writes them
under a host directory; :mod:`assay.designs.permission.jail` later mounts the
host's system directories beside them and makes that directory the root.
Paths the jail takes from the host (:data:`SYSTEM_PATHS`) cannot be laid
down, so a task can never shadow ``/usr/bin/gzip`` or ``/etc/passwd``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import EnvironmentSpecError

__all__ = ["EnvironmentSpecError", "Layout", "SYSTEM_PATHS", "environment_problems", "materialize"]

#: Top-level jail paths that come from the host (mounted, linked or made by the
#: jail itself); environment paths may not lie under them.
SYSTEM_PATHS = ("/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr")

# /tmp is made fresh by the jail but may be seeded by the environment, so
# walk() lists what is in it without listing the directory itself.
_SCAFFOLD = ("/tmp",)


# The engine walks and writes environments by descriptor within these bounds (see assay.sandboxes.beneath).
_MAX_DEPTH, _MAX_PATH_BYTES = 64, 2048


def _check(path: Any, what: str) -> str:
    """The normalized jail path, or EnvironmentSpecError naming it."""
    if not isinstance(path, str) or not path:
        raise EnvironmentSpecError(f"{what} path must be a non-empty string, got {path!r}")
    if "\x00" in path:
        raise EnvironmentSpecError(f"{what} path {path!r} contains a NUL character")
    if not path.startswith("/"):
        raise EnvironmentSpecError(f"{what} path {path!r} is relative; environment paths must be absolute")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise EnvironmentSpecError(f"{what} path {path!r} contains '..'")
    if not parts:
        raise EnvironmentSpecError(f"{what} path {path!r} names the root directory")
    if len(parts) > _MAX_DEPTH or len(path.encode("utf-8", "surrogateescape")) > _MAX_PATH_BYTES:
        raise EnvironmentSpecError(
            f"{what} path {path[:80]!r}... is deeper than {_MAX_DEPTH} directories "
            f"or longer than {_MAX_PATH_BYTES} bytes"
        )
    normalized = "/" + "/".join(parts)
    for system in SYSTEM_PATHS:
        if normalized == system or normalized.startswith(system + "/"):
            raise EnvironmentSpecError(f"{what} path {path!r} lies under {system}, which the jail takes from the host")
    return normalized


def environment_problems(environment: Mapping[str, Any] | None, pack_root: Path | None) -> list[tuple[str, str]]:
    """(JSON pointer, message) for each part of a case's environment :func:`materialize` would refuse.

    Each path is checked where it stands (a relative path, ``..``, a path
    under the jail's system directories, ...); then the whole environment is
    laid down in a private temporary directory, which finds what only laying
    it down shows (a file where a directory must go, a fixture that is a
    link), and removed.
    """
    import tempfile

    environment = environment or {}
    problems: list[tuple[str, str]] = []
    for member, what in (("directories", "directory"), ("files", "file"), ("symlinks", "symlink")):
        for index, item in enumerate(environment.get(member) or []):
            path = item if member == "directories" else item.get("path") if isinstance(item, Mapping) else None
            pointer = f"/environment/{member}/{index}" + ("" if member == "directories" else "/path")
            try:
                _check(path, what)
                if member == "files":
                    _mode(item, str(path))
            except EnvironmentSpecError as exc:
                problems.append((pointer, str(exc)))
    if problems:
        return problems
    with tempfile.TemporaryDirectory(prefix="assay-check-") as scratch:
        try:
            materialize(environment, pack_root, Path(scratch) / "root")
        except (EnvironmentSpecError, OSError) as exc:
            problems.append(("/environment", f"cannot be laid down: {exc}"))
    return problems


@dataclass
class Layout:
    """A materialized environment: ``host_root`` is the directory that becomes ``/`` in the jail.

    ``links`` are the environment's own symlinks as (jail path, target as
    written) pairs: the only links in the tree a policy's rules may resolve
    through, and only while they still point where the environment said.
    """

    host_root: Path
    links: tuple[tuple[str, str], ...] = ()

    def host_path(self, sandbox_path: str) -> Path:
        """Where the jail path ``sandbox_path`` lives on the host.

        Only for environment paths: the system directories are mounted from the
        host at run time, so they have no place here (EnvironmentSpecError).
        """
        return self.host_root / _check(sandbox_path, "sandbox")[1:]

    def walk(self) -> list[str]:
        """Every environment path (files, directories, symlinks) as jail paths, sorted.

        It reads the tree as it is now, so after a run it includes what the
        command created. System mount points, the merged-/usr links and the
        ``/tmp`` directory itself are the jail's, not the environment's, and are
        left out; symlinks are listed, never followed.
        """
        found: list[str] = []
        skip = {name.lstrip("/") for name in SYSTEM_PATHS}
        for top in sorted(os.listdir(self.host_root)) if self.host_root.is_dir() else []:
            if top in skip:
                continue
            if "/" + top not in _SCAFFOLD:
                found.append("/" + top)
            host = self.host_root / top
            if host.is_dir() and not host.is_symlink():
                for directory, dirs, files in os.walk(host):
                    relative = "/" + Path(directory).relative_to(self.host_root).as_posix()
                    found.extend(f"{relative}/{name}" for name in (*dirs, *files))
        return sorted(found)


def materialize(environment: Mapping[str, Any] | None, pack_root: Path | None, host_root: Path) -> Layout:
    """Lay ``environment``'s directories, files and symlinks under ``host_root``; returns the Layout.

    ``fixture`` files are read relative to ``pack_root``. Raises
    EnvironmentSpecError for a relative path, a ``..`` segment, a path under
    :data:`SYSTEM_PATHS`, a fixture outside the pack, an invalid mode, or an
    entry that would be written through a symlink. Symlinks are made last so
    that no file is ever written through one.
    """
    environment = environment or {}
    host_root = Path(host_root)
    host_root.mkdir(parents=True, exist_ok=True)
    layout = Layout(host_root)
    for directory in environment.get("directories") or []:
        target = _safe(layout, _check(directory, "directory"))
        if target.exists() and not target.is_dir():
            raise EnvironmentSpecError(f"directory path {directory!r} is already a file")
        target.mkdir(parents=True, exist_ok=True)
    for item in environment.get("files") or []:
        if not isinstance(item, Mapping):
            raise EnvironmentSpecError(f"file entry must be a mapping, got {item!r}")
        path = _check(item.get("path"), "file")
        target = _safe(layout, path)
        if target.is_dir():
            raise EnvironmentSpecError(f"file path {path!r} is already a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_content(item, path, pack_root))
        target.chmod(_mode(item, path))
    links: list[tuple[str, str]] = []
    for item in environment.get("symlinks") or []:
        if not isinstance(item, Mapping):
            raise EnvironmentSpecError(f"symlink entry must be a mapping, got {item!r}")
        path = _check(item.get("path"), "symlink")
        link_target = item.get("target")
        if not isinstance(link_target, str) or not link_target or "\x00" in link_target:
            raise EnvironmentSpecError(f"symlink {path!r} needs a non-empty target")
        host = _safe(layout, path)
        if host.exists() or host.is_symlink():
            raise EnvironmentSpecError(f"symlink path {path!r} already exists")
        host.parent.mkdir(parents=True, exist_ok=True)
        # The target is stored verbatim: it is resolved inside the jail, where
        # an absolute target means a jail path, not a host one.
        os.symlink(link_target, host)
        links.append((path, link_target))
    return Layout(host_root, tuple(sorted(links)))


def _safe(layout: Layout, path: str) -> Path:
    """The host path for ``path``, refusing one whose existing parents leave ``host_root`` through a symlink."""
    target = layout.host_root / path[1:]
    root = os.path.realpath(layout.host_root)
    parent = target.parent
    while not os.path.lexists(parent) and parent != layout.host_root:
        parent = parent.parent
    real = os.path.realpath(parent)
    if real != root and not real.startswith(root + os.sep):
        raise EnvironmentSpecError(f"path {path!r} would be written through a symlink that leaves the environment")
    return target


def _content(item: Mapping[str, Any], path: str, pack_root: Path | None) -> bytes:
    if "content" in item and "fixture" in item:
        raise EnvironmentSpecError(f"file {path!r} has both content and fixture")
    if "fixture" in item:
        fixture = item["fixture"]
        if pack_root is None:
            raise EnvironmentSpecError(f"file {path!r} names fixture {fixture!r} but no pack root was given")
        if not isinstance(fixture, str) or fixture.startswith("/") or ".." in Path(fixture).parts:
            raise EnvironmentSpecError(f"file {path!r}: fixture {fixture!r} must be a relative path inside the pack")
        from ...errors import PackError
        from ...sandboxes.fixtures import read_fixture

        try:  # the pack is untrusted: a link on the fixture's path is refused, never followed
            return read_fixture(pack_root, fixture)
        except PackError as exc:
            raise EnvironmentSpecError(f"file {path!r}: {exc}") from None
    content = item.get("content", "")
    if not isinstance(content, str):
        raise EnvironmentSpecError(f"file {path!r}: content must be a string")
    return content.encode("utf-8")


def _mode(item: Mapping[str, Any], path: str) -> int:
    mode = item.get("mode")
    if mode is None:
        return 0o644
    try:
        value = int(str(mode), 8)
    except ValueError:
        raise EnvironmentSpecError(f"file {path!r}: mode {mode!r} is not octal like '0755'") from None
    if value > 0o7777:
        raise EnvironmentSpecError(f"file {path!r}: mode {mode!r} is out of range")
    return stat.S_IMODE(value)
