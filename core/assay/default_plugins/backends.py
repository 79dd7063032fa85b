"""Built-in backends: openai, local, scripted."""

from __future__ import annotations

from ..backends.local import LocalBackend
from ..backends.openai import OpenAIBackend
from ..backends.scripted import ScriptedBackend
from ..hookspecs import hookimpl


@hookimpl
def register_backends(register) -> None:
    """Register the three built-in backends."""
    register(OpenAIBackend())
    register(LocalBackend())
    register(ScriptedBackend())
