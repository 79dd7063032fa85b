"""A permission policy as Landlock rules, resolved in the box's own file tree.

:func:`landlock_rules` runs inside the box (the box helper computes it after
the view is in place), so every pattern is expanded over exactly the files the
command will see, and symlinks resolve as they do for the command. It
depends on nothing but the standard library, :mod:`.patterns`, :mod:`.model`
and :mod:`assay.sandboxes.landlock`: it travels in the box helper's bundle.
"""

from __future__ import annotations

import os
import posixpath
import sys
from collections.abc import Iterator, Mapping, Sequence

from ..sandboxes import landlock
from .model import AXES, PermissionSet
from .patterns import compile_pattern, is_literal, normalize

__all__ = [
    "landlock_rules",
]

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


def landlock_rules(
    permissions: PermissionSet,
    *,
    create_within: Sequence[str] | None = None,
    trusted_links: Mapping[str, str] | None = None,
) -> dict[str, int]:
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
    * With ``create_within`` (directories: the task's scored write roots and
      the implicit ones), create rights never land on a directory outside
      them: a write pattern whose nearest existing parent is ``/`` (or any
      other ancestor above the task's tree) grants nothing, instead of write
      access to the whole file system.
    * ``/proc/self/...`` is granted as ``/proc``: each process's ``/proc/self``
      is a different directory, and the box's /proc shows only its own processes.
    * With ``trusted_links`` (the environment's own symlinks: path -> target as
      written), a rule whose path goes through any other link in the writable
      tree grants nothing: an earlier command could have planted it
      (``reports -> /``) to widen a pattern to the whole tree. A declared link
      counts only while it still holds its declared target, and the path is
      followed through it, so a link planted where the target was (or on its
      way) grants nothing either. The system's links (under /usr, /etc,
      /proc, /dev and the merged-/usr names) are always trusted.
    """
    rules: dict[str, int] = {}

    def grant(path: str, rights: int) -> None:
        rules[path] = rules.get(path, 0) | rights

    trusted = None if trusted_links is None else dict(trusted_links)
    for axis in AXES:
        for pattern in getattr(permissions, axis):
            for path, rights in _pattern_rules(axis, normalize(pattern), create_within):
                if trusted is not None and _through_planted_link(path, trusted):
                    continue
                grant(_real(path, axis), rights)
    return rules


# Links that belong to the system, not to the task's writable tree (read-only mounts and the kernel's).
_SYSTEM_LINK_PREFIXES = ("/usr/", "/etc/", "/proc/", "/dev/", "/sys/")
_MERGED_LINKS = frozenset({"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})


def _through_planted_link(path: str, trusted: Mapping[str, str]) -> bool:
    """Whether ``path`` (as a rule names it, before resolving) passes through a link the environment did not declare.

    Followed one component at a time, as the kernel would: a declared link is
    passed only while it holds its declared target, and the walk goes on
    through that target, so whatever it reaches is checked too.
    """
    pending = [part for part in path.split("/") if part]
    current, hops = "", 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = current.rsplit("/", 1)[0]
            continue
        candidate = f"{current}/{part}"
        if candidate in _MERGED_LINKS:
            # /bin is /usr/bin on a merged-/usr system: what is under it is the system's, as under /usr (/bin/sh is
            # a link, and it is not one the agent planted).
            current = "/usr" + candidate
            continue
        if candidate.startswith(_SYSTEM_LINK_PREFIXES) or not os.path.islink(candidate):
            current = candidate
            continue
        try:
            target = os.readlink(candidate)
        except OSError:
            return True
        hops += 1
        if trusted.get(candidate) != target or hops > _MAX_HOPS:
            return True
        pending[:0] = [piece for piece in target.split("/") if piece]
        if target.startswith("/"):
            current = ""
    return False


# As the kernel's limit on links followed in one lookup (MAXSYMLINKS).
_MAX_HOPS = 40


def _pattern_rules(axis: str, pattern: str, within: Sequence[str] | None) -> Iterator[tuple[str, int]]:
    for alias in ("/proc/self", "/proc/thread-self"):
        if pattern == alias or pattern.startswith(alias + "/"):
            pattern = "/proc/**"
    tree = {"read": _READ_TREE, "write": _WRITE_TREE, "execute": _EXEC}[axis]
    if pattern == "/**" or pattern.endswith("/**"):
        base = pattern[:-3] or "/"
        if is_literal(base):
            if os.path.isdir(base):
                yield base, tree
            elif axis == "write":
                yield from _create(base, within)
        else:
            for match in _expand(base):
                if os.path.isdir(match) and (axis == "execute" or not os.path.islink(match)):
                    yield match, tree
            if axis == "write":
                yield from _create_in(_literal_prefix(base), within)
        return
    if is_literal(pattern):
        if os.path.exists(pattern):
            yield from _literal(axis, pattern)
        elif axis == "write":
            yield from _create(pattern, within)
        return
    for match in _expand(pattern):
        if axis != "execute" and os.path.islink(match):
            continue
        yield from _literal(axis, match)
    if axis == "write":
        yield from _create_in(_literal_prefix(pattern), within)


def _literal(axis: str, path: str) -> Iterator[tuple[str, int]]:
    """Rules for one existing path named exactly (unresolved: landlock_rules checks, then resolves, it)."""
    if os.path.isdir(path):
        if axis == "read":
            yield path, _LL.READ_DIR
        elif axis == "write":
            yield path, _ENTRIES
    else:
        yield path, {"read": _LL.READ_FILE, "write": _WRITE_FILE, "execute": _EXEC}[axis]


def _create(path: str, within: Sequence[str] | None) -> Iterator[tuple[str, int]]:
    """Create rights for making the missing ``path`` (see landlock_rules)."""
    yield from _create_in(posixpath.dirname(path), within)


def _create_in(directory: str, within: Sequence[str] | None) -> Iterator[tuple[str, int]]:
    """Create rights on ``directory``, or on its nearest existing ancestor when that lies within ``within``."""
    directory = directory or "/"
    while not os.path.isdir(directory):
        directory = posixpath.dirname(directory)
    if within is None or any(directory == root or directory.startswith(root.rstrip("/") + "/") for root in within):
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
