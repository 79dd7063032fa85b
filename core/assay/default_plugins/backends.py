"""Built-in backends: openai, local, scripted."""

from __future__ import annotations

from ..backends.local import LocalBackend
from ..backends.openai import OpenAIBackend
from ..backends.scripted import ScriptedBackend
from ..components import Backend
from ..hookspecs import Register, hookimpl


@hookimpl
def register_backends(register: Register) -> None:
    """Register the three built-in backends."""
    # Typed as the protocol so that mypy checks the built-ins satisfy it.
    backends: tuple[Backend, ...] = (OpenAIBackend(), LocalBackend(), ScriptedBackend())
    for backend in backends:
        register(backend)
