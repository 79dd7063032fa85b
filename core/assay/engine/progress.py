"""Progress: a rich display on a terminal, plain lines at intervals otherwise."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

__all__ = ["Progress"]


class Progress:
    """Counts finished and failed items and shows done/total, rate, ETA and errors."""

    def __init__(
        self,
        total: int,
        *,
        done: int = 0,
        stream: IO[str] | None = None,
        interval_s: float = 10.0,
        enabled: bool = True,
        label: str = "assay run",
    ) -> None:
        self.total, self.done, self.errors = total, done, 0
        self.label = label
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.enabled = enabled
        self._start = time.monotonic()
        self._initial = done
        self._last_line = self._start
        self._rich: Any = None
        if enabled and self.stream.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("errors: {task.fields[errors]}"),
                transient=False,
            )
            self._task = self._rich.add_task("run", total=total, completed=done, rate="", errors=0)
            self._rich.start()
        elif enabled:
            print(f"{label}: {done}/{total} items to start with", file=self.stream, flush=True)

    def _rate(self) -> float:
        elapsed = time.monotonic() - self._start
        return (self.done - self._initial) / elapsed if elapsed > 0 else 0.0

    def advance(self, error: bool = False) -> None:
        """One more item finished (with an error row when ``error``)."""
        self.done += 1
        self.errors += int(error)
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done, rate=f"{self._rate():.1f} items/s", errors=self.errors)
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval_s or self.done == self.total:
            self._last_line = now
            rate = self._rate()
            eta = (self.total - self.done) / rate if rate > 0 else float("nan")
            print(
                f"{self.label}: {self.done}/{self.total} items, {rate:.1f}/s, ETA {eta:.0f} s, {self.errors} errors",
                file=self.stream,
                flush=True,
            )

    def grow(self, items: int) -> None:
        """``items`` more to do (a command whose parts learn their sizes as they start)."""
        self.total += items
        if self._rich is not None:
            self._rich.update(self._task, total=self.total)

    def close(self) -> None:
        """Stop the display."""
        if self._rich is not None:
            self._rich.stop()
