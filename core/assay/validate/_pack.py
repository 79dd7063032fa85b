"""Validating a case pack directory: manifest, file hashes, pack digest, cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..documents import SourceDocument
from ..hashing import digest_file
from ..packs import compute_digest, find_manifest, list_pack_files
from ..plugins import Registry
from ._case import check_case_references
from ._common import as_list, check_schema, display, get, read_document, safe_child
from ._environment import check_environment
from ._report import Rank, Report

__all__ = ["validate_pack"]


def _check_files(
    root: Path, manifest_doc: SourceDocument, manifest_name: str, section: str, report: Report, label: str
) -> dict[str, int]:
    """Compare the manifest's listing of one section with the files on disk; returns path -> index."""
    listed: dict[str, int] = {}
    for index, entry in enumerate(as_list(get(manifest_doc.data, section))):
        relative = get(entry, "path")
        if not isinstance(relative, str):
            continue
        pointer = f"/{section}/{index}"
        if relative in listed:
            report.add(
                manifest_name,
                f"{relative} is listed twice",
                rank=Rank.INTEGRITY,
                code="duplicate-file",
                line=manifest_doc.line_of(pointer),
                pointer=pointer,
            )
            continue
        listed[relative] = index
        path = safe_child(root, relative)
        shown = display(root / relative, root, label)
        if path is None:
            report.add(
                manifest_name,
                f"{relative} points outside the pack",
                rank=Rank.INTEGRITY,
                code="path-escape",
                line=manifest_doc.line_of(pointer),
                pointer=pointer,
            )
        elif not path.is_file():
            report.add(
                shown,
                f"listed in the manifest ({manifest_name}:{manifest_doc.line_of(pointer)}) but missing",
                rank=Rank.INTEGRITY,
                code="missing-file",
            )
        else:
            actual, size = digest_file(path)
            claimed = get(entry, "sha256")
            if actual != claimed:
                report.add(
                    shown,
                    f"digest mismatch: manifest lists {claimed}, file has {actual}; "
                    "the pack digest no longer covers this file",
                    rank=Rank.INTEGRITY,
                    code="file-digest",
                )
            elif size != get(entry, "size"):
                report.add(
                    shown,
                    f"size mismatch: manifest lists {get(entry, 'size')}, file has {size}",
                    rank=Rank.INTEGRITY,
                    code="file-size",
                )
    return listed


def validate_pack(root: Path, report: Report, registry: Registry, *, label: str | None = None) -> dict[str, Any] | None:
    """Validate a pack directory. Returns the manifest data when it could be read."""
    label = label or str(root)
    manifest_path = find_manifest(root)
    if manifest_path is None:
        report.add(label, "no pack manifest (pack.yaml or pack.json)", rank=Rank.UNREADABLE, code="no-manifest")
        return None
    manifest_name = display(manifest_path, root, label)
    manifest_doc = read_document(manifest_path, manifest_name, report)
    if manifest_doc is None:
        return None
    manifest = manifest_doc.data
    if not isinstance(manifest, dict):
        report.add(manifest_name, "the manifest must be a mapping", rank=Rank.SCHEMA, code="schema:type", line=1)
        return None
    check_schema(manifest_doc, "pack", manifest_name, report)
    report.facts.update(
        {"name": manifest.get("name"), "version": manifest.get("version"), "digest": manifest.get("digest")}
    )

    listed_cases = _check_files(root, manifest_doc, manifest_name, "cases", report, label)
    listed_fixtures = _check_files(root, manifest_doc, manifest_name, "fixtures", report, label)
    disk_cases, disk_fixtures = list_pack_files(root)
    for path, listed in ((p, listed_cases) for p in disk_cases):
        if path.relative_to(root).as_posix() not in listed:
            report.add(
                display(path, root, label),
                "case file is not listed in the manifest, so the pack digest does not cover it",
                rank=Rank.INTEGRITY,
                code="unlisted-file",
            )
    for path in disk_fixtures:
        if path.relative_to(root).as_posix() not in listed_fixtures:
            report.add(
                display(path, root, label),
                "fixture is not listed in the manifest, so the pack digest does not cover it",
                rank=Rank.INTEGRITY,
                code="unlisted-file",
            )

    claimed = manifest.get("digest")
    if isinstance(claimed, str):
        try:
            recomputed = compute_digest(manifest)
        except (ValueError, RecursionError) as exc:  # rfc8785 refuses some values (e.g. integers beyond 2**53)
            recomputed = f"nothing: {exc}"
        if recomputed != claimed:
            report.add(
                manifest_name,
                f"pack digest mismatch: manifest says {claimed}, its contents give {recomputed}",
                rank=Rank.INTEGRITY,
                code="pack-digest",
                line=manifest_doc.line_of("/digest"),
                pointer="/digest",
            )

    families = as_list(manifest.get("families"))
    declared_families = {family for family in families if isinstance(family, str)}
    for index, family in enumerate(families):
        if isinstance(family, str) and registry.get("families", family) is None:
            pointer = f"/families/{index}"
            report.add(
                manifest_name,
                f"family {family!r} is not a registered plugin",
                rank=Rank.REFERENCE,
                code="unknown-family",
                line=manifest_doc.line_of(pointer),
                pointer=pointer,
            )

    case_ids: dict[str, str] = {}
    case_kinds: dict[str, str] = {}
    companions: list[tuple[str, Any, str]] = []
    # Unlisted case files are parsed too: a malformed one deserves its own line.
    to_parse: dict[str, int | None] = dict(listed_cases)
    for path in disk_cases:
        to_parse.setdefault(path.relative_to(root).as_posix(), None)
    for relative, case_index in sorted(to_parse.items()):
        case_path = safe_child(root, relative)
        if case_path is None or not case_path.is_file():
            continue
        name = display(case_path, root, label)
        document = read_document(case_path, name, report)
        if document is None:
            continue
        check_schema(document, "case", name, report)
        case = document.data
        if not isinstance(case, dict):
            continue
        case_id = case.get("id")
        entry = manifest["cases"][case_index] if case_index is not None else {}
        for field in ("id", "family"):
            if case_index is not None and isinstance(case.get(field), str) and get(entry, field) != case.get(field):
                pointer = f"/cases/{case_index}/{field}"
                report.add(
                    manifest_name,
                    f"manifest lists {field} {get(entry, field)!r} for {relative}, the file says {case.get(field)!r}",
                    rank=Rank.INTEGRITY,
                    code="index-mismatch",
                    line=manifest_doc.line_of(pointer),
                    pointer=pointer,
                )
        if isinstance(case_id, str):
            if case_id in case_ids:
                report.add(
                    name,
                    f"case id {case_id!r} is already used by {case_ids[case_id]}",
                    rank=Rank.REFERENCE,
                    code="duplicate-id",
                    line=document.line_of("/id"),
                    pointer="/id",
                )
            else:
                case_ids[case_id] = name
                case_kinds[case_id] = str(case.get("kind"))
        family = case.get("family")
        if isinstance(family, str) and declared_families and family not in declared_families:
            report.add(
                name,
                f"family {family!r} is not declared in the manifest's families",
                rank=Rank.REFERENCE,
                code="undeclared-family",
                line=document.line_of("/family"),
                pointer="/family",
            )
        check_case_references(document, name, report, registry, fixture_root=root, listed_fixtures=set(listed_fixtures))
        check_environment(document, name, report, registry, fixture_root=root)
        if isinstance(case.get("benign_companion"), str):
            companions.append((name, document, case["benign_companion"]))

    # Cross-case references, checked once every id is known.
    for name, document, companion in companions:
        # Lines are looked up only for findings: finding one re-parses the file.
        if companion not in case_ids:
            report.add(
                name,
                f"benign companion {companion!r} is not a case of this pack",
                rank=Rank.REFERENCE,
                code="unknown-case",
                line=document.line_of("/benign_companion"),
                pointer="/benign_companion",
            )
        elif case_kinds[companion] != "benign":
            report.add(
                name,
                f"benign companion {companion!r} is a {case_kinds[companion]} case, not a benign one",
                rank=Rank.REFERENCE,
                code="companion-kind",
                line=document.line_of("/benign_companion"),
                pointer="/benign_companion",
            )
    splits = manifest.get("splits")
    if isinstance(splits, dict):
        for split, members in splits.items():
            for position, member in enumerate(members if isinstance(members, list) else []):
                if isinstance(member, str) and member not in case_ids:
                    pointer = f"/splits/{split}/{position}"
                    report.add(
                        manifest_name,
                        f"split {split!r} names unknown case {member!r}",
                        rank=Rank.REFERENCE,
                        code="unknown-case",
                        line=manifest_doc.line_of(pointer),
                        pointer=pointer,
                    )
    _check_tracks(manifest, manifest_doc, manifest_name, registry, report)
    report.facts["cases"] = len(case_ids)
    return manifest


def _check_tracks(
    manifest: dict[str, Any], document: SourceDocument, name: str, registry: Registry, report: Report
) -> None:
    """Each leaderboard track names a split of the pack, stages the pack has, and a metric that can rank."""
    raw_splits = manifest.get("splits")
    splits: dict[str, Any] = raw_splits if isinstance(raw_splits, dict) else {}
    stages = set(manifest.get("stages") or [])
    seen: set[str] = set()
    for index, track in enumerate(manifest.get("leaderboard") or []):
        if not isinstance(track, dict):
            continue
        pointer = f"/leaderboard/{index}"
        label = f"track {track.get('id')!r}"

        def add(member: str, message: str, code: str, at: str = pointer) -> None:
            at = f"{at}/{member}" if member else at
            report.add(name, message, rank=Rank.REFERENCE, code=code, line=document.line_of(at), pointer=at)

        if track.get("id") in seen:
            add("id", f"{label} is declared twice", "duplicate-track")
        seen.add(str(track.get("id")))
        if track.get("split") is not None and track.get("split") not in splits:
            add("split", f"{label} names split {track.get('split')!r}, which the pack lacks", "unknown-split")
        for position, stage in enumerate(track.get("stages") or []):
            if stages and stage not in stages:
                message = f"{label} needs stage {stage!r}, which the pack's cases do not support"
                add(f"stages/{position}", message, "unknown-stage")
        metric = registry.get("metrics", track.get("rank_by"))
        if metric is None:
            add("rank_by", f"{label} ranks by {track.get('rank_by')!r}, not a registered metric", "unknown-metric")
        elif not callable(getattr(metric, "outcome", None)):
            message = f"metric {track.get('rank_by')!r} has no per-row outcome to pair entries on; rank by a rate"
            add("rank_by", message, "metric-cannot-rank")
        for position, other in enumerate(track.get("also") or []):
            if registry.get("metrics", other) is None:
                add(f"also/{position}", f"{label} shows {other!r}, not a registered metric", "unknown-metric")
