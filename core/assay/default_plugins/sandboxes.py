"""The built-in ``local`` sandbox."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..sandboxes.local import LocalSandboxFactory


@hookimpl
def register_sandboxes(register) -> None:
    """Register the local sandbox."""
    register(LocalSandboxFactory())
