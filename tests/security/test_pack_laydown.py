"""Attacks by a hostile case pack on how the engine lays a case's environment down.

A case pack is untrusted input (docs/threat-model.md), and the exec stage's local sandbox builds its stores from a
case's ``environment`` as the engine's own user: mail messages become files named by their ``folder`` and ``id``,
``database.schema_sql`` and the ``database.fixture`` file run as SQL, ``database.tables`` names tables and columns,
fixtures are read from the pack. Every such field is tried here with what a pack's author could put in it: ``..``
climbs and absolute host paths, SQL that reaches files or the engine (``ATTACH``, ``VACUUM INTO``, ``load_extension``,
``readfile``, ``writefile``, write pragmas, a trigger that calls a refused function while the rows go in), names
that inject SQL through an embedded ``"``, and a copy of a 0600 host database into the task's tables, where the agent
would read it. Each attack is refused three times over:

- ``assay validate PACKDIR`` exits 1 with a line ``<case file>:<line>: <JSON pointer>: <message>`` for the field;
- ``assay run --pack PACKDIR`` exits 1 before any work item starts, naming the problem;
- the stage itself (``LocalSandboxFactory().create``), for a case that reached it unvalidated, raises ``PackError``
  naming the field's pointer and leaves no stores behind;

and each time nothing was made or changed outside the pack (no file at a climb's target, no attached database, no
vacuumed copy) and no host secret reached the stores or the bundle. The controls show that the defences refuse the
attacks only: the example pack, and a legitimate case using every field, validate, lay down and run.

Every attack aims at ``tmp_path/host``; SQL paths climb from the working directory the tests run in
(``tmp_path/host/cwd``), mail names climb from wherever the stores are to ``/`` and down again.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from conftest import EXAMPLE_PACK

from assay.designs.permission.environment import EnvironmentSpecError, materialize
from assay.designs.staged.sandbox import LocalSandbox, LocalSandboxFactory
from assay.errors import ConfinementError, PackError
from assay.packs import lock_manifest

FILE_SECRET = "HOST-FILE-SECRET-b71e04"
DB_SECRET = "HOST-DB-SECRET-9c2d5a"


# -- the scene: a host to aim at and a pack to make hostile ---------------------------------------------------------


@dataclass
class Scene:
    """A pack copy to edit and the host folder every attack aims at."""

    pack: Path
    host: Path
    cwd: Path
    before: dict[str, tuple[int, int, bytes]]  # the host folder as it was before the attack

    def at(self, name: str) -> Path:
        """A host path an attack would create."""
        return self.host / name

    def climb(self, name: str) -> str:
        """A name or path that climbs from any folder up to ``/`` and down to the host path ``name``."""
        return "../" * 40 + str(self.at(name)).lstrip("/")

    def sql_climb(self, name: str) -> str:
        """A relative SQL file name that climbs from the working directory to the host path ``name``."""
        return os.path.relpath(self.at(name), self.cwd)

    def pack_climb(self, name: str) -> str:
        """A pack-relative path that climbs out of the pack to the host path ``name``."""
        return os.path.relpath(self.at(name), self.pack)

    def case_path(self, stem: str) -> Path:
        return self.pack / "cases" / f"{stem}.yaml"

    def case(self, stem: str) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(self.case_path(stem).read_text(encoding="utf-8"))
        return data

    def save(self, stem: str, case: dict[str, Any]) -> None:
        text = yaml.safe_dump(case, sort_keys=False, allow_unicode=True, width=4096)
        self.case_path(stem).write_text(text, encoding="utf-8")

    def fixture(self, relative: str, text: str) -> str:
        """Add a file to the pack's fixtures; returns its pack-relative path."""
        path = self.pack / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return relative

    def build(self, attack: Attack) -> dict[str, Any]:
        """Make the pack hostile with ``attack`` and re-lock it (only the field checks can refuse it)."""
        case = self.case(attack.case)
        attack.edit(case, self)
        self.save(attack.case, case)
        lock_manifest(self.pack)
        return self.case(attack.case)


def _inventory(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``root``: mode, size and (for a file) its bytes."""
    entries: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        entries[path.relative_to(root).as_posix()] = (info.st_mode, info.st_size, data)
    return entries


@pytest.fixture
def scene(tmp_path: Path, pack_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Scene:
    """The host folder with its secrets (a 0600 file, a 0600 SQLite database, SQL, a directory), and the pack copy."""
    host = tmp_path / "host"
    cwd = host / "cwd"
    cwd.mkdir(parents=True)
    secret = host / "secret.txt"
    secret.write_text(FILE_SECRET)
    secret.chmod(0o600)
    database = sqlite3.connect(host / "secret.db")
    database.execute("CREATE TABLE secrets (v TEXT)")
    database.execute("INSERT INTO secrets VALUES (?)", (DB_SECRET,))
    database.commit()
    database.close()
    (host / "secret.db").chmod(0o600)
    (host / "secret.sql").write_text(f"INSERT INTO customers (id, name, email) VALUES (5, '{FILE_SECRET}', 'x');\n")
    (host / "tree").mkdir()
    (host / "tree" / "leak.txt").write_text(FILE_SECRET)
    monkeypatch.chdir(cwd)  # relative SQL file names resolve here, inside the host folder, never in the repository
    return Scene(pack_copy, host, cwd, _inventory(host))


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the sandbox makes its box directory and stores in, so leftovers can be counted."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


@pytest.fixture
def exec_host() -> None:
    """The exec stage runs on this machine (the local sandbox's own check, which starts nothing); else skip."""
    try:
        LocalSandboxFactory().check()
    except ConfinementError as exc:
        pytest.skip(f"the exec stage cannot run here: {exc}")


# -- the attacks ----------------------------------------------------------------------------------------------------

Edit = Callable[[dict[str, Any], Scene], None]
Text = Callable[[Scene], str]


@dataclass(frozen=True)
class Attack:
    """One hostile value in one field of one case of the example pack."""

    case: str  # the case file's stem
    pointer: str  # the JSON pointer (or its prefix) a refusal names
    edit: Edit
    made: Callable[[Scene], list[Path]] = field(default=lambda scene: [])  # host paths the attack would create
    # What `assay validate` must do: "refuse" (exit 1, a line naming the pointer) or "harmless" (the value is
    # allowed, as long as nothing is made outside the pack).
    validate: str = "refuse"
    # What the exec stage must do with the case: "refuse" it (PackError naming stage_pointer, else pointer); refuse
    # it "guarded" (a PackError from the fixture reader, which names the fixture); or lay it down "harmless" (the
    # field never becomes a path); "permission": the field is the permission stage's, whose materialize refuses it.
    stage: str = "refuse"
    stage_pointer: str | None = None
    run: bool = False  # also tried through `assay run` (a representative few: each run costs a second)


def _email(key: str, value: Text) -> Edit:
    def edit(case: dict[str, Any], scene: Scene) -> None:
        case["environment"]["emails"][0][key] = value(scene)

    return edit


def _memory_key(value: Text) -> Edit:
    def edit(case: dict[str, Any], scene: Scene) -> None:
        case["environment"]["memory"][0]["key"] = value(scene)

    return edit


def _schema_sql(sql: Text) -> Edit:
    """Append ``sql`` to the case's own schema (which makes the customers table)."""

    def edit(case: dict[str, Any], scene: Scene) -> None:
        database = case["environment"]["database"]
        database["schema_sql"] = database["schema_sql"] + "\n" + sql(scene)

    return edit


def _sql_fixture(sql: Text) -> Edit:
    """Put ``sql`` in a database fixture file of the pack, after a legitimate first statement."""

    def edit(case: dict[str, Any], scene: Scene) -> None:
        text = "INSERT INTO customers (id, name, email) VALUES (3, 'Lee Park', 'lee@example.org');\n" + sql(scene)
        case["environment"]["database"]["fixture"] = scene.fixture("fixtures/db/seed.sql", text)

    return edit


def _table_name(name: Text) -> Edit:
    def edit(case: dict[str, Any], scene: Scene) -> None:
        tables = case["environment"]["database"]["tables"]
        tables[name(scene)] = tables.pop("customers")

    return edit


def _column_name(name: Text) -> Edit:
    """Rename the last column (email) of the first customers row, keeping the order of the others."""

    def edit(case: dict[str, Any], scene: Scene) -> None:
        rows = case["environment"]["database"]["tables"]["customers"]
        rows[0] = {(name(scene) if key == "email" else key): value for key, value in rows[0].items()}

    return edit


def _set(*keys: str | int, value: Text) -> Edit:
    """Set ``case['environment'][keys...]`` (making mappings on the way)."""

    def edit(case: dict[str, Any], scene: Scene) -> None:
        node: Any = case["environment"]
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[keys[-1]] = value(scene)

    return edit


def _append(*keys: str, item: Callable[[Scene], Any]) -> Edit:
    def edit(case: dict[str, Any], scene: Scene) -> None:
        node: Any = case["environment"]
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node.setdefault(keys[-1], []).append(item(scene))

    return edit


def _made(*names: str) -> Callable[[Scene], list[Path]]:
    return lambda scene: [scene.at(name) for name in names]


DPI, IPI, MPI, TRI, SEC, PERM = (
    "dpi-payroll-export",
    "ipi-ticket-attachment",
    "mpi-invoice-bcc",
    "tri-calendar-note",
    "sec-fileshare-traversal",
    "perm-log-rotate",
)
SCHEMA = "/environment/database/schema_sql"
FIXTURE_SQL = "/environment/database/fixture"
# A table name and a column name that close the quotes the engine puts them in, then add a row of their own.
TABLE_INJECTION = "customers\" (id, name, email) VALUES (?, ?, ?), (random(), 'INJECTED', 'x') --"
COLUMN_INJECTION = "email\") VALUES (?, ?, ?), (random(), 'INJECTED', 'x') --"
COPY_SECRET = (
    "ATTACH DATABASE '{db}' AS s; INSERT INTO customers (id, name, email) SELECT 1000, v, 'x' FROM s.secrets; "
    "DETACH DATABASE s;"
)

ATTACKS = [
    # Mail folders and message ids are names: a climb or an absolute path would put a .json file anywhere.
    pytest.param(
        Attack(
            DPI,
            "/environment/emails/0/folder",
            _email("folder", lambda s: s.climb("evil-folder")),
            _made("evil-folder"),
            run=True,
        ),
        id="emails.folder-climb",
    ),
    pytest.param(
        Attack(
            DPI,
            "/environment/emails/0/folder",
            _email("folder", lambda s: str(s.at("abs-folder"))),
            _made("abs-folder"),
        ),
        id="emails.folder-absolute",
    ),
    pytest.param(
        Attack(DPI, "/environment/emails/0/folder", _email("folder", lambda s: "inbox/../..")),
        id="emails.folder-dotdot-out-of-the-mailbox",
    ),
    pytest.param(
        Attack(DPI, "/environment/emails/0/id", _email("id", lambda s: s.climb("evil-id")), _made("evil-id.json")),
        id="emails.id-climb",
    ),
    pytest.param(
        Attack(
            DPI,
            "/environment/emails/0/id",
            _email("id", lambda s: str(s.at("abs-id"))),
            _made("abs-id.json"),
            run=True,
        ),
        id="emails.id-absolute",
    ),
    pytest.param(
        # Not out of the stores, but a forged piece of evidence: a "sent" mail that no agent sent.
        Attack(DPI, "/environment/emails/0/id", _email("id", lambda s: "../sent/sent-001")),
        id="emails.id-forges-a-sent-mail",
    ),
    # Memory keys: the memory is one JSON file, so a key that looks like a path never becomes one (allowed, and
    # nothing may appear at it); a key past the store's bound is refused, at the key.
    pytest.param(
        Attack(
            MPI,
            "/environment/memory/0/key",
            _memory_key(lambda s: s.climb("memory-key")),
            _made("memory-key"),
            validate="harmless",
            stage="harmless",
        ),
        id="memory.key-climb",
    ),
    pytest.param(
        Attack(
            MPI,
            "/environment/memory/0/key",
            _memory_key(lambda s: str(s.at("memory-key"))),
            _made("memory-key"),
            validate="harmless",
            stage="harmless",
        ),
        id="memory.key-absolute",
    ),
    pytest.param(
        Attack(
            MPI,
            "/environment/memory/0/key",
            _memory_key(lambda s: (s.climb("memory-key") + "/") * 4),
            _made("memory-key"),
            stage_pointer="/environment/memory/0",
        ),
        id="memory.key-oversized-climb",
    ),
    # Table and column names are SQL identifiers, pasted into the INSERT that fills the tables.
    pytest.param(
        Attack(IPI, "/environment/database/tables", _table_name(lambda s: TABLE_INJECTION), run=True),
        id="tables.name-injects-sql",
    ),
    pytest.param(
        Attack(IPI, "/environment/database/tables", _table_name(lambda s: s.sql_climb("table.db"))),
        id="tables.name-climb",
    ),
    pytest.param(
        Attack(IPI, "/environment/database/tables", _table_name(lambda s: str(s.at("table.db")))),
        id="tables.name-absolute",
    ),
    pytest.param(
        Attack(IPI, "/environment/database/tables/customers/0", _column_name(lambda s: COLUMN_INJECTION), run=True),
        id="tables.column-injects-sql",
    ),
    pytest.param(
        Attack(IPI, "/environment/database/tables/customers/0", _column_name(lambda s: s.sql_climb("column.db"))),
        id="tables.column-climb",
    ),
    pytest.param(
        Attack(IPI, "/environment/database/tables/customers/0", _column_name(lambda s: str(s.at("column.db")))),
        id="tables.column-absolute",
    ),
    # schema_sql may only create and fill the task's own tables.
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(lambda s: f"ATTACH DATABASE '{s.at('attached.db')}' AS x; CREATE TABLE x.t (a);"),
            _made("attached.db"),
            run=True,
        ),
        id="schema_sql.attach-absolute",
    ),
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(lambda s: f"ATTACH '{s.sql_climb('attached.db')}' AS x; CREATE TABLE x.t (a);"),
            _made("attached.db"),
        ),
        id="schema_sql.attach-climb",
    ),
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(
                lambda s: f"/* setup */ attach/**/database '{s.at('attached.db')}'/**/as \"x\"; create table x.t (a);"
            ),
            _made("attached.db"),
        ),
        id="schema_sql.attach-lower-case-in-comments",
    ),
    pytest.param(
        Attack(
            IPI, SCHEMA, _schema_sql(lambda s: f"VACUUM INTO '{s.at('vacuumed.db')}';"), _made("vacuumed.db"), run=True
        ),
        id="schema_sql.vacuum-into-absolute",
    ),
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(lambda s: f"VACUUM main INTO '{s.sql_climb('vacuumed.db')}';"),
            _made("vacuumed.db"),
        ),
        id="schema_sql.vacuum-main-into-climb",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: f"SELECT load_extension('{s.at('evil.so')}');"), run=True),
        id="schema_sql.load_extension-absolute",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: f"SeLeCt LoAd_ExTeNsIoN('{s.sql_climb('evil.so')}');")),
        id="schema_sql.load_extension-climb-mixed-case",
    ),
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(lambda s: f"SELECT writefile('{s.at('written.txt')}', 'pwned');"),
            _made("written.txt"),
        ),
        id="schema_sql.writefile",
    ),
    pytest.param(
        Attack(
            IPI,
            SCHEMA,
            _schema_sql(lambda s: f"INSERT INTO customers (id, name) VALUES (7, readfile('{s.at('secret.txt')}'));"),
        ),
        id="schema_sql.readfile",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: "PRAGMA writable_schema = ON;"), run=True),
        id="schema_sql.pragma-writable_schema",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: "PRAGMA journal_mode = WAL;")),
        id="schema_sql.pragma-journal_mode",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: "pragma MAIN.user_version=7;")),
        id="schema_sql.pragma-schema-qualified-write",
    ),
    pytest.param(
        # The function is in a trigger body, which SQLite authorizes only when a row goes in: while the tables fill.
        Attack(
            IPI,
            "/environment/database",
            _schema_sql(
                lambda s: (
                    "CREATE TRIGGER t_load AFTER INSERT ON customers "
                    f"BEGIN SELECT load_extension('{s.at('evil.so')}'); END;"
                )
            ),
        ),
        id="schema_sql.trigger-calls-load_extension",
    ),
    pytest.param(
        Attack(IPI, SCHEMA, _schema_sql(lambda s: COPY_SECRET.format(db=s.at("secret.db"))), run=True),
        id="schema_sql.copies-a-host-database",
    ),
    # The database fixture file is SQL too, held to the same rules.
    pytest.param(
        Attack(
            IPI,
            FIXTURE_SQL,
            _sql_fixture(lambda s: f"ATTACH DATABASE '{s.at('attached.db')}' AS x; CREATE TABLE x.t (a);\n"),
            _made("attached.db"),
            run=True,
        ),
        id="database.fixture-sql-attach",
    ),
    pytest.param(
        Attack(
            IPI,
            FIXTURE_SQL,
            _sql_fixture(lambda s: f"VACUUM INTO '{s.sql_climb('vacuumed.db')}';\n"),
            _made("vacuumed.db"),
        ),
        id="database.fixture-sql-vacuum-into",
    ),
    pytest.param(
        Attack(IPI, FIXTURE_SQL, _sql_fixture(lambda s: f"SELECT load_extension('{s.at('evil.so')}');\n")),
        id="database.fixture-sql-load_extension",
    ),
    pytest.param(
        Attack(IPI, FIXTURE_SQL, _sql_fixture(lambda s: "PRAGMA writable_schema = 1;\n")),
        id="database.fixture-sql-pragma",
    ),
    pytest.param(
        Attack(IPI, FIXTURE_SQL, _sql_fixture(lambda s: COPY_SECRET.format(db=s.at("secret.db")) + "\n")),
        id="database.fixture-sql-copies-a-host-database",
    ),
    # File-system fields (the schema's relative_path and absolute_pattern refuse these today: regressions).
    pytest.param(
        Attack(
            IPI,
            "/environment/files/0/fixture",
            _set("files", 0, "fixture", value=lambda s: s.pack_climb("secret.txt")),
            run=True,
            stage="guarded",
        ),
        id="files.fixture-climb",
    ),
    pytest.param(
        Attack(
            IPI,
            "/environment/files/0/fixture",
            _set("files", 0, "fixture", value=lambda s: str(s.at("secret.txt"))),
            stage="guarded",
        ),
        id="files.fixture-absolute",
    ),
    pytest.param(
        Attack(
            TRI,
            "/environment/web/0/fixture",
            _set("web", 0, "fixture", value=lambda s: s.pack_climb("secret.txt")),
            stage="guarded",
        ),
        id="web.fixture-climb",
    ),
    pytest.param(
        Attack(
            TRI,
            "/environment/web/0/fixture",
            _set("web", 0, "fixture", value=lambda s: str(s.at("secret.txt"))),
            stage="guarded",
        ),
        id="web.fixture-absolute",
    ),
    pytest.param(
        Attack(
            IPI, FIXTURE_SQL, _set("database", "fixture", value=lambda s: s.pack_climb("secret.sql")), stage="guarded"
        ),
        id="database.fixture-climb",
    ),
    pytest.param(
        Attack(IPI, FIXTURE_SQL, _set("database", "fixture", value=lambda s: str(s.at("secret.sql"))), stage="guarded"),
        id="database.fixture-absolute",
    ),
    pytest.param(
        Attack(
            SEC,
            "/environment/fixture_tree",
            _set("fixture_tree", value=lambda s: s.pack_climb("tree")),
            run=True,
            stage="guarded",
        ),
        id="fixture_tree-climb",
    ),
    pytest.param(
        Attack(
            SEC, "/environment/fixture_tree", _set("fixture_tree", value=lambda s: str(s.at("tree"))), stage="guarded"
        ),
        id="fixture_tree-absolute",
    ),
    pytest.param(
        Attack(
            SEC,
            "/environment/code/files/0",
            _append("code", "files", item=lambda s: s.pack_climb("secret.txt")),
            stage="harmless",
        ),
        id="code.files-climb",
    ),
    pytest.param(
        Attack(
            SEC,
            "/environment/code/files/0",
            _append("code", "files", item=lambda s: str(s.at("secret.txt"))),
            stage="harmless",
        ),
        id="code.files-absolute",
    ),
    pytest.param(
        Attack(
            DPI,
            "/environment/files/0/path",
            _set("files", 0, "path", value=lambda s: "/workspace/" + s.climb("planted.csv")),
            _made("planted.csv"),
        ),
        id="files.path-climb-from-the-workspace",
    ),
    pytest.param(
        Attack(
            DPI,
            "/environment/files/0/path",
            _set("files", 0, "path", value=lambda s: s.climb("planted.csv")),
            _made("planted.csv"),
        ),
        id="files.path-relative-climb",
    ),
    pytest.param(
        Attack(
            PERM,
            "/environment/directories/1",
            _append("directories", item=lambda s: "/srv/app/" + s.climb("made-dir")),
            _made("made-dir"),
            stage="permission",
        ),
        id="directories-climb",
    ),
    pytest.param(
        Attack(
            PERM,
            "/environment/symlinks/0/path",
            _append("symlinks", item=lambda s: {"path": "/srv/app/" + s.climb("made-link"), "target": "/etc/passwd"}),
            _made("made-link"),
            stage="permission",
        ),
        id="symlinks.path-climb",
    ),
]


def _attack(param: Any) -> Attack:
    value = param.values[0]
    assert isinstance(value, Attack)
    return value


#: Every attack by its test id.
BY_ID = {str(param.id): _attack(param) for param in ATTACKS}
EXEC_ATTACKS = [param for param in ATTACKS if _attack(param).stage != "permission"]
PERMISSION_ATTACKS = [param for param in ATTACKS if _attack(param).stage == "permission"]
RUN_ATTACKS = [param for param in ATTACKS if _attack(param).run]


def _named(output: str, case_file: str, pointer: str) -> list[str]:
    """The lines of ``output`` of the form ``<...>/<case_file>:<line>: <pointer>[/...]: <message>``."""
    line = re.compile(rf"^.*{re.escape(case_file)}:\d+: {re.escape(pointer)}(?=[:/]).*$", re.MULTILINE)
    return line.findall(output)


def _nothing_made(scene: Scene, attack: Attack) -> None:
    """Nothing the attack aimed at exists, and nothing else under the host folder was added, removed or changed."""
    for path in attack.made(scene):
        assert not os.path.lexists(path), f"the attack made {path}"
    assert _inventory(scene.host) == scene.before, "an attack made or changed something outside the pack"


def _no_secret_under(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert FILE_SECRET.encode() not in data and DB_SECRET.encode() not in data, f"a host secret is in {path}"


# -- A. assay validate ------------------------------------------------------------------------------------------------


@pytest.mark.slow  # every field times every attack: about 15 s, kept out of the fast tier (the
# multi-field tests below keep each class there)
@pytest.mark.parametrize("attack", ATTACKS)
def test_validate_refuses_the_field_and_runs_none_of_it(attack: Attack, scene: Scene, cli: Any) -> None:
    scene.build(attack)
    result = cli("validate", str(scene.pack), cwd=scene.cwd)
    output = result.stdout + result.stderr
    if attack.validate == "harmless":
        _nothing_made(scene, attack)
        return
    assert result.returncode == 1, output
    assert _named(result.stdout, f"cases/{attack.case}.yaml", attack.pointer), (
        f"no line names {attack.pointer}:\n{output}"
    )
    assert FILE_SECRET not in output and DB_SECRET not in output
    _nothing_made(scene, attack)


def test_validate_names_every_bad_field_on_its_own_line(scene: Scene, cli: Any) -> None:
    bad = [
        BY_ID[name]
        for name in (
            "emails.folder-climb",
            "emails.id-absolute",
            "memory.key-oversized-climb",
            "tables.column-injects-sql",
            "schema_sql.attach-absolute",
            "database.fixture-sql-attach",
        )
    ]
    for attack in bad:
        scene.build(attack)
    result = cli("validate", str(scene.pack), cwd=scene.cwd)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = {attack.pointer: _named(result.stdout, f"cases/{attack.case}.yaml", attack.pointer) for attack in bad}
    assert all(lines.values()), f"not named: {[p for p, found in lines.items() if not found]}\n{result.stdout}"
    # The folder and the id of one message are two problems, each on its own line.
    assert not set(lines["/environment/emails/0/folder"]) & set(lines["/environment/emails/0/id"])
    for attack in bad:
        _nothing_made(scene, attack)


# -- B. assay run ---------------------------------------------------------------------------------------------------


@pytest.fixture
def laid_down(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The case ids the exec stage made a sandbox for (the sandbox is still made: only recorded)."""
    made: list[str] = []
    create = LocalSandboxFactory.create

    def spy(self: LocalSandboxFactory, case: Any, **options: Any) -> LocalSandbox:
        made.append(str(case.get("id")))
        return create(self, case, **options)

    monkeypatch.setattr(LocalSandboxFactory, "create", spy)
    return made


def _run(cli: Any, scene: Scene, out: Path, endpoint: str = "scripted:mixed") -> Any:
    return cli(
        "run", "--pack", str(scene.pack), "--endpoint", endpoint, "--stages", "exec", "--out", str(out), "--quiet",
        cwd=scene.cwd,
    )  # fmt: skip


@pytest.mark.slow  # every field times every attack: about 15 s, kept out of the fast tier (the
# multi-field tests below keep each class there)
@pytest.mark.parametrize("attack", RUN_ATTACKS)
def test_run_refuses_the_pack_before_any_item_starts(
    attack: Attack, scene: Scene, cli: Any, exec_host: None, laid_down: list[str], tmp_path: Path
) -> None:
    scene.build(attack)
    # A complying agent replays the case's attack, which reads the customers table: a copied secret would be in its row.
    result = _run(cli, scene, tmp_path / "out", endpoint="scripted:comply")
    output = result.stdout + result.stderr
    if (tmp_path / "out").exists():
        _no_secret_under(tmp_path / "out")
    _nothing_made(scene, attack)
    assert result.returncode == 1, output
    assert attack.pointer in output, output
    assert laid_down == [], f"items started before the pack was refused: {laid_down}"
    assert not (tmp_path / "out" / "bundle").exists()


def test_run_refuses_a_pack_with_many_bad_fields_and_makes_nothing(
    scene: Scene, cli: Any, exec_host: None, laid_down: list[str], tmp_path: Path
) -> None:
    attacks = [_attack(param) for param in RUN_ATTACKS]
    for attack in attacks:
        if attack.pointer != "/environment/database/tables":  # it renames the table the column injection needs
            scene.build(attack)
    result = _run(cli, scene, tmp_path / "out", endpoint="scripted:comply")
    if (tmp_path / "out").exists():
        _no_secret_under(tmp_path / "out")
    for attack in attacks:
        _nothing_made(scene, attack)
    assert result.returncode == 1, result.stdout + result.stderr
    assert laid_down == [] and not (tmp_path / "out" / "bundle").exists()


# -- C. the stage itself ----------------------------------------------------------------------------------------------


def _create(case: dict[str, Any], pack: Path) -> LocalSandbox:
    return LocalSandboxFactory().create(case, pack_root=pack)


def _stores_text(box: LocalSandbox) -> str:
    """Everything the laid-down stores hold, as text (files, mail, memory, every database row)."""
    parts = [
        p.read_bytes().decode("utf-8", "replace")
        for p in box.stores.rglob("*")
        if p.is_file() and p.suffix != ".sqlite"
    ]
    parts += [
        p.read_bytes().decode("utf-8", "replace") for p in box.files.rglob("*") if p.is_file() and not p.is_symlink()
    ]
    database = sqlite3.connect(box.stores / "db.sqlite")
    try:
        for (table,) in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            parts += [repr(row) for row in database.execute(f'SELECT * FROM "{table}"')]
    finally:
        database.close()
    return "\n".join(parts)


@pytest.mark.slow  # every field times every attack: about 15 s, kept out of the fast tier (the
# multi-field tests below keep each class there)
@pytest.mark.parametrize("attack", EXEC_ATTACKS)
def test_the_exec_stage_refuses_the_field_and_leaves_nothing(attack: Attack, scene: Scene, private_tmp: Path) -> None:
    case = scene.build(attack)
    try:
        box = _create(case, scene.pack)
    except PackError as refused:
        pointer = attack.stage_pointer or attack.pointer
        if attack.stage != "guarded":
            assert pointer in str(refused), f"the refusal does not name {pointer}: {refused}"
        assert FILE_SECRET not in str(refused) and DB_SECRET not in str(refused)
    except Exception as exc:  # noqa: BLE001 - any other failure is a stage failure row, not a refused pack
        pytest.fail(f"the stage failed with {type(exc).__name__} instead of refusing the pack: {exc}")
    else:
        try:
            held = _stores_text(box)
        finally:
            box.close()
        assert FILE_SECRET not in held and DB_SECRET not in held, f"a host secret reached the stores:\n{held[:2000]}"
        _nothing_made(scene, attack)
        assert attack.stage == "harmless", f"the stage laid the hostile case down; its stores hold:\n{held[:2000]}"
    assert list(private_tmp.iterdir()) == [], "the refused item left its stores or box directory behind"
    _nothing_made(scene, attack)


@pytest.mark.parametrize("attack", PERMISSION_ATTACKS)
def test_the_permission_environment_refuses_the_field(attack: Attack, scene: Scene, tmp_path: Path) -> None:
    case = scene.build(attack)
    with pytest.raises(EnvironmentSpecError):
        materialize(case["environment"], scene.pack, tmp_path / "env" / "root")
    _nothing_made(scene, attack)


def test_a_copied_host_database_never_reaches_the_agent(scene: Scene, private_tmp: Path) -> None:
    case = scene.case(IPI)
    _schema_sql(lambda s: COPY_SECRET.format(db=s.at("secret.db")))(case, scene)
    assert (scene.at("secret.db").stat().st_mode & 0o777) == 0o600
    try:
        box = _create(case, scene.pack)
    except PackError as refused:
        assert SCHEMA in str(refused) and DB_SECRET not in str(refused)
        return
    try:
        seen = asyncio.run(box.call("db_query", {"sql": "SELECT * FROM customers"}))
    finally:
        box.close()
    pytest.fail(f"the stage copied the host database into the task's table; the agent reads: {seen}")


class _Recorded(sqlite3.Connection):
    """A connection that remembers its authorizer and its limits."""

    opened: ClassVar[list[_Recorded]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.authorizer: Any = None
        self.limits: dict[int, int] = {}
        _Recorded.opened.append(self)

    def set_authorizer(self, authorizer: Any) -> None:
        self.authorizer = authorizer
        super().set_authorizer(authorizer)

    def setlimit(self, category: int, limit: int, /) -> int:
        self.limits[category] = limit
        return super().setlimit(category, limit)


def test_the_lay_down_connection_has_the_agents_authorizer(
    scene: Scene, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect = sqlite3.connect
    monkeypatch.setattr(_Recorded, "opened", [])
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": _Recorded}))
    box = _create(scene.case(IPI), scene.pack)
    box.close()
    laying = list(_Recorded.opened)
    assert laying, "no database connection was seen while the case was laid down"
    for connection in laying:
        authorize = connection.authorizer
        assert authorize is not None, "a connection laid the database down without an authorizer"
        assert connection.limits.get(sqlite3.SQLITE_LIMIT_ATTACHED) == 0
        deny = sqlite3.SQLITE_DENY
        assert authorize(sqlite3.SQLITE_ATTACH, "/x.db", None, None, None) == deny
        assert authorize(sqlite3.SQLITE_DETACH, "x", None, None, None) == deny
        for pragma in ("writable_schema", "journal_mode", "user_version", "schema_version"):
            assert authorize(sqlite3.SQLITE_PRAGMA, pragma, "1", None, None) == deny, pragma
        for function in ("load_extension", "readfile", "writefile"):
            assert authorize(sqlite3.SQLITE_FUNCTION, None, function, None, None) == deny, function
        assert authorize(sqlite3.SQLITE_INSERT, "customers", None, "main", None) == sqlite3.SQLITE_OK


# -- controls: what the attacks changed is all the defences refuse ----------------------------------------------------


def _rich(case: dict[str, Any], scene: Scene) -> None:
    """A legitimate case using every laid-down field: plain names, identifiers, a view, an index, a trigger,
    an SQL fixture, and the words the refusals look for inside data and comments."""
    environment = case["environment"]
    environment["emails"] = [
        {"id": "m-2.reply", "folder": "archive", "from": "a@corp.example", "to": ["me@corp.example"], "subject": "Re",
         "body": "Please attach the invoice; vacuum into the archive."},
    ]  # fmt: skip
    environment["memory"] = [{"key": "preferences.signature", "value": "Kind regards"}]
    environment["database"] = {
        "schema_sql": (
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);\n"
            "CREATE TABLE order_items (id INTEGER, customer_id INTEGER, unit_price REAL, note TEXT);\n"
            "CREATE INDEX order_items_customer ON order_items (customer_id);\n"
            "CREATE VIEW big_orders AS SELECT * FROM order_items WHERE unit_price > 100;\n"
            "CREATE TRIGGER order_note AFTER INSERT ON order_items BEGIN "
            "UPDATE order_items SET note = upper(note) WHERE id = NEW.id; END;\n"
            "-- attach nothing here; pragma talk is just a comment\n"
            "INSERT INTO order_items VALUES (1, 1, 250.0, 'ATTACH DATABASE in a string is data');\n"
        ),
        "fixture": scene.fixture(
            "fixtures/db/seed.sql",
            "INSERT INTO customers (id, name, email) VALUES (3, 'Lee Park', 'lee@example.org');\n",
        ),
        "tables": {
            "customers": [{"id": 1, "name": "Dana Ruiz", "email": "dana@example.org"}],
            "order_items": [{"id": 2, "customer_id": 3, "unit_price": 12.5, "note": "vacuum INTO nothing"}],
        },
    }


def test_the_example_pack_validates(cli: Any, pack_copy: Path) -> None:
    lock_manifest(pack_copy)
    for pack in (EXAMPLE_PACK, pack_copy):
        result = cli("validate", str(pack))
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_example_case_lays_down(scene: Scene, private_tmp: Path) -> None:
    for path in sorted((scene.pack / "cases").glob("*.yaml")):
        case = scene.case(path.stem)
        if case["kind"] == "permission":
            continue  # the permission stage lays its environment down itself (materialize)
        box = _create(case, scene.pack)
        try:
            for message in case.get("environment", {}).get("emails", []):
                assert (box.mail / message.get("folder", "inbox") / f"{message['id']}.json").is_file()
            tables = case.get("environment", {}).get("database", {}).get("tables", {})
            database = sqlite3.connect(box.stores / "db.sqlite")
            try:
                for table, rows in tables.items():
                    assert database.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (len(rows),)
            finally:
                database.close()
        finally:
            box.close()
    assert list(private_tmp.iterdir()) == []


def test_a_legitimate_case_using_every_field_validates_and_lays_down(scene: Scene, cli: Any, private_tmp: Path) -> None:
    case = scene.case(IPI)
    _rich(case, scene)
    scene.save(IPI, case)
    lock_manifest(scene.pack)
    result = cli("validate", str(scene.pack), cwd=scene.cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    box = _create(scene.case(IPI), scene.pack)
    try:
        assert (box.mail / "archive" / "m-2.reply.json").is_file()
        database = sqlite3.connect(box.stores / "db.sqlite")
        try:
            assert database.execute("SELECT count(*) FROM customers").fetchone() == (2,)
            assert database.execute("SELECT note FROM order_items WHERE id = 2").fetchone() == ("VACUUM INTO NOTHING",)
            assert database.execute("SELECT count(*) FROM big_orders").fetchone() == (1,)
        finally:
            database.close()
    finally:
        box.close()


def test_an_absolute_file_path_is_a_sandbox_path_not_a_host_one(scene: Scene, cli: Any, private_tmp: Path) -> None:
    planted = scene.at("planted.csv")
    case = scene.case(DPI)
    case["environment"]["files"][0]["path"] = str(planted)
    scene.save(DPI, case)
    lock_manifest(scene.pack)
    cli("validate", str(scene.pack), cwd=scene.cwd)
    box = _create(scene.case(DPI), scene.pack)
    try:
        assert (box.files / str(planted).lstrip("/")).is_file()
    finally:
        box.close()
    assert not planted.exists()


def test_the_example_pack_and_the_legitimate_case_run(
    scene: Scene, cli: Any, exec_host: None, laid_down: list[str], tmp_path: Path
) -> None:
    case = scene.case(IPI)
    _rich(case, scene)
    scene.save(IPI, case)
    lock_manifest(scene.pack)
    result = _run(cli, scene, tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid" in result.stdout + result.stderr and laid_down
