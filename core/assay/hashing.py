"""Content hashes: RFC 8785 canonical JSON, then sha256, written ``sha256:<hex>``.

Raw files (cases, fixtures, rows) are hashed byte for byte; JSON documents
(manifests, metrics) are hashed over their canonical form, so formatting and
key order never change a digest but one changed value always does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import rfc8785

from .errors import DocumentError

__all__ = ["canonical_json", "digest_bytes", "digest_document", "digest_file", "file_entry", "is_digest"]

_CHUNK = 1 << 20


def canonical_json(document: Any) -> bytes:
    """The RFC 8785 (JCS) canonical serialization of a JSON value.

    Raises :class:`~assay.errors.DocumentError` for a value JSON cannot hold
    exactly: an integer beyond 2^53 - 1, a non-finite number, a lone surrogate.
    """
    try:
        return rfc8785.dumps(document)
    except rfc8785.CanonicalizationError as exc:
        raise DocumentError(f"cannot be hashed as canonical JSON: {exc}") from None


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_document(document: Any) -> str:
    """``sha256:<hex>`` of a JSON value's canonical form."""
    return digest_bytes(canonical_json(document))


def digest_file(path: Path) -> tuple[str, int]:
    """``(sha256:<hex>, size)`` of a file's bytes, read in chunks."""
    hasher = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    return "sha256:" + hasher.hexdigest(), size


def file_entry(root: Path, path: Path) -> dict[str, Any]:
    """The ``{path, sha256, size}`` entry of a file, its path relative to ``root`` in POSIX form."""
    digest, size = digest_file(path)
    return {"path": path.relative_to(root).as_posix(), "sha256": digest, "size": size}


def is_digest(value: object) -> bool:
    """True when ``value`` is a well-formed ``sha256:<64 lowercase hex>`` string."""
    return (
        isinstance(value, str)
        and len(value) == 71
        and value.startswith("sha256:")
        and all(c in "0123456789abcdef" for c in value[7:])
    )
