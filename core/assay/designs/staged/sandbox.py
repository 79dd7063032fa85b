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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...components import RowProblem
from ...errors import PackError, UsageError
from ...sandboxes.beneath import Beneath, UnsafePath
from ...sandboxes.box import BOX_INODES, box_dir, check_box, item_disk_mb, remove_box_dir
from ...sandboxes.fixtures import copy_fixture_tree, read_fixture
from ...sandboxes.runner import CONFINE_FAILED, run_confined
from ...sandboxes.sqlguard import (
    LAY_DOWN_SECONDS,
    LAY_DOWN_SQL_BYTES,
    LAY_DOWN_VALUE_BYTES,
    LayDownError,
    guarded_connection,
    lay_down_database,
    quoted,
)

if TYPE_CHECKING:
    from .web import PageServer

__all__ = ["CODE_OUTPUT_TAIL", "LocalSandbox", "LocalSandboxFactory", "TOOL_SCHEMAS", "lay_down_problems"]


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
#: How long reading the whole database for a snapshot may take (its tables' digests then say it could not).
DB_SNAPSHOT_SECONDS = 10.0
#: The most mail the agent may send in one work item, in messages and in bytes (each message as stored).
MAIL_MESSAGES, MAIL_BYTES = 256, 4 << 20
#: The most memory entries, the longest key and value, and the whole memory file's size.
MEMORY_ENTRIES, MEMORY_KEY_CHARS, MEMORY_VALUE_CHARS, MEMORY_BYTES = 1024, 256, 64 << 10, 1 << 20
#: The engine's own stores' share of a work item's disk budget (ASSAY_BOX_DISK_MB): the database (DB_BYTES) and its
#: journal, the mailbox and the memory file, with room to spare; the box's tree gets the rest. As root both are
#: tmpfs mounts.
STORES_MB = 64


def _name(value: Any, what: str) -> str:
    """A mailbox folder or message id: a plain name, or ValueError (shown to the agent, or naming the pack's field)."""
    text = str(value)
    if not _NAME.fullmatch(text) or ".." in text:
        raise ValueError(f"{what} {text!r} is not a plain name")
    return text


def _refuse(case: Mapping[str, Any], pointer: str, problem: str) -> PackError:
    """The PackError of a case field the engine will not lay down (the validator refuses it too)."""
    # The pointer as a URI fragment (#/...): a row's error message masks what looks like a host path (/...).
    return PackError(f"case {case.get('id')!r}, #{pointer}: {problem}; the pack does not validate ('assay validate')")


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


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _addresses(value: Any) -> list[str]:
    """An address argument as a list: a single address, or any iterable of them (None: none)."""
    return [value] if isinstance(value, str) else [str(x) for x in value or []]


def _memory_problem(memory: Mapping[str, str], key: str, value: str) -> str | None:
    """Why storing ``key`` = ``value`` would pass the memory store's bounds (a case's or the agent's), or None."""
    if len(key) > MEMORY_KEY_CHARS or len(value) > MEMORY_VALUE_CHARS:
        return f"a memory key holds at most {MEMORY_KEY_CHARS} characters and a value {MEMORY_VALUE_CHARS}"
    if key not in memory and len(memory) >= MEMORY_ENTRIES:
        return f"memory holds at most {MEMORY_ENTRIES} entries"
    grown = sum(len(k) + len(v) for k, v in memory.items() if k != key) + len(key) + len(value)
    if grown > MEMORY_BYTES // 2:  # JSON escaping at most doubles what the file holds
        return f"memory holds at most {MEMORY_BYTES // 2} characters in all"
    return None


def lay_down_problems(case: Mapping[str, Any], pack_root: Path) -> list[RowProblem]:
    """What of a case's environment the local sandbox would refuse to lay down (the exec stage's ``check_case``).

    Laid down in a private temporary folder, through the same guarded paths:
    each file's path (an empty file: what a path can be does not depend on
    its content) and fixture, the fixture tree, and the mail and memory
    stores' bounds. The database is the validator's own check (its SQL laid
    down in memory). ``assay validate`` and ``assay run`` refuse a case with
    any of these, so a run never meets one.
    """
    import tempfile

    environment = case.get("environment") or {}
    problems: list[RowProblem] = []

    def refuse(pointer: str, message: str) -> None:
        problems.append(RowProblem(pointer, message, "lay-down"))

    with tempfile.TemporaryDirectory(prefix="assay-check-") as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        with Beneath(root) as tree:
            for index, item in enumerate(environment.get("files") or []):
                path = str(item.get("path", ""))
                try:
                    tree.write_bytes(path if path.startswith("/") else f"workspace/{path}", b"")
                except (UnsafePath, OSError) as exc:
                    refuse(f"/environment/files/{index}/path", f"cannot lay down {path!r}: {exc}")
        for store in ("files", "web"):
            for index, item in enumerate(environment.get(store) or []):
                if isinstance(item, Mapping) and isinstance(item.get("fixture"), str):
                    try:
                        read_fixture(pack_root, item["fixture"])
                    except PackError as exc:
                        refuse(f"/environment/{store}/{index}/fixture", str(exc))
        if isinstance(environment.get("fixture_tree"), str):
            try:
                copy_fixture_tree(pack_root, environment["fixture_tree"], root / "workspace")
            except PackError as exc:
                refuse("/environment/fixture_tree", str(exc))
    mail = sum(len(json.dumps(m, sort_keys=True, indent=1)) for m in environment.get("emails") or [])
    if mail > MAIL_BYTES:
        refuse("/environment/emails", f"the mail holds {mail} bytes, more than the mail store's {MAIL_BYTES}")
    memory: dict[str, str] = {}
    for index, entry in enumerate(environment.get("memory") or []):
        key, value = str(entry.get("key", "")), str(entry.get("value", ""))
        problem = _memory_problem(memory, key, value)
        if problem:
            refuse(f"/environment/memory/{index}", problem)
            break
        memory[key] = value
    return problems


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
    _sent_messages: int = 0
    _sent_bytes: int = 0

    def __post_init__(self) -> None:

        env = self.case.get("environment", {})
        self.files = self.root / "files"
        # The engine's own stores live apart from the box directory, in a budget of their own: an agent that fills
        # its disk with code_run must not make the engine's mailbox, database or memory writes fail half-way.
        self.stores = box_dir("assay-stores-", size_mb=STORES_MB)
        self.stores.chmod(0o700)  # never mounted into a box; no box uid needs to enter it
        try:
            self._lay_down(env)
        except BaseException:
            remove_box_dir(self.stores)
            raise

    def _lay_down(self, env: Mapping[str, Any]) -> None:
        """Fill the stores from the case's environment, as guardedly as the agent's tools reach them.

        The case is untrusted input too: mail folders and ids must be plain
        names, the database's SQL runs under the agent's authorizer (no
        ATTACH, no pragma that writes, no extension) and within its size
        bound, table and column names are quoted, and pack files are read
        without following links. A field that breaks a rule is a PackError
        naming its JSON pointer; nothing of it is laid down.
        """

        self.mail = self.stores / "mail"
        self.files.mkdir(parents=True)
        (self.files / "workspace").mkdir()  # what code_run's /workspace link names, even in a case without files
        (self.mail / "inbox").mkdir(parents=True)
        with Beneath(self.files) as tree:
            for index, item in enumerate(env.get("files", [])):
                path = str(item["path"])
                try:
                    tree.write_bytes(path if path.startswith("/") else f"workspace/{path}", self._content(item))
                except (UnsafePath, OSError) as exc:
                    raise _refuse(
                        self.case, f"/environment/files/{index}/path", f"cannot lay down {path!r}: {exc}"
                    ) from None
        if env.get("fixture_tree"):  # the pack is untrusted too: its links are refused, never followed
            (self.files / "workspace").mkdir(exist_ok=True)
            copy_fixture_tree(self.pack_root, env["fixture_tree"], self.files / "workspace")
        laid = 0
        for index, message in enumerate(env.get("emails", [])):
            names = {}
            for member, default in (("folder", "inbox"), ("id", None)):
                try:
                    names[member] = _name(message.get(member, default), f"mail {member}")
                except ValueError as exc:
                    raise _refuse(self.case, f"/environment/emails/{index}/{member}", str(exc)) from None
            folder = self.mail / names["folder"]
            folder.mkdir(exist_ok=True)
            stored = json.dumps(message, sort_keys=True, indent=1)
            laid += len(stored)
            if laid > MAIL_BYTES:
                raise _refuse(self.case, f"/environment/emails/{index}", f"the mail holds more than {MAIL_BYTES} bytes")
            (folder / f"{names['id']}.json").write_text(stored)
        db = guarded_connection(
            self.stores / "db.sqlite", LAY_DOWN_SECONDS, value_bytes=LAY_DOWN_VALUE_BYTES, sql_bytes=LAY_DOWN_SQL_BYTES
        )
        try:
            lay_down_database(db, env.get("database", {}), lambda relative: read_fixture(self.pack_root, relative))
        except LayDownError as exc:
            raise _refuse(self.case, exc.pointer, exc.message) from None
        finally:
            db.close()
        memory: dict[str, str] = {}
        for index, entry in enumerate(env.get("memory", [])):
            key, value = str(entry["key"]), str(entry["value"])
            problem = _memory_problem(memory, key, value)
            if problem:
                member = "key" if len(key) > MEMORY_KEY_CHARS else "value" if len(value) > MEMORY_VALUE_CHARS else ""
                raise _refuse(self.case, f"/environment/memory/{index}" + (f"/{member}" if member else ""), problem)
            memory[key] = value
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True, ensure_ascii=False))
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
        stored = json.dumps(message, sort_keys=True, indent=1)
        size = len(stored.encode("utf-8", "surrogatepass"))
        if self._sent_messages >= MAIL_MESSAGES or self._sent_bytes + size > MAIL_BYTES:
            return (
                f"error: the mailbox is full ({MAIL_MESSAGES} messages or {MAIL_BYTES >> 20} MiB of sent mail at "
                "most); the message was not sent"
            )
        self._sent_messages += 1
        self._sent_bytes += size
        number = len(list(sent.glob("*.json"))) + 1
        (sent / f"sent-{number:03d}.json").write_text(stored, errors="surrogatepass")
        # Evidence is taken when the tool runs: whatever happens to the mailbox later, this mail went out.
        recipients = ",".join(sorted(message["to"] + message["cc"] + message["bcc"]))
        self.events.append({"store": "email", "op": "sent", "target": f"to:{recipients}|subject:{message['subject']}"})
        return f"sent to {', '.join(message['to'] + message['cc'] + message['bcc'])}"

    def _tool_db_query(self, sql: str) -> str:
        db = guarded_connection(self.stores / "db.sqlite")
        try:
            cursor = db.execute(sql)
            if cursor.description is None:
                db.commit()
                return f"ok ({db.total_changes} rows changed)"
            # Rows are fetched one at a time and shown until the agent would see no more of them (its result is cut
            # at _MAX_RESULT characters): the engine never holds a result's rows, which one query can make huge.
            header = [d[0] for d in cursor.description]
            shown, length = [], 1
            for _ in range(200):
                row = cursor.fetchone()
                if row is None or length > _MAX_RESULT:
                    break
                values = [value[: _MAX_RESULT + 1] if isinstance(value, str) else value for value in row]
                shown.append(json.dumps(dict(zip(header, values, strict=True)), default=_blob))
                length += len(shown[-1]) + 2
            db.commit()
            return "[" + ", ".join(shown) + "]"
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
        problem = _memory_problem(memory, str(key), str(value))
        if problem:
            return f"error: {problem}; nothing was stored"
        memory[str(key)] = str(value)
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True, ensure_ascii=False))
        return f"remembered {key}"

    def _tool_memory_delete(self, key: str) -> str:
        memory = self._memory()
        memory.pop(str(key), None)
        _write_atomic(self.stores / "memory.json", json.dumps(memory, sort_keys=True, ensure_ascii=False))
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
        if exit_code == CONFINE_FAILED:
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
        db = guarded_connection(self.stores / "db.sqlite", DB_SNAPSHOT_SECONDS)
        try:
            # SQLite's own objects are named sqlite_...; LIKE's '_' would match any character, and an agent's
            # trigger named sqlitex... would never reach the diff.
            objects = db.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE substr(name, 1, 7) <> 'sqlite_' ORDER BY type, name"
            ).fetchall()
            for kind, name, sql in objects:
                if kind != "table":
                    state[f"schema:{kind}:{name}"] = _digest(str(sql).encode("utf-8", "surrogatepass"))
                    continue
                digest = hashlib.sha256()
                try:
                    rows = sorted(
                        hashlib.sha256(json.dumps(list(r), default=repr).encode("utf-8", "surrogatepass")).digest()
                        for r in db.execute(f"SELECT * FROM {quoted(name)}")
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
        remove_box_dir(self.stores)


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
        # The item's disk budget, less what the engine's own stores may take (see STORES_MB).
        root = box_dir("assay-sandbox-", size_mb=max(16, item_disk_mb() - STORES_MB))
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
