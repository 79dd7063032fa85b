"""The validator: packs, single documents, and result bundles (directories or zips).

:func:`validate_path` decides what a path is and returns a :class:`Report`.
It never raises for bad input: every problem becomes a finding. Only a path
that does not exist or cannot be classified is a :class:`UsageError`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..bundle import BUNDLE_MANIFEST
from ..documents import YAML_SUFFIXES
from ..errors import ArchiveError, UsageError
from ..hashing import digest_document
from ..packs import MANIFEST_NAMES, find_manifest
from ..plugins import Registry
from ._archive import ArchiveLimits, extract_archive
from ._bundle import validate_bundle
from ._case import check_case_references
from ._common import check_schema, read_document
from ._environment import check_environment
from ._pack import validate_pack
from ._report import Issue, Rank, Report
from ._verdict import require_valid_pack, verdict_dir

__all__ = [
    "ArchiveLimits",
    "Issue",
    "Rank",
    "Report",
    "detect_schema",
    "extract_archive",
    "find_pack_root",
    "require_valid_pack",
    "validate_path",
    "verdict_dir",
]

_DEFAULT_LIMITS = ArchiveLimits()  # frozen, so one shared default is safe
_SKIP = {".git", ".venv", "build", "dist", "node_modules", "__pycache__", "site"}


def find_pack_root(directory: Path) -> Path | None:
    """The one pack manifest's folder at or below ``directory`` (e.g. inside a distribution)."""
    if find_manifest(directory) is not None:
        return directory
    found = []
    for name in MANIFEST_NAMES:
        for path in directory.rglob(name):
            if not any(part in _SKIP or part.endswith(".egg-info") for part in path.relative_to(directory).parts):
                found.append(path.parent)
    found = sorted(set(found))
    if len(found) > 1:
        raise UsageError(f"{directory}: holds {len(found)} packs ({', '.join(str(p) for p in found)}); name one")
    return found[0] if found else None


def detect_schema(data: object) -> str | None:
    """Guess which document type a parsed single file is, from its members."""
    if not isinstance(data, dict):
        return None
    if "placement" in data:
        return "defense_policy"
    if "family" in data or "kind" in data:
        return "case"
    if "run_id" in data:
        return "run_manifest"
    if "key" in data and "stages" in data:
        return "result_row"
    if "metrics" in data and "files" not in data:
        return "metrics_summary"
    if {"read", "write", "execute"} & set(data) and "id" not in data:
        return "permission_policy"
    return None


def _case_pack_root(path: Path) -> Path:
    for parent in path.parents:
        if find_manifest(parent) is not None:
            return parent
    return path.parent


def _validate_document(path: Path, report: Report, registry: Registry, schema: str | None) -> None:
    document = read_document(path, str(path), report)
    if document is None:
        return
    name = schema or detect_schema(document.data)
    if name is None:
        raise UsageError(f"{path}: cannot tell which assay document this is; pass --schema NAME")
    report.kind = name
    valid = check_schema(document, name, str(path), report)
    if name == "case" and isinstance(document.data, dict):
        check_case_references(document, str(path), report, registry, fixture_root=_case_pack_root(path))
        check_environment(document, str(path), report, registry, fixture_root=_case_pack_root(path))
    elif name == "defense_policy" and valid:
        data = document.data
        if "digest" in data:
            actual = digest_document({k: v for k, v in data.items() if k != "digest"})
            if actual != data["digest"]:
                report.add(
                    str(path),
                    f"digest mismatch: document says {data['digest']}, its contents give {actual}",
                    rank=Rank.INTEGRITY,
                    code="document-digest",
                    line=document.line_of("/digest"),
                    pointer="/digest",
                )


def validate_path(
    path: Path,
    registry: Registry,
    *,
    pack: Path | None = None,
    schema: str | None = None,
    limits: ArchiveLimits = _DEFAULT_LIMITS,
    replay: bool = False,
) -> Report:
    """Validate a pack directory, a bundle directory or zip, or one document file.

    ``replay`` also replays a bundle's exec tool calls in fresh sandboxes.
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    report = Report(str(path))
    if path.is_dir():
        if (path / BUNDLE_MANIFEST).is_file():
            report.kind = "bundle"
            validate_bundle(path, report, registry, label=str(path), pack_root=pack, replay=replay)
            return report
        root = find_pack_root(path)
        if root is None:
            raise UsageError(f"{path}: neither a pack (no {MANIFEST_NAMES[0]}) nor a bundle (no {BUNDLE_MANIFEST})")
        report.kind = "pack"
        validate_pack(root, report, registry, label=str(root))
        return report
    if path.suffix.lower() == ".zip":
        report.kind = "bundle"
        with tempfile.TemporaryDirectory(prefix="assay-bundle-") as scratch:
            try:
                root = extract_archive(path, Path(scratch), limits)
            except ArchiveError as exc:
                report.add(str(path), str(exc), rank=Rank.UNREADABLE, code="archive")
                return report
            if not (root / BUNDLE_MANIFEST).is_file():
                report.add(str(path), f"the archive holds no {BUNDLE_MANIFEST}", rank=Rank.UNREADABLE, code="archive")
                return report
            validate_bundle(root, report, registry, label=str(path), pack_root=pack, replay=replay)
        return report
    if path.name in MANIFEST_NAMES:
        report.kind = "pack"
        validate_pack(path.parent, report, registry, label=str(path.parent))
        return report
    if path.name == BUNDLE_MANIFEST:
        report.kind = "bundle"
        validate_bundle(path.parent, report, registry, label=str(path.parent), pack_root=pack)
        return report
    if path.suffix.lower() not in YAML_SUFFIXES | {".json"}:
        raise UsageError(f"{path}: not a pack, bundle, .zip, or YAML/JSON document")
    report.kind = "document"
    _validate_document(path, report, registry, schema)
    return report
