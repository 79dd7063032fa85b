"""Helpers shared by the pack, document and bundle validators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..documents import DocumentError, SourceDocument, load_document
from ..schemas import SUPPORTED_MAJORS, major_of, spec_schemas
from ._report import Rank, Report

__all__ = ["as_list", "check_schema", "display", "get", "read_document", "safe_child"]


def display(path: Path, base: Path | None, label: str | None) -> str:
    """The name a finding uses for a file: relative to ``base`` under ``label`` when given."""
    if base is not None and label is not None:
        try:
            return f"{label}/{path.relative_to(base).as_posix()}"
        except ValueError:
            pass
    return str(path)


def read_document(path: Path, name: str, report: Report) -> SourceDocument | None:
    """Parse a YAML or JSON file, recording a finding (with line) when it cannot be read."""
    try:
        return load_document(path)
    except DocumentError as exc:
        report.add(name, exc.message, rank=Rank.UNREADABLE, code="parse", line=exc.line)
    except OSError as exc:
        report.add(name, f"cannot read: {exc.strerror or exc}", rank=Rank.UNREADABLE, code="io")
    return None


def check_schema(document: SourceDocument, schema: str, name: str, report: Report) -> bool:
    """Validate against the schema of the document's major spec version; True when valid."""
    data = document.data
    version = data.get("spec_version") if isinstance(data, dict) else None
    major = major_of(version)
    if isinstance(data, dict) and version is not None and major is not None and major not in SUPPORTED_MAJORS:
        report.add(
            name,
            f"spec_version {version} is not supported "
            f"(this engine reads {', '.join(f'{m}.x' for m in SUPPORTED_MAJORS)})",
            rank=Rank.SCHEMA,
            code="spec-version",
            line=document.line_of("/spec_version"),
            pointer="/spec_version",
        )
        return False
    violations = spec_schemas(major if major in SUPPORTED_MAJORS else SUPPORTED_MAJORS[-1]).validate(schema, data)
    for violation in violations:
        report.add(
            name,
            violation.message,
            rank=Rank.SCHEMA,
            code=f"schema:{violation.keyword}",
            line=document.line_of(violation.pointer),
            pointer=violation.pointer,
        )
    return not violations


def safe_child(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside ``root`` after resolving links, else None."""
    candidate = (root / relative).resolve()
    try:
        candidate.relative_to(root.resolve())
    except ValueError:
        return None
    return candidate


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty list (the data may be invalid)."""
    return value if isinstance(value, list) else []


def get(data: Any, *keys: Any, default: Any = None) -> Any:
    """Nested lookup that tolerates wrong types (the data may be invalid)."""
    for key in keys:
        if isinstance(data, dict) and isinstance(key, str):
            data = data.get(key, default)
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return default
    return data
