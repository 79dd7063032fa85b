"""The one exception hierarchy of assay.

Only the CLI turns these into messages and exit codes; library code raises
them and never prints::

    AssayError
    ├── UsageError            the caller asked for something impossible (exit 2)
    ├── PluginError           plugin loading or registration failed
    │   └── DuplicateNameError    two plugins registered the same component name
    ├── SpecError             a document does not satisfy the spec
    ├── PackError             a pack could not be found or loaded
    └── ArchiveError          an untrusted archive is unsafe or unreadable
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "AssayError",
    "DuplicateNameError",
    "PackError",
    "PluginError",
    "SpecError",
    "UsageError",
]


class AssayError(Exception):
    """Base of every error assay raises on purpose."""


class UsageError(AssayError):
    """The request cannot be carried out as asked (bad option, unknown name)."""


class PluginError(AssayError):
    """A plugin failed to load or registered something invalid."""


class DuplicateNameError(PluginError):
    """Two plugins registered a component of the same kind under the same name.

    Benchmark identifiers must be stable, so a collision is never resolved by
    renaming: both plugins are named and loading stops.
    """

    def __init__(self, kind: str, name: str, first: str, second: str) -> None:
        self.kind, self.name, self.first, self.second = kind, name, first, second
        super().__init__(f"duplicate {kind} {name!r}: registered by plugin {first!r} and by plugin {second!r}")


class SpecError(AssayError):
    """A document does not satisfy the assay spec."""


class PackError(AssayError):
    """A case pack could not be located or read."""


class ArchiveError(AssayError):
    """An archive is unsafe (path traversal, links, size) or unreadable."""
