"""The ``local`` executor: a pool of asyncio workers in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..engine.planner import WorkItem
from ..engine.runtime import Job, Runtime
from ..errors import UsageError

__all__ = ["LocalExecutor"]

Sink = Callable[[WorkItem, dict], None]


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
        if options:
            raise UsageError(f"the local executor takes no options (got {', '.join(sorted(options))})")
        asyncio.run(self._run(runtime or Runtime(job), list(items), sink, max(1, concurrency)))

    async def _run(self, runtime: Runtime, items: list[WorkItem], sink: Sink, concurrency: int) -> None:
        queue = iter(items)

        async def worker() -> None:
            # Workers pull from one iterator: bounded concurrency without
            # creating a task per item (runs may hold 10^5 items).
            for item in queue:
                sink(item, await runtime.execute(item))

        try:
            await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)) or 1)))
        finally:
            await runtime.aclose()
