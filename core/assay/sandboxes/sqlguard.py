"""SQLite that an agent or a case pack wrote, run in the engine's process, kept inside the task's own tables.

A task database is the engine's store, not a box's: the agent's ``db_query``
and the pack's ``schema_sql`` and SQL fixture run in the engine, as its user
(root, in CI). SQLite can reach files from SQL: ``ATTACH`` opens or creates
any database file (and so copies a 0600 host database into the task's),
``VACUUM INTO`` writes one, ``load_extension`` loads a library, and pragmas
change how and where it writes. :func:`guarded_connection` refuses all of
that through an authorizer (the task's tables only), sets
``SQLITE_LIMIT_ATTACHED`` to 0, bounds values, SQL text, depth and run time,
and caps the file's size with ``max_page_count`` (which SQLite keeps per
connection, so every connection sets it).

:func:`lay_down_database` lays a case's ``environment.database`` down through
such a connection. The local sandbox runs it on the task's file; the
validator runs it on an in-memory database, so that ``assay validate``
refuses exactly the SQL a run would refuse, without touching a file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "DB_BYTES",
    "DB_COLUMNS",
    "DB_QUERY_SECONDS",
    "DB_VALUE_BYTES",
    "ENGINE_SQLITE_HEAP",
    "GuardedConnection",
    "LAY_DOWN_SECONDS",
    "LayDownError",
    "database_problems",
    "guarded_connection",
    "lay_down_database",
    "quoted",
]

#: How long one agent query may run before SQLite is interrupted.
DB_QUERY_SECONDS = 5.0
#: How long laying a case's database down may take.
LAY_DOWN_SECONDS = 10.0
#: The largest value (and SQL text) an agent query may make or read.
DB_VALUE_BYTES = 128 << 10
#: The largest a task database may grow: a statement that would grow it further fails ("database or disk is full").
DB_BYTES = 24 << 20
#: The SQL a case lays its database down with may be this long; its values are bounded as the agent's are (one SQL
#: function call on a value is one uninterruptible step, and costs up to the square of its length).
LAY_DOWN_SQL_BYTES, LAY_DOWN_VALUE_BYTES = 1 << 20, DB_VALUE_BYTES
# Pragmas that only read the schema; each takes a table or index name, never a value.
_PRAGMAS_READ_ONLY = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list"}
)
# Functions that reach a file or load code (readfile and writefile come with SQLite's shell, should one be linked),
# and fts3_tokenizer, which (in builds with SQLITE_ENABLE_FTS3_TOKENIZER, Debian's among them) tells a host pointer
# with one argument and, with two, registers a pointer of the caller's for the next fts3 table to call through.
_FUNCTIONS_REFUSED = frozenset({"load_extension", "readfile", "writefile", "fts3_tokenizer"})
#: The most columns a table, an index or a result row may have: with values of DB_VALUE_BYTES, one result row holds
#: at most 16 MiB (SQLite's own bound is 2,000 columns, 256 MiB a row).
DB_COLUMNS = 128
#: All the memory SQLite may hold in this process (``hard_heap_limit``, process-wide: SQLite has no bound per
#: connection). Sorts, DISTINCT and temporary tables of an agent's query stay in memory (``temp_store``), never in
#: files outside the item's stores, and a query that would pass this fails with "out of memory".
ENGINE_SQLITE_HEAP = 1 << 30
_heap_limited = False


class GuardedConnection(sqlite3.Connection):
    """A connection whose authorizer notes what it refused (``refused``), to say why a statement failed.

    A watchdog interrupts whatever it runs at its deadline (``watchdog``),
    whichever statement is running: the progress handler alone counts the
    steps of one statement, so a script of short statements, or one of few
    costly steps, would run past it. :meth:`close` stops the watchdog.
    """

    refused: list[str]
    watchdog: threading.Timer | None = None

    def close(self) -> None:
        """Stop the watchdog and close the connection."""
        if self.watchdog is not None:
            self.watchdog.cancel()
        super().close()


def _authorizer(refused: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """The authorizer of a guarded connection: the task's tables only; each refusal is noted in ``refused``."""

    def authorize(action: int, first: str | None, second: str | None, database: str | None, source: str | None) -> int:
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            refused.append("ATTACH and DETACH (and VACUUM INTO, which attaches its target) reach other files")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (first or "").lower() not in _PRAGMAS_READ_ONLY:
            refused.append(f"PRAGMA {first} (only pragmas that read the schema are allowed)")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (second or "").lower() in _FUNCTIONS_REFUSED:
            refused.append(f"the function {second} reaches files or loads code")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    return authorize


def guarded_connection(
    path: Path | str,
    seconds: float = DB_QUERY_SECONDS,
    *,
    value_bytes: int = DB_VALUE_BYTES,
    sql_bytes: int = DB_VALUE_BYTES,
) -> GuardedConnection:
    """A connection to the database at ``path`` (``":memory:"`` for none) for SQL an agent or a pack wrote.

    Values are capped at ``value_bytes`` because a single SQL function call
    (``instr``, ``replace``, ``like``) is one step for SQLite's progress
    handler and costs up to the square of its arguments' length; a statement
    is interrupted after ``seconds``; the file may grow to :data:`DB_BYTES`.
    """
    global _heap_limited
    db = sqlite3.connect(path, factory=GuardedConnection, check_same_thread=False)
    if not _heap_limited:
        db.execute(f"PRAGMA hard_heap_limit = {ENGINE_SQLITE_HEAP}")
        _heap_limited = True
    (page_size,) = db.execute("PRAGMA page_size").fetchone()
    pages = max(1, DB_BYTES // int(page_size))
    # Set by the engine before the authorizer is on, which refuses every pragma that would lift them.
    db.execute(f"PRAGMA max_page_count = {pages}")
    db.execute("PRAGMA temp_store = MEMORY")
    db.execute(f"PRAGMA temp.max_page_count = {pages}")
    db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    db.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, DB_COLUMNS)
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_bytes)
    db.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, sql_bytes)
    db.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 200)
    db.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 200)
    db.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 10)
    db.refused = []
    db.set_authorizer(_authorizer(db.refused))
    deadline = time.monotonic() + seconds
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
    db.watchdog = threading.Timer(seconds, _interrupt, (db,))
    db.watchdog.daemon = True
    db.watchdog.start()
    return db


def _interrupt(db: GuardedConnection) -> None:
    """The watchdog's call: interrupt what ``db`` runs (nothing, if it was closed as the deadline passed)."""
    with contextlib.suppress(sqlite3.ProgrammingError):
        db.interrupt()


def quoted(name: str) -> str:
    """An SQL identifier for any name (quotes doubled), so a name can never end the identifier early."""
    return '"' + name.replace('"', '""') + '"'


class LayDownError(ValueError):
    """A case's database cannot be laid down: ``pointer`` is the case member at fault, ``message`` why."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer}: {message}")
        self.pointer, self.message = pointer, message


def _why(db: GuardedConnection, exc: Exception) -> str:
    return f"refused: {db.refused[-1]}" if db.refused else f"SQLite says: {exc}"


def lay_down_database(db: GuardedConnection, database: Mapping[str, Any], read_fixture: Callable[[str], bytes]) -> None:
    """Run a case's ``environment.database`` on ``db``: ``schema_sql``, then the ``fixture`` SQL, then ``tables``.

    ``read_fixture`` gives a pack file's bytes. The first statement or row
    that fails (refused by the authorizer, or an error of its own) raises
    :class:`LayDownError` naming its member's JSON pointer.
    """
    problems = database_problems(db, database, read_fixture, first_only=True)
    if problems:
        raise problems[0]
    db.commit()


def database_problems(
    db: GuardedConnection,
    database: Mapping[str, Any],
    read_fixture: Callable[[str], bytes],
    *,
    first_only: bool = False,
) -> list[LayDownError]:
    """Lay ``database`` down on ``db`` as :func:`lay_down_database` does, and return every member that fails.

    After a member fails, the later ones still run, but only what the
    authorizer refuses of them is reported (a table the failed script never
    made is no finding of its own), so each unsafe member has its own line.
    """
    problems: list[LayDownError] = []

    def failed(pointer: str, message: str, exc: Exception) -> bool:
        if problems and not db.refused:
            return False  # an ordinary consequence of the failure already reported
        problems.append(LayDownError(pointer, f"{message} ({_why(db, exc)})"))
        return first_only

    for member in ("schema_sql", "fixture"):
        if not database.get(member):
            continue
        script = (
            str(database[member])
            if member == "schema_sql"
            else read_fixture(str(database["fixture"])).decode("utf-8", errors="replace")
        )
        db.refused.clear()
        try:
            db.executescript(script)
        except sqlite3.Error as exc:
            if failed(f"/environment/database/{member}", "its SQL cannot be laid down", exc):
                return problems
    tables = database.get("tables") or {}
    for table, rows in tables.items() if isinstance(tables, Mapping) else ():
        for number, row in enumerate(rows if isinstance(rows, list) else []):
            columns = list(row) if isinstance(row, Mapping) else []
            escaped = str(table).replace("~", "~0").replace("/", "~1")
            db.refused.clear()
            try:
                db.execute(
                    f"INSERT INTO {quoted(str(table))} ({', '.join(quoted(str(c)) for c in columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)})",
                    [row[c] for c in columns],
                )
            except (sqlite3.Error, sqlite3.Warning, OverflowError) as exc:
                if failed(f"/environment/database/tables/{escaped}/{number}", "the row cannot be inserted", exc):
                    return problems
    return problems
