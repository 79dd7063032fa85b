"""Checks of a case's environment beyond its schema: what would reach the engine's file system or database.

The schema already confines the names (mail folders and ids are plain names,
table and column names SQL identifiers, paths never climb). What a schema
cannot say is what SQL does: the case's ``schema_sql`` and SQL fixture are
laid down here exactly as a run lays them down
(:func:`assay.sandboxes.sqlguard.lay_down_database`, through the agent's
authorizer), on a database in memory, so a statement that ATTACHes a file,
VACUUMs INTO one, sets a pragma that writes or loads an extension is refused
by ``assay validate``, as by the run, and nothing is ever written. Then every
planned stage of the case's family may check what is its own to lay down
(``Stage.check_case``: the permission stage's paths, say).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..documents import SourceDocument
from ..errors import PackError
from ..plugins import Registry
from ._common import get
from ._report import Rank, Report

__all__ = ["check_environment"]


def check_environment(
    document: SourceDocument, name: str, report: Report, registry: Registry, *, fixture_root: Path
) -> None:
    """Add a finding for each environment member of the case a run could not lay down safely."""
    case = document.data
    if not isinstance(case, dict) or not isinstance(case.get("environment"), dict):
        return

    def add(pointer: str, message: str, code: str) -> None:
        report.add(name, message, rank=Rank.REFERENCE, code=code, line=document.line_of(pointer), pointer=pointer)

    database = get(case, "environment", "database")
    if isinstance(database, dict) and any(database.get(member) for member in ("schema_sql", "fixture", "tables")):
        for pointer, message in _database_problems(database, fixture_root):
            add(pointer, message, "unsafe-sql")
    family = registry.get("families", case.get("family")) if isinstance(case.get("family"), str) else None
    for stage_name in family.stages if family is not None else ():
        stage = registry.get("stages", stage_name)
        checker: Callable[[Any, Path], Any] | None = getattr(stage, "check_case", None)
        if checker is None:
            continue
        try:
            problems = list(checker(case, fixture_root))
        except Exception as exc:  # noqa: BLE001 - a plugin's check that fails is a finding, not a crash
            add("/environment", f"stage {stage_name} could not check the case ({type(exc).__name__}: {exc})", "check")
            continue
        for problem in problems:
            add(problem.pointer, problem.message, problem.code)


def _database_problems(database: dict[str, Any], fixture_root: Path) -> list[tuple[str, str]]:
    """(pointer, message) of each member of ``environment.database`` a run would refuse."""
    from ..sandboxes.fixtures import read_fixture
    from ..sandboxes.sqlguard import (
        LAY_DOWN_SECONDS,
        LAY_DOWN_SQL_BYTES,
        LAY_DOWN_VALUE_BYTES,
        database_problems,
        guarded_connection,
    )

    def fixture(relative: str) -> bytes:
        try:
            return read_fixture(fixture_root, relative)
        except PackError:
            return b""  # a missing or unsafe fixture has its own finding (fixture references)

    db = guarded_connection(
        ":memory:", LAY_DOWN_SECONDS, value_bytes=LAY_DOWN_VALUE_BYTES, sql_bytes=LAY_DOWN_SQL_BYTES
    )
    try:
        return [(problem.pointer, problem.message) for problem in database_problems(db, database, fixture)]
    finally:
        db.close()
