"""The ``ray`` executor: the same work items as Ray tasks (``pip install 'assay[ray]'``).

Options (``--executor ray:address=auto,batch=16``): ``address`` of an existing
cluster (default: start a local one, or join the one ``RAY_ADDRESS`` names),
``batch`` items per task, ``num_cpus`` for a local cluster, ``inflight``
batches at a time (default: two per CPU of the cluster). Each worker
process rebuilds the runtime from the job once and reuses it for every batch
it runs; rows come back to the driver, which appends them as tasks finish.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.planner import WorkItem
from ..errors import UsageError

# The runtime (stages, sandboxes, jail) is imported when items are executed, not
# when the executor is registered: plugin loading must stay cheap.
if TYPE_CHECKING:
    from ..engine.runtime import Job, Runtime

__all__ = ["RayExecutor", "run_batch"]

Sink = Callable[[WorkItem, dict[str, Any]], None]

# One runtime per worker process and job: building it loads plugins and
# endpoints, which must not happen per batch. Keyed by the job, so a worker
# reused by another run builds that run's runtime.
_RUNTIMES: dict[Job, Runtime] = {}


def run_batch(job: Job, items: list[WorkItem], concurrency: int) -> list[tuple[WorkItem, dict[str, Any]]]:
    """Execute a batch of items in a worker (the body of the Ray task)."""
    import asyncio

    from ..engine.runtime import Runtime
    from ..engine.threads import use_worker_threads

    runtime = _RUNTIMES.get(job)
    if runtime is None:
        runtime = _RUNTIMES[job] = Runtime(job)

    async def go() -> list[tuple[WorkItem, dict[str, Any]]]:
        use_worker_threads(concurrency)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(item: WorkItem) -> tuple[WorkItem, dict[str, Any]]:
            async with semaphore:
                return item, await runtime.execute(item)

        try:
            return await asyncio.gather(*(one(item) for item in items))
        finally:
            # Connection pools belong to this loop; the next batch gets a new loop.
            for endpoint in runtime.endpoints.values():
                await endpoint.aclose()

    return asyncio.run(go())


@dataclass(frozen=True)
class RayExecutor:
    """Run batches of work items as Ray tasks."""

    name: str = "ray"
    description: str = "Ray tasks on an existing or local Ray cluster (assay[ray])."

    def run(
        self,
        job: Job,
        items: Iterable[WorkItem],
        sink: Sink,
        *,
        concurrency: int = 16,
        options: Mapping[str, str] | None = None,
    ) -> None:
        """Submit the items in batches and sink rows as each batch finishes."""
        try:
            import ray
        except ImportError:
            raise UsageError("the ray executor needs Ray: pip install 'assay[ray]'") from None
        options = dict(options or {})
        batch = max(1, int(options.get("batch", 16)))
        started_here = False
        if not ray.is_initialized():
            init: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if options.get("address"):
                init["address"] = options["address"]
            elif options.get("num_cpus"):
                init["num_cpus"] = int(options["num_cpus"])
            ray.init(**init)
            started_here = True
        try:
            remote = ray.remote(run_batch)
            # Batches are made from the items as earlier ones finish, a few per worker in flight: neither the items
            # nor their rows are ever all held, by the driver or in the object store (runs may plan 10^6 items).
            inflight = max(1, int(options.get("inflight", 0) or 2 * int(ray.cluster_resources().get("CPU", 1))))  # type: ignore[no-untyped-call]
            queue = iter(items)
            pending: list[Any] = []
            while True:
                while len(pending) < inflight and (chunk := list(itertools.islice(queue, batch))):
                    pending.append(remote.remote(job, chunk, concurrency))
                if not pending:
                    break
                done, pending = ray.wait(pending, num_returns=1)
                for item, row in ray.get(done[0]):
                    sink(item, row)
        finally:
            if started_here:
                ray.shutdown()
