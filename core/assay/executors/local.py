"""The ``local`` executor: a pool of asyncio workers in this process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.planner import WorkItem
from ..errors import UsageError

# The runtime (stages, sandboxes, jail) is imported when items are executed, not
# when the executor is registered: plugin loading must stay cheap.
if TYPE_CHECKING:
    from ..engine.runtime import Job, Runtime

__all__ = ["LocalExecutor"]

Sink = Callable[[WorkItem, dict[str, Any]], None]


@dataclass(frozen=True)
class LocalExecutor:
    """Run work items concurrently on one event loop (the default executor)."""

    name: str = "local"
    description: str = "asyncio in this process; --concurrency items in flight."

    def run(
        self,
        job: Job,
        items: Iterable[WorkItem],
        sink: Sink,
        *,
        concurrency: int = 16,
        options: Mapping[str, str] | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        """Execute every item; ``sink`` receives each row as soon as it is finished.

        ``runtime`` reuses one the caller already built from ``job`` (the
        driver builds it to describe endpoints; loading a model twice is waste).
        """
        import asyncio

        if options:
            raise UsageError(f"the local executor takes no options (got {', '.join(sorted(options))})")
        from ..engine.runtime import Runtime

        asyncio.run(self._run(runtime or Runtime(job), items, sink, max(1, concurrency)))

    async def _run(self, runtime: Runtime, items: Iterable[WorkItem], sink: Sink, concurrency: int) -> None:
        import asyncio

        from ..engine.threads import use_worker_threads

        use_worker_threads(concurrency)
        queue = iter(items)

        async def worker() -> None:
            # Workers pull from one iterator: bounded concurrency without
            # creating a task per item, or holding the items (runs may plan 10^6).
            for item in queue:
                sink(item, await runtime.execute(item))

        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            await runtime.aclose()
