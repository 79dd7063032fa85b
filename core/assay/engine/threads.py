"""Worker threads for the blocking parts of work items.

Stages await their blocking work (tool calls that read files, confined
children a stage runs, checkers and verifiers)
with :func:`asyncio.to_thread`, so one item's child process never stalls
another item's model call. ``to_thread`` uses the event loop's default
executor, which asyncio sizes by CPU count (6 threads on 2 cores): fewer
than the items a run keeps in flight. An executor therefore calls
:func:`use_worker_threads` with its concurrency once its loop runs.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

__all__ = ["use_worker_threads"]

#: Threads beyond one per item in flight, for blocking work outside items (caches, progress).
SPARE_THREADS = 4


def use_worker_threads(concurrency: int) -> None:
    """Give the running event loop a default executor with a thread for every item in flight.

    Threads start only when work is handed to them, so a run whose stages
    never block (single-turn model calls) starts none. ``asyncio.run`` shuts
    the executor down when the loop ends.
    """
    loop = asyncio.get_running_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=max(1, concurrency) + SPARE_THREADS, thread_name_prefix="assay-worker")
    )
