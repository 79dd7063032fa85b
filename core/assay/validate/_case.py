"""Checks on one case beyond its schema: plugin names, oracle parameters, fixtures."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..documents import SourceDocument
from ..plugins import Registry
from ._common import as_list, get, safe_child
from ._report import Rank, Report

__all__ = ["check_case_references", "fixture_references", "oracle_references"]


def oracle_references(case: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """Every (pointer, plugin reference, decided outcome) a case makes to oracle plugins."""
    for index, oracle in enumerate(as_list(case.get("oracles"))):
        if isinstance(oracle, dict):
            yield f"/oracles/{index}", oracle, oracle.get("decides")
    checker = case.get("checker")
    if isinstance(checker, dict):
        yield "/checker", checker, "success"
    for role in ("utility", "attack"):
        verifier = get(case, "verifiers", role)
        if isinstance(verifier, dict):
            yield f"/verifiers/{role}", verifier, role


def fixture_references(case: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """Every (pointer, pack-relative path, is_directory) fixture reference of a case."""
    environment = case.get("environment")
    if not isinstance(environment, dict):
        return
    for store in ("files", "web"):
        for index, item in enumerate(as_list(environment.get(store))):
            if isinstance(item, dict) and isinstance(item.get("fixture"), str):
                yield f"/environment/{store}/{index}/fixture", item["fixture"], False
    if isinstance(get(environment, "database", "fixture"), str):
        yield "/environment/database/fixture", environment["database"]["fixture"], False
    if isinstance(environment.get("fixture_tree"), str):
        yield "/environment/fixture_tree", environment["fixture_tree"], True
    for index, item in enumerate(as_list(get(environment, "code", "files"))):
        if isinstance(item, str):
            yield f"/environment/code/files/{index}", item, False


def check_case_references(
    document: SourceDocument,
    name: str,
    report: Report,
    registry: Registry,
    *,
    fixture_root: Path,
    listed_fixtures: set[str] | None = None,
) -> None:
    """Names must resolve to plugins, oracle parameters must fit, fixtures must exist.

    ``listed_fixtures`` (pack-relative paths in the manifest) makes a fixture
    that exists on disk but is not covered by the pack digest an error too.
    """
    import jsonschema

    case = document.data
    if not isinstance(case, dict):
        return

    def add(pointer: str, message: str, code: str) -> None:
        report.add(name, message, rank=Rank.REFERENCE, code=code, line=document.line_of(pointer), pointer=pointer)

    family_name = case.get("family")
    family = registry.get("families", family_name) if isinstance(family_name, str) else None
    if isinstance(family_name, str) and family is None:
        add("/family", f"family {family_name!r} is not a registered plugin (see 'assay plugins')", "unknown-family")
    elif family is not None and isinstance(case.get("kind"), str) and family.kind != case["kind"]:
        add(
            "/kind",
            f"kind {case['kind']!r} does not match family {family_name} (a {family.kind} family)",
            "kind-mismatch",
        )

    for pointer, reference, decides in oracle_references(case):
        plugin_name = reference.get("plugin")
        oracle = registry.get("oracles", plugin_name) if isinstance(plugin_name, str) else None
        if oracle is None:
            add(f"{pointer}/plugin", f"oracle {plugin_name!r} is not a registered plugin", "unknown-oracle")
            continue
        if isinstance(decides, str) and decides not in oracle.decides:
            add(
                f"{pointer}/decides",
                f"oracle {plugin_name} cannot decide {decides!r} (it decides {', '.join(sorted(oracle.decides))})",
                "oracle-decides",
            )
        params = reference.get("params", {})
        if not isinstance(params, dict):
            continue  # the schema check reports it
        validator = jsonschema.Draft202012Validator(oracle.params_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(params))
        if error is not None:
            where = f"{pointer}/params" + "".join(f"/{part}" for part in error.absolute_path)
            add(where, f"oracle {plugin_name} parameters: {error.message}", "oracle-params")
            continue
        _check_tool_names(oracle, params, f"{pointer}/params", document, name, report, registry)

    seen_objects: set[str] = set()
    for index, obj in enumerate(as_list(case.get("protected_objects"))):
        object_id = get(obj, "id")
        if isinstance(object_id, str):
            if object_id in seen_objects:
                add(
                    f"/protected_objects/{index}/id",
                    f"protected object id {object_id!r} is used twice",
                    "duplicate-object",
                )
            seen_objects.add(object_id)

    for pointer, relative, is_dir in fixture_references(case):
        target = safe_child(fixture_root, relative)
        if target is None:
            add(pointer, f"fixture {relative!r} points outside the pack", "fixture-escape")
        elif not (target.is_dir() if is_dir else target.is_file()):
            add(pointer, f"fixture {relative!r} does not exist", "missing-fixture")
        elif listed_fixtures is not None:
            covered = (
                any(path.startswith(relative.rstrip("/") + "/") for path in listed_fixtures)
                if is_dir
                else relative in listed_fixtures
            )
            if not covered:
                add(pointer, f"fixture {relative!r} is not listed in the pack manifest", "unlisted-fixture")


def _check_tool_names(
    oracle: Any,
    params: dict[str, Any],
    pointer: str,
    document: SourceDocument,
    name: str,
    report: Report,
    registry: Registry,
) -> None:
    """Warn on a tool name glob of the oracle's parameters that no registered tool's name matches.

    Such an oracle waits for calls to a tool no sandbox offers: it can never
    fire (``files.delete`` for ``files_delete``, say).
    """
    names_of = getattr(oracle, "tool_names", None)
    if not callable(names_of):
        return
    tools = registry.names("tools")
    for where, glob in names_of(params):
        if not any(fnmatch.fnmatchcase(tool, glob) for tool in tools):
            close = difflib.get_close_matches(glob, tools, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            report.warn(
                name,
                f"oracle {oracle.name} waits for a call to {glob!r}, but no registered tool is named like that{hint}: "
                "it can never fire",
                code="unknown-tool",
                line=document.line_of(pointer + where),
                pointer=pointer + where,
            )
