"""Built-in executors: ``local`` (asyncio, the default) and ``ray`` (needs assay[ray])."""

from __future__ import annotations

from ..components import Executor
from ..executors.local import LocalExecutor
from ..executors.ray import RayExecutor
from ..hookspecs import Register, hookimpl


@hookimpl
def register_executors(register: Register) -> None:
    """Register the local and Ray executors."""
    # Typed as the protocol so that mypy checks the built-ins satisfy it.
    executors: tuple[Executor, ...] = (LocalExecutor(), RayExecutor())
    for executor in executors:
        register(executor)
