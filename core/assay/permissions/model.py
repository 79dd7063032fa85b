"""The permission set: three axes (read, write, execute) of absolute path patterns.

A model's policy, a task's implicit permissions and what a traced command
really touched all have this one shape, ``{"read": [...], "write": [...],
"execute": [...]}``. What a pattern matches is decided by
:mod:`assay.permissions.patterns`, never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .patterns import compile_pattern, normalize

__all__ = ["AXES", "PermissionSet"]

#: The axes, in the order every document and report lists them.
AXES = ("read", "write", "execute")


def _patterns(value: Any, axis: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{axis}: expected a list of patterns, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"{axis}: pattern must be a string, not {type(item).__name__}")
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class PermissionSet:
    """Read, write and execute patterns, each axis a tuple without duplicates, order kept."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    execute: tuple[str, ...] = ()

    AXES = AXES

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> PermissionSet:
        """Build from ``{"read": [...], "write": [...], "execute": [...]}``; missing axes are empty.

        Raises ``ValueError`` for an unknown key or an axis that is not a list of strings.
        Patterns are kept as written; :meth:`allows` validates them when used.
        """
        mapping = dict(mapping or {})
        unknown = sorted(set(mapping) - set(AXES))
        if unknown:
            raise ValueError(f"unknown permission axis {unknown[0]!r} (expected read, write, execute)")
        return cls(*(_patterns(mapping.get(axis), axis) for axis in AXES))

    def to_mapping(self) -> dict[str, list[str]]:
        """The JSON form: a dict of three lists."""
        return {axis: list(getattr(self, axis)) for axis in AXES}

    def union(self, other: PermissionSet) -> PermissionSet:
        """Every pattern of either set, this set's first."""
        return PermissionSet(*(tuple(dict.fromkeys((*getattr(self, axis), *getattr(other, axis)))) for axis in AXES))

    def allows(self, axis: str, path: str) -> bool:
        """Whether some pattern of ``axis`` matches ``path`` (textually, see :mod:`.patterns`)."""
        path = normalize(path)
        return any(compile_pattern(pattern).fullmatch(path) for pattern in getattr(self, axis))

    def without(self, other: PermissionSet) -> PermissionSet:
        """The paths of this set that ``other``'s patterns do not match, axis by axis.

        Meant for sets of exact paths (a trace), e.g. to drop what a
        runtime needs implicitly.
        """
        return PermissionSet(*(tuple(p for p in getattr(self, axis) if not other.allows(axis, p)) for axis in AXES))

    def is_empty(self) -> bool:
        """Whether no axis holds a pattern."""
        return not (self.read or self.write or self.execute)
