"""Rows appended as work items finish, and read back on resume and when the bundle is sealed.

Each row is one line written with a single ``write`` to a file opened with
O_APPEND, so a killed process leaves whole lines plus at most one partial
last line; resume drops that partial line and every completed item is kept
exactly once. The file is fsynced at intervals and on close: a process kill
loses nothing (the data is in the page cache), and fsyncing every row would
cap a fast run at the disk's sync rate.

What is held of the rows is where each planned item's row starts in the file
(eight bytes per item, by its position in the plan), never the rows: a run of
a million items holds 8 MB of them, and reads them back one at a time.
"""

from __future__ import annotations

import os
import time
from array import array
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from ..bundle import dump_row

__all__ = ["RowLog", "drop_error_rows"]

#: How much of the log is read at a time when it is scanned.
_CHUNK = 1 << 20

#: How much of it is read around a row when the rows are read in plan order.
_WINDOW = 2 << 20

_ABSENT = -1


def _ident(row: Mapping[str, Any]) -> tuple[Any, ...]:
    key = row["key"]
    return (key["case_id"], key["endpoint"], key["condition"], key["seed"], key["epoch"], key["protocol"])


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, line without its newline, whether it ended) of every line, read a chunk at a time."""
    with open(path, "rb") as handle:
        offset, pending = 0, b""
        while chunk := handle.read(_CHUNK):
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                yield offset + start, pending[start:end], True
                start = end + 1
            offset += start
            pending = pending[start:]
        if pending:
            yield offset, pending, False


class RowLog:
    """An append-only JSON-lines file of result rows, indexed by each planned item's position.

    ``position`` maps a work item's ident to its position in the plan (None
    for an item outside it, whose rows are kept in the file but not indexed);
    ``size`` is the number of planned items.
    """

    def __init__(
        self,
        path: Path,
        position: Callable[[tuple[Any, ...]], int | None],
        size: int,
        *,
        fsync_interval_s: float = 1.0,
    ) -> None:
        self.path = path
        self.fsync_interval_s = fsync_interval_s
        self._position = position
        self._offsets = array("q", [_ABSENT]) * size
        self.count = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self.dropped_partial = False
        self._end = self._recover()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._last_sync = time.monotonic()
        self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-fsync")
        self._sync: Future[None] | None = None

    def _recover(self) -> int:
        """Index the rows a previous process left; returns the length of the whole lines."""
        if not self.path.exists():
            return 0
        end = 0
        for offset, line, ended in _lines(self.path):
            if not ended:
                # The process died mid-write: cut the partial line so appends start clean.
                with open(self.path, "r+b") as handle:
                    handle.truncate(offset)
                self.dropped_partial = True
                break
            self._index(_ident(orjson.loads(line)), offset)
            end = offset + len(line) + 1
        return end

    def _index(self, ident: tuple[Any, ...], offset: int) -> bool:
        position = self._position(ident)
        if position is None or self._offsets[position] != _ABSENT:
            return False
        self._offsets[position] = offset
        self.count += 1
        return True

    def __contains__(self, ident: tuple[Any, ...]) -> bool:
        position = self._position(ident)
        return position is not None and self._offsets[position] != _ABSENT

    def append(self, ident: tuple[Any, ...], row: Mapping[str, Any]) -> None:
        """Append one finished row (ignored if the item already has one)."""
        if ident in self:
            return
        line = dump_row(row)
        os.write(self._fd, line)
        self._index(ident, self._end)
        self._end += len(line)
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_interval_s and (self._sync is None or self._sync.done()):
            # In a thread: an fsync can take tens of milliseconds, and the
            # caller is usually an event loop with requests in flight.
            self._sync = self._syncer.submit(os.fsync, self._fd)
            self._last_sync = now

    def missing(self) -> Iterator[int]:
        """The positions of the planned items that have no row yet, in plan order."""
        return (position for position, offset in enumerate(self._offsets) if offset == _ABSENT)

    def lines_in_plan_order(self) -> Iterator[bytes]:
        """Every planned item's row, newline included, in plan order (each read from the file as it is wanted).

        Rows were appended roughly in plan order (concurrent items finish a
        little out of it), so a window that reaches back as well as forward
        reads the file nearly once, front to back.
        """
        window_start, window = 0, b""
        with open(self.path, "rb") as handle:
            for offset in self._offsets:
                if offset == _ABSENT:
                    raise ValueError("a planned item has no row")
                start = offset - window_start
                if start < 0 or (end := window.find(b"\n", start)) < 0:
                    window_start = max(0, offset - _WINDOW // 2)
                    handle.seek(window_start)
                    window = handle.read(_WINDOW)
                    start = offset - window_start
                    while (end := window.find(b"\n", start)) < 0:
                        more = handle.read(_CHUNK)
                        if not more:
                            raise ValueError(f"the row at byte {offset} of {self.path} is cut short")
                        window += more
                yield window[start : end + 1]

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
    The log is read and rewritten a chunk at a time.
    """
    if not path.exists():
        return 0
    import tempfile

    dropped = 0
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for _, line, ended in _lines(path):
                if not ended:
                    break
                if orjson.loads(line).get("errors"):
                    dropped += 1
                else:
                    out.write(line + b"\n")
            out.flush()
            os.fsync(out.fileno())
        if dropped:
            os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dropped
