"""Confined children of different work items run at the same time: the event loop never waits on one.

Each test wraps the stage's blocking call with :class:`Meeting`, a test double
that holds the first two calls until both are in progress. If the stage ran
its children on the event loop (one at a time), the first call would block
the loop, the second would never start, and the meeting would time out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from assay.designs.permission import stage as permission
from assay.designs.trajectory import stage as trajectory
from assay.engine.run import RunSettings, execute_run


class Meeting:
    """Test double around a blocking function: its first ``parties`` calls must overlap in time."""

    # The timeout only ends a meeting that can never happen (calls run one after another); on a loaded machine the
    # second call may be long in coming, so it is generous.
    def __init__(self, inner: Callable[..., Any], parties: int = 2, timeout_s: float = 300.0) -> None:
        self.inner, self.parties = inner, parties
        self.barrier = threading.Barrier(parties, timeout=timeout_s)
        self.lock = threading.Lock()
        self.calls = 0
        self.met = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.calls += 1
            meets = self.calls <= self.parties
        if meets:
            self.barrier.wait()  # BrokenBarrierError when the calls run one after another
            with self.lock:
                self.met += 1
        return self.inner(*args, **kwargs)


def _run(tmp_path, host, stages: list[str], defenses: list[str]) -> None:
    outcome = execute_run(
        RunSettings(
            pack="example",
            endpoints=["scripted:comply"],
            stages=stages,
            defenses=defenses,
            seeds=[0, 1, 2, 3],
            concurrency=4,
            out=tmp_path / "out",
            progress=False,
        ),
        host=host,
    )
    assert outcome.error_rows == 0
    assert outcome.report.ok, [issue.format() for issue in outcome.report.ordered()]


def test_trajectory_children_of_different_items_overlap(confinement, tmp_path, host, monkeypatch):
    meeting = Meeting(trajectory.run_confined)
    monkeypatch.setattr(trajectory, "run_confined", meeting)
    _run(tmp_path, host, ["trajectory"], ["D0"])
    assert meeting.met == 2 and meeting.calls >= 4  # every item ran its tests


def test_permission_jails_of_different_items_overlap(strace, tmp_path, host, monkeypatch):
    meeting = Meeting(permission.run_in_jail)
    monkeypatch.setattr(permission, "run_in_jail", meeting)
    _run(tmp_path, host, ["permission"], ["curated"])
    assert meeting.met == 2 and meeting.calls >= 4


@pytest.mark.parametrize("concurrency", [1, 8, 64])
def test_worker_threads_cover_every_item_in_flight(concurrency):
    import asyncio

    from assay.engine.threads import SPARE_THREADS, use_worker_threads

    async def probe() -> int:
        use_worker_threads(concurrency)
        loop = asyncio.get_running_loop()
        return loop._default_executor._max_workers  # type: ignore[attr-defined]

    assert asyncio.run(probe()) == concurrency + SPARE_THREADS
