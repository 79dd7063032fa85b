"""Writing result bundles: rows, run manifest, metrics summary, and the seal.

A bundle is a directory (or a zip of one)::

    bundle.json     the seal: every other file with sha256 and size, pack identity,
                    run manifest digest, claimed metrics digest
    run.json        the run manifest (provenance and the planned matrix)
    rows.jsonl      one result row per line
    metrics.json    the claimed metrics summary

Everything is written deterministically (sorted keys, fixed separators,
sorted file lists, fixed zip timestamps), so the same rows give byte-identical
bundles and digests. Every write is atomic: a temporary file, then rename.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from . import jsontext
from .hashing import digest_document, file_entry

__all__ = [
    "BUNDLE_MANIFEST",
    "METRICS_FILE",
    "ROWS_FILE",
    "RUN_FILE",
    "atomic_writer",
    "dump_row",
    "seal_bundle",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_rows",
    "zip_bundle",
]

BUNDLE_MANIFEST = "bundle.json"
RUN_FILE = "run.json"
ROWS_FILE = "rows.jsonl"
METRICS_FILE = "metrics.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def dump_row(row: Mapping[str, Any]) -> bytes:
    """One row as a compact, key-sorted UTF-8 JSON line (orjson: ~10x json.dumps)."""
    return jsontext.dumps(row, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through: readers see the old content or all the new, never half.

    The text goes to a temporary file beside ``path``, flushed to disk and
    renamed over it when the block ends; an exception leaves ``path`` as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; results are meant to be shared.
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file so readers see either the old content or the new, never half."""
    with atomic_writer(path) as handle:
        handle.write(data)


def write_json_atomic(path: Path, document: Any) -> None:
    """Write a JSON document (sorted keys, two-space indent) atomically.

    Written as it is encoded: ``json.dumps`` with an indent gathers every piece
    of the text in a list first, a few dozen bytes per value, which for a run
    manifest planning a million cases is more than the document itself.
    """
    with atomic_writer(path) as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="strict", newline="", write_through=False)
        json.dump(document, text, sort_keys=True, indent=2, ensure_ascii=False)
        text.write("\n")
        text.flush()
        text.detach()  # the handle is atomic_writer's to close


def write_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as JSON lines atomically; returns how many."""
    lines = [dump_row(row) for row in rows]
    write_bytes_atomic(path, b"".join(lines))
    return len(lines)


def seal_bundle(directory: Path, *, pack: Mapping[str, Any], row_count: int) -> dict[str, Any]:
    """Write ``bundle.json`` over the files already in ``directory`` and return it.

    ``run.json``, ``rows.jsonl`` and ``metrics.json`` must exist. Every other
    file under the directory (reports, logs) is listed too.
    """
    run_manifest = json.loads((directory / RUN_FILE).read_text(encoding="utf-8"))
    metrics = json.loads((directory / METRICS_FILE).read_text(encoding="utf-8"))
    files = sorted(
        (p for p in directory.rglob("*") if p.is_file() and p.name != BUNDLE_MANIFEST and not p.name.startswith(".")),
        key=lambda p: p.relative_to(directory).as_posix(),
    )
    manifest = {
        "spec_version": run_manifest["spec_version"],
        "pack": dict(pack),
        "run_manifest": {"path": RUN_FILE, "digest": digest_document(run_manifest)},
        "rows": {"path": ROWS_FILE, "count": row_count},
        "metrics": {"path": METRICS_FILE, "digest": digest_document(metrics)},
        "files": [file_entry(directory, p) for p in files],
    }
    write_json_atomic(directory / BUNDLE_MANIFEST, manifest)
    return manifest


def zip_bundle(directory: Path, archive: Path) -> None:
    """Zip a bundle directory reproducibly (sorted members, fixed timestamps), atomically."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=archive.parent, prefix=f".{archive.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(p for p in directory.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=_ZIP_TIME)
                info.external_attr = 0o100644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                # As writestr would, with the size known up front (it decides ZIP64), but streamed: the rows of a
                # large run are gigabytes.
                info.file_size = path.stat().st_size
                with open(path, "rb") as source, zf.open(info, "w") as member:
                    shutil.copyfileobj(source, member, 1 << 20)
        os.chmod(tmp, 0o644)
        os.replace(tmp, archive)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
