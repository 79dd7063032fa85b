"""Rows appended as work items finish, and read back on resume.

Each row is one line written with a single ``write`` to a file opened with
O_APPEND, so a killed process leaves whole lines plus at most one partial
last line; resume drops that partial line and every completed item is kept
exactly once. The file is fsynced at intervals and on close: a process kill
loses nothing (the data is in the page cache), and fsyncing every row would
cap a fast run at the disk's sync rate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from ..bundle import dump_row, write_bytes_atomic

__all__ = ["RowLog", "drop_error_rows"]


class RowLog:
    """An append-only JSON-lines file of result rows, keyed by work item."""

    def __init__(self, path: Path, *, fsync_interval_s: float = 1.0) -> None:
        self.path = path
        self.fsync_interval_s = fsync_interval_s
        path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[tuple[Any, ...], bytes] = {}
        self.dropped_partial = False
        self._recover()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._last_sync = time.monotonic()
        self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-fsync")
        self._sync: Future[None] | None = None

    def _recover(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete, _, partial = data.rpartition(b"\n")
        if partial:
            # The process died mid-write: cut the partial line so appends start clean.
            with open(self.path, "r+b") as handle:
                handle.truncate(len(complete) + 1 if complete else 0)
            self.dropped_partial = True
        for line in complete.split(b"\n") if complete else []:
            row = orjson.loads(line)
            key = row["key"]
            ident = (key["case_id"], key["endpoint"], key["condition"], key["seed"], key["epoch"], key["protocol"])
            self.rows.setdefault(ident, line + b"\n")

    def __contains__(self, ident: tuple[Any, ...]) -> bool:
        return ident in self.rows

    def append(self, ident: tuple[Any, ...], row: Mapping[str, Any]) -> None:
        """Append one finished row (ignored if the item already has one)."""
        if ident in self.rows:
            return
        line = dump_row(row)
        os.write(self._fd, line)
        self.rows[ident] = line
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval_s and (self._sync is None or self._sync.done()):
            # In a thread: an fsync can take tens of milliseconds, and the
            # caller is usually an event loop with requests in flight.
            self._sync = self._syncer.submit(os.fsync, self._fd)
            self._last_sync = now

    def close(self) -> None:
        """Flush to disk and close."""
        self._syncer.shutdown(wait=True)
        os.fsync(self._fd)
        os.close(self._fd)


def drop_error_rows(path: Path) -> int:
    """Remove the rows with errors from a row log (atomically), so a resumed run does those work items again.

    Returns how many were removed. The rest stay byte for byte, in their order;
    a partial last line (a killed writer) goes with them, as :class:`RowLog`
    would drop it. The model calls that succeeded inside a dropped row are in
    the response cache, so running its item again pays only for what failed.
    """
    if not path.exists():
        return 0
    data = path.read_bytes()
    complete, _, _ = data.rpartition(b"\n")
    kept, dropped = [], 0
    for line in complete.split(b"\n") if complete else []:
        if orjson.loads(line).get("errors"):
            dropped += 1
        else:
            kept.append(line + b"\n")
    if dropped:
        write_bytes_atomic(path, b"".join(kept))
    return dropped
