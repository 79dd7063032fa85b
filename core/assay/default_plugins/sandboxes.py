"""The built-in ``local`` sandbox."""

from __future__ import annotations

from ..components import Sandbox
from ..hookspecs import Register, hookimpl
from ..sandboxes.local import LocalSandboxFactory


@hookimpl
def register_sandboxes(register: Register) -> None:
    """Register the local sandbox."""
    sandbox: Sandbox = LocalSandboxFactory()  # typed as the protocol so that mypy checks it satisfies it
    register(sandbox)
