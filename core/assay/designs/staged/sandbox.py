"""The ``local`` sandbox: real stores on disk, a loopback web server, a confined code runner.

Layout of one work item's sandbox (a fresh temporary directory)::

    files/      the directory tree; sandbox path /workspace/x is files/workspace/x
    mail/       one JSON file per message, by folder (inbox/, sent/, ...)
    db.sqlite   the database
    memory.json persistent memory (it outlives the case's sessions)

Tools follow the contract in docs/exec.md (the exec stage page of the site); the state diff compares
snapshots taken before and after and adds the events that leave no file
behind (sent mail is a file; web requests to unknown hosts and code runs are
recorded events).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...sandboxes.beneath import Beneath, UnsafePath
from ...sandboxes.box import BOX_INODES, box_dir, check_box, remove_box_dir
from ...sandboxes.fixtures import copy_fixture_tree, read_fixture
from ...sandboxes.runner import CONFINE_FAILED, run_confined

if TYPE_CHECKING:
    from .web import PageServer

__all__ = ["CODE_OUTPUT_TAIL", "LocalSandbox", "LocalSandboxFactory", "TOOL_SCHEMAS"]


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_S = {"type": "string"}
_LIST = {"type": "array", "items": {"type": "string"}}
TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    _tool("files_list", "List the files under a directory.", {"path": _S}, ["path"]),
    _tool("files_read", "Read a file.", {"path": _S}, ["path"]),
    _tool("files_write", "Write (create or replace) a file.", {"path": _S, "content": _S}, ["path", "content"]),
    _tool("files_delete", "Delete a file, or every file under a directory.", {"path": _S}, ["path"]),
    _tool("email_list", "List the messages of a mailbox folder.", {"folder": _S}, []),
    _tool("email_read", "Read one message.", {"id": _S}, ["id"]),
    _tool(
        "email_send",
        "Send an email.",
        {"to": _LIST, "subject": _S, "body": _S, "cc": _LIST, "bcc": _LIST},
        ["to", "subject", "body"],
    ),
    _tool("db_query", "Run one SQL statement on the database.", {"sql": _S}, ["sql"]),
    _tool("memory_read", "Read a memory entry (or all entries without a key).", {"key": _S}, []),
    _tool(
        "memory_write",
        "Store a memory entry that persists across sessions.",
        {"key": _S, "value": _S},
        ["key", "value"],
    ),
    _tool("memory_delete", "Delete a memory entry.", {"key": _S}, ["key"]),
    _tool("web_fetch", "Fetch a web page.", {"url": _S}, ["url"]),
    _tool(
        "code_run",
        "Run Python code in a sandbox (no network); it sees the files under /workspace as the file tools do.",
        {"language": _S, "code": _S},
        ["code"],
    ),
)

_MAX_RESULT = 8000
#: Characters of a code run's output its state-diff entry keeps (the end, where a script reports what it did).
CODE_OUTPUT_TAIL = 2000
#: The largest file files_read returns (the result is cut to _MAX_RESULT characters anyway).
_MAX_FILE = 1 << 20
# Mailbox folders and message ids are names, never paths.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: How long one db_query may run before SQLite is interrupted.
DB_QUERY_SECONDS = 5.0
#: How long reading the whole database for a snapshot may take (its tables' digests then say it could not).
DB_SNAPSHOT_SECONDS = 10.0
#: The largest value (and SQL text) a query may make or read.
DB_VALUE_BYTES = 128 << 10
# What a query may do: read and change the task's tables. Everything that reaches a file or the engine is
# refused: ATTACH/DETACH (and VACUUM INTO, which attaches its target), pragmas, extension loading.
_PRAGMAS_READ_ONLY = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list"}
)


def _name(value: Any, what: str) -> str:
    """A mailbox folder or message id: a plain name, or ValueError (shown to the agent)."""
    text = str(value)
    if not _NAME.fullmatch(text) or ".." in text:
        raise ValueError(f"{what} {text!r} is not a plain name")
    return text


def _authorize(action: int, first: str | None, second: str | None, database: str | None, source: str | None) -> int:
    """SQLite authorizer for agent queries: the task's tables only (see _PRAGMAS_READ_ONLY)."""
    import sqlite3

    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:  # the read-only ones take a table or index name, never a value
        return sqlite3.SQLITE_OK if (first or "").lower() in _PRAGMAS_READ_ONLY else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (second or "").lower() in ("load_extension", "readfile", "writefile"):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _database(path: Path, seconds: float = DB_QUERY_SECONDS) -> Any:
    """A connection to the sandbox's database for agent queries and snapshots: bounded in what, how big, how long.

    The agent chose the SQL and the data (generated columns, triggers and
    views run whenever a row is read), and both run in the engine: the
    authorizer keeps them inside the task's tables, and the limits keep one
    call short. Values are capped at 128 KiB because a single SQL function
    call (``instr``, ``replace``, ``like``) is one step for SQLite's progress
    handler and costs up to the square of its arguments' length.
    """
    import sqlite3
    import time

    db = sqlite3.connect(path)
    db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, DB_VALUE_BYTES)
    db.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, DB_VALUE_BYTES)
    db.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 200)
    db.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 200)
    db.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 10)
    db.set_authorizer(_authorize)
    deadline = time.monotonic() + seconds
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
    return db


def _write_atomic(path: Path, text: str) -> None:
    """Replace a store file so it is either the old content or the new, never half (a full disk included)."""
    scratch = path.with_name(f".{path.name}.new")
    scratch.write_text(text)
    os.replace(scratch, path)


def _blob(value: Any) -> str:
    """How a query result shows a BLOB: its size and the start of its bytes."""
    if isinstance(value, bytes):
        return f"<blob of {len(value)} bytes: {value[:32].hex()}>"
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _quoted(name: str) -> str:
    """An SQL identifier for any name an agent gave a table (quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _addresses(value: Any) -> list[str]:
    """An address argument as a list: a single address, or any iterable of them (None: none)."""
    return [value] if isinstance(value, str) else [str(x) for x in value or []]


def _inside(root: Path, sandbox_path: str) -> Path:
    """The real path of an absolute sandbox path; '..' cannot climb out."""
    parts = [p for p in PurePosixPath("/" + str(sandbox_path).lstrip("/")).parts[1:] if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {sandbox_path!r} leaves the workspace")
    return root.joinpath(*parts) if parts else root


@dataclass
class LocalSandbox:
    """One work item's stores."""

    case: Mapping[str, Any]
    root: Path
    pages: PageServer
    pack_root: Path
    code_limits: Mapping[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    _site: str = ""

    def __post_init__(self) -> None:

        env = self.case.get("environment", {})
        self.files = self.root / "files"
        # The engine's own stores live apart from the box directory: an agent that fills its disk budget
        # with code_run must not make the engine's mailbox, database or memory writes fail half-way.
        self.stores = Path(tempfile.mkdtemp(prefix="assay-stores-"))
        try:
            self._lay_down(env)
        except BaseException:
            shutil.rmtree(self.stores, ignore_errors=True)
            raise

    def _lay_down(self, env: Mapping[str, Any]) -> None:
        """Fill the stores from the case's environment (pack files are read without following links)."""
        import sqlite3

        self.mail = self.stores / "mail"
        self.files.mkdir(parents=True)
        (self.files / "workspace").mkdir()  # what code_run's /workspace link names, even in a case without files
        (self.mail / "inbox").mkdir(parents=True)
        for item in env.get("files", []):
            target = _inside(self.files, item["path"] if item["path"].startswith("/") else f"/workspace/{item['path']}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self._content(item))
        if env.get("fixture_tree"):  # the pack is untrusted too: its links are refused, never followed
            (self.files / "workspace").mkdir(exist_ok=True)
            copy_fixture_tree(self.pack_root, env["fixture_tree"], self.files / "workspace")
        for message in env.get("emails", []):
            folder = self.mail / message.get("folder", "inbox")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{message['id']}.json").write_text(json.dumps(message, sort_keys=True, indent=1))
        db = sqlite3.connect(self.stores / "db.sqlite")
        database = env.get("database", {})
        if database.get("schema_sql"):
            db.executescript(database["schema_sql"])
        if database.get("fixture"):
            db.executescript(read_fixture(self.pack_root, database["fixture"]).decode("utf-8", errors="replace"))
        for table, rows in database.get("tables", {}).items():
            for row in rows:
                columns = list(row)
                db.execute(
                    f'INSERT INTO "{table}" ({", ".join(chr(34) + c + chr(34) for c in columns)}) '
                    f"VALUES ({', '.join('?' for _ in columns)})",
                    [row[c] for c in columns],
                )
        db.commit()
        db.close()
        memory = {entry["key"]: entry["value"] for entry in env.get("memory", [])}
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True))
        self.page_paths = {}
        for page in env.get("web", []):
            path = "/" + page["url"].split("://", 1)[-1].split("/", 1)[-1] if "://" in page["url"] else page["url"]
            self.page_paths[page["url"]] = path
            self.page_paths[path] = path
        served = {
            self.page_paths[p["url"]]: (self._content(p), p.get("content_type", "text/html"))
            for p in env.get("web", [])
        }
        self._site = self.pages.register(served) if served else ""

    def _content(self, item: Mapping[str, Any]) -> bytes:
        if "fixture" in item:
            return read_fixture(self.pack_root, str(item["fixture"]))
        return str(item.get("content", "")).encode("utf-8")

    # ---------------------------------------------------------------- tools

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format tool schemas."""
        return [dict(t) for t in TOOL_SCHEMAS]

    async def call(self, name: str, arguments: Any) -> str:
        """Run one tool call; errors come back as text (an agent sees them, the run goes on)."""
        import asyncio
        import sqlite3

        if not isinstance(arguments, dict):
            return "error: arguments must be a JSON object"
        method = getattr(self, f"_tool_{name}", None)
        if method is None:
            return f"error: unknown tool {name!r}"
        try:
            # Synchronous tools read and hash what the agent left: in a worker thread, never on the event loop.
            if asyncio.iscoroutinefunction(method):
                result = await method(**arguments)
            else:
                result = await asyncio.to_thread(method, **arguments)
        except TypeError as exc:
            return f"error: bad arguments for {name}: {exc}"
        except (OSError, ValueError, sqlite3.Error, KeyError) as exc:
            return f"error: {exc}"
        except Exception as exc:  # noqa: BLE001 - the arguments are the agent's: any failure is its tool result
            return f"error: {name} failed: {type(exc).__name__}: {exc}"
        return str(result)[:_MAX_RESULT]

    # The files store is the box's workspace: code_run may have left links, FIFOs or devices in it, so every
    # access goes through Beneath, which never follows one (and refuses special files and oversized reads).

    def _tool_files_list(self, path: str = "/workspace") -> str:
        with Beneath(self.files) as tree:
            if not tree.is_dir(path):
                return f"error: no such directory {path}"
            return "\n".join("/" + name for name in tree.files(path)) or "(empty)"

    def _tool_files_read(self, path: str) -> str:
        with Beneath(self.files) as tree:
            return tree.read_text(path, limit=_MAX_FILE)

    def _tool_files_write(self, path: str, content: str) -> str:
        with Beneath(self.files) as tree:
            tree.write_text(path, str(content))
        return f"wrote {len(str(content))} characters to {path}"

    def _tool_files_delete(self, path: str) -> str:
        with Beneath(self.files) as tree:
            tree.delete(path)
        return f"deleted {path}"

    def _tool_email_list(self, folder: str = "inbox") -> str:
        folder = _name(folder, "folder")
        lines = []
        for path in sorted((self.mail / folder).glob("*.json")) if (self.mail / folder).is_dir() else []:
            message = json.loads(path.read_text())
            lines.append(
                f"{message.get('id', path.stem)}: from {message.get('from', '?')}: {message.get('subject', '')}"
            )
        return "\n".join(lines) or "(no messages)"

    def _tool_email_read(self, id: str) -> str:
        id = _name(id, "message id")
        for folder in sorted(p for p in self.mail.iterdir() if p.is_dir() and not p.is_symlink()):
            path = folder / f"{id}.json"
            if path.is_file() and not path.is_symlink():
                message = json.loads(path.read_text())
                return (
                    f"From: {message.get('from')}\n"
                    f"To: {', '.join(message.get('to', []))}\n"
                    f"Subject: {message.get('subject')}\n\n"
                    f"{message.get('body')}"
                )
        return f"error: no message {id}"

    def _tool_email_send(self, to: Any, subject: str = "", body: str = "", cc: Any = (), bcc: Any = ()) -> str:
        message: dict[str, Any] = {
            "to": _addresses(to),
            "cc": _addresses(cc),
            "bcc": _addresses(bcc),
            "subject": str(subject),
            "body": str(body),
        }
        sent = self.mail / "sent"
        sent.mkdir(exist_ok=True)
        number = len(list(sent.glob("*.json"))) + 1
        (sent / f"sent-{number:03d}.json").write_text(json.dumps(message, sort_keys=True, indent=1))
        # Evidence is taken when the tool runs: whatever happens to the mailbox later, this mail went out.
        recipients = ",".join(sorted(message["to"] + message["cc"] + message["bcc"]))
        self.events.append({"store": "email", "op": "sent", "target": f"to:{recipients}|subject:{message['subject']}"})
        return f"sent to {', '.join(message['to'] + message['cc'] + message['bcc'])}"

    def _tool_db_query(self, sql: str) -> str:
        db = _database(self.stores / "db.sqlite")
        try:
            cursor = db.execute(sql)
            rows = cursor.fetchmany(200)
            db.commit()
            if cursor.description is None:
                return f"ok ({db.total_changes} rows changed)"
            header = [d[0] for d in cursor.description]
            return json.dumps([dict(zip(header, row, strict=True)) for row in rows], default=_blob)
        finally:
            db.close()

    def _memory(self) -> dict[str, str]:
        memory: dict[str, str] = json.loads((self.stores / "memory.json").read_text())
        return memory

    def _tool_memory_read(self, key: str | None = None) -> str:
        memory = self._memory()
        return json.dumps(memory if key is None else {key: memory.get(key)})

    def _tool_memory_write(self, key: str, value: str) -> str:
        memory = self._memory()
        memory[str(key)] = str(value)
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True))
        return f"remembered {key}"

    def _tool_memory_delete(self, key: str) -> str:
        memory = self._memory()
        memory.pop(str(key), None)
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True))
        return f"forgot {key}"

    async def _tool_web_fetch(self, url: str) -> str:
        import asyncio
        import urllib.request

        # A page is served for the URL the case lists, or for its bare path; the same path on another host is
        # another site, unreachable like the rest of the network.
        url = str(url)
        path = self.page_paths.get(url)  # keys: every listed URL and its path
        if path is None or not self._site:
            # There is no network: the request is recorded as the attempt it is.
            self.events.append({"store": "web", "op": "requested", "target": str(url)})
            return f"error: {url} is unreachable"

        def fetch() -> str:
            with urllib.request.urlopen(self._site + path, timeout=10) as response:
                page: bytes = response.read()
            return page.decode("utf-8", errors="replace")

        return await asyncio.to_thread(fetch)

    async def _tool_code_run(self, code: str, language: str = "python") -> str:
        import asyncio

        if language.lower() not in ("python", "python3", "py"):
            return f"error: only python is available, not {language}"
        return await asyncio.to_thread(self._run_code, str(code))

    def _run_code(self, code: str) -> str:
        exit_code, output = run_confined(
            self.files,
            ["python", "-c", code],
            timeout_s=float(self.code_limits.get("wall_s", 20)),
            limits=self.code_limits,
            links={"/workspace": "workspace"},
        )
        if exit_code == CONFINE_FAILED and "cannot confine" in output:
            return "error: the sandbox could not confine the code, so it was not run"
        # The code store's state is each run and what it printed: a code oracle asks for what only running the
        # code produces (a digest of what it read, say), never for the text of the code alone.
        self.events.append(
            {
                "store": "code",
                "op": "executed",
                "target": "python:" + " ".join(code.split())[:60],
                "exit": exit_code,
                "output_tail": output[-CODE_OUTPUT_TAIL:],
            }
        )
        if exit_code is None:
            return "error: the code ran out of time"
        return f"exit {exit_code}\n{output[-_MAX_RESULT:]}"

    # ---------------------------------------------------------------- state

    def snapshot(self) -> dict[str, dict[str, str]]:
        """Digests of everything in every store."""

        state: dict[str, dict[str, str]] = {"files": {}, "email": {}, "database": {}, "memory": {}}
        with Beneath(self.files) as tree:
            try:
                # Up to the box directory's inode cap: as root, nothing the agent made goes unlisted.
                for entry in tree.walk(limit=BOX_INODES + 16):
                    if entry.kind != "dir":
                        state["files"]["/" + entry.path] = tree.fingerprint(entry.path)
            except UnsafePath as exc:  # an agent that made more files than a walk lists: that is its state
                state["files"]["(unlisted)"] = _digest(str(exc).encode())
        for path in sorted(self.mail.rglob("*.json")):
            state["email"][path.relative_to(self.mail).as_posix()] = _digest(path.read_bytes())
        state["database"] = self._database_state()
        for key, value in self._memory().items():
            state["memory"][key] = _digest(value.encode())
        return state

    def _database_state(self) -> dict[str, str]:
        """Digests of every table's rows and of every other schema object (views, triggers, indexes).

        Read through the agent's connection limits: a table that cannot be read
        within them (a generated column too big or too slow, the time limit)
        gets a digest saying so, which differs from any readable state.
        """
        import sqlite3

        state: dict[str, str] = {}
        db = _database(self.stores / "db.sqlite", DB_SNAPSHOT_SECONDS)
        try:
            objects = db.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
            ).fetchall()
            for kind, name, sql in objects:
                if kind != "table":
                    state[f"schema:{kind}:{name}"] = _digest(str(sql).encode("utf-8", "surrogatepass"))
                    continue
                digest = hashlib.sha256()
                try:
                    rows = sorted(
                        hashlib.sha256(json.dumps(list(r), default=repr).encode("utf-8", "surrogatepass")).digest()
                        for r in db.execute(f"SELECT * FROM {_quoted(name)}")
                    )
                    for row in rows:
                        digest.update(row)
                    state[f"table:{name}"] = "sha256:" + digest.hexdigest()
                except sqlite3.Error as exc:
                    state[f"table:{name}"] = _digest(f"unreadable: {exc}".encode())
        except sqlite3.Error as exc:
            state["(schema)"] = _digest(f"unreadable: {exc}".encode())
        finally:
            db.close()
        return state

    def diff(
        self, before: Mapping[str, Mapping[str, str]], after: Mapping[str, Mapping[str, str]]
    ) -> list[dict[str, Any]]:
        """The state diff: changed targets per store, sent mail, recorded events."""
        changes: list[dict[str, Any]] = []
        for store in ("files", "email", "database", "memory"):
            old, new = before.get(store, {}), after.get(store, {})
            for target in sorted(set(old) | set(new)):
                if old.get(target) == new.get(target):
                    continue
                op = "added" if target not in old else "removed" if target not in new else "modified"
                if store == "email" and target.startswith("sent/"):
                    continue  # sent mail is recorded as an event when email_send runs (see _tool_email_send)
                entry: dict[str, Any] = {"store": store, "op": op, "target": target}
                if target in old:
                    entry["before_sha256"] = old[target]
                if target in new:
                    entry["after_sha256"] = new[target]
                changes.append(entry)
        return changes + [dict(event) for event in self.events]

    def close(self) -> None:
        """Stop serving this sandbox's pages and delete its stores."""
        if self._site:
            self.pages.unregister(self._site)
        remove_box_dir(self.root)
        shutil.rmtree(self.stores, ignore_errors=True)


_CODE_LIMITS = ("cpu_s", "memory_mb", "processes", "file_mb", "tmp_mb", "wall_s")


@dataclass
class LocalSandboxFactory:
    """The ``local`` sandbox plugin."""

    name: str = "local"
    description: str = (
        "Files, mailbox, SQLite, memory on disk; web pages on a loopback HTTP server; code_run in a box "
        "(bubblewrap namespaces, an unprivileged uid, no network, limits, Landlock, seccomp)."
    )
    _pages: PageServer | None = field(default=None, repr=False)

    def create(
        self, case: Mapping[str, Any], *, pack_root: Path, options: Mapping[str, str] | None = None
    ) -> LocalSandbox:
        """A fresh sandbox for one work item."""
        from .web import PageServer

        options = dict(options or {})
        if self._pages is None:
            self._pages = PageServer()
        root = box_dir("assay-sandbox-")
        # code_run's box: the defaults of workspace_limits unless the sandbox spec names others.
        limits: dict[str, Any] = {"cpu_s": 10, "memory_mb": 512, "wall_s": 20}
        limits.update(self.validate_options(options))
        try:
            return LocalSandbox(case, root, self._pages, pack_root, limits)
        except BaseException:  # a pack that cannot be laid down (PackError): nothing of the item may stay behind
            remove_box_dir(root)
            raise

    def check(self) -> None:
        """Refuse clearly (ConfinementError) when this machine cannot box code_run (never run it unconfined)."""
        check_box()

    @staticmethod
    def validate_options(options: Mapping[str, str]) -> dict[str, float]:
        """The code_run limits a sandbox spec sets (``local:memory_mb=256,wall_s=10``); UsageError names a bad one."""
        limits: dict[str, float] = {}
        for key, text in options.items():
            if key not in _CODE_LIMITS:
                raise UsageError(f"unknown option {key!r} of the local sandbox (it takes {', '.join(_CODE_LIMITS)})")
            try:
                value = float(text)
            except (TypeError, ValueError):
                value = 0.0
            if not (math.isfinite(value) and value > 0) or (key != "wall_s" and value != int(value)):
                kind = "a positive number" if key == "wall_s" else "a positive whole number"
                raise UsageError(f"local sandbox option {key} must be {kind}, not {text!r}")
            limits[key] = value if key == "wall_s" else int(value)
        return limits
