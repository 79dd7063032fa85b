"""The SQLite response cache: model answers keyed by the canonical request.

A resumed run asks the same questions again; the cache answers the ones that
were answered before the interruption, so a resumed run's rows are identical
to an uninterrupted run's even for a sampling model. WAL mode lets several
worker processes (Ray) share one file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .messages import ChatResponse

__all__ = ["ResponseCache"]


class ResponseCache:
    """Responses by request digest, in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process kill; only an OS crash can lose
        # the last commits, and those requests are simply asked again.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses "
            "(key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, response TEXT NOT NULL)"
        )

    def get(self, key: str) -> ChatResponse | None:
        """The cached response for a request digest, or None."""
        row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else ChatResponse.from_json(json.loads(row[0]))

    def put(self, key: str, endpoint: str, response: ChatResponse) -> None:
        """Store a response (the first answer to a request wins)."""
        self._db.execute(
            "INSERT OR IGNORE INTO responses (key, endpoint, response) VALUES (?, ?, ?)",
            (key, endpoint, json.dumps(response.to_json(), sort_keys=True)),
        )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
