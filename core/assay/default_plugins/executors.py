"""Built-in executors: ``local`` (asyncio, the default) and ``ray`` (needs assay[ray])."""

from __future__ import annotations

from ..executors.local import LocalExecutor
from ..executors.ray import RayExecutor
from ..hookspecs import hookimpl


@hookimpl
def register_executors(register) -> None:
    """Register the local and Ray executors."""
    register(LocalExecutor())
    register(RayExecutor())
