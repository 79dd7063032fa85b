"""Builds authbench's binary fixtures (SQLite databases, tar archives) from their sources under binaries/.

The tasks are data: each is a folder, src/assay_pack_authbench/pack/tasks/<task>/, holding its case.yaml and the
files its environment lays down (files/), edited in place. Only what cannot be edited as text is built here:

* binaries/<task>/<path>.db.sql  -> tasks/<task>/files/<path>.db, the database that SQL script makes;
* binaries/<task>/<path>.tar.json -> tasks/<task>/files/<path>.tar, the archive of the members it lists.

Run:  python generate.py && assay pack lock src/assay_pack_authbench/pack
Nothing here reads the clock or a random source, and the library-dependent bytes of a database header are fixed,
so re-running gives byte-identical files (a test checks the committed ones are what this writes).
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import struct
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "binaries"
TASKS = HERE / "src" / "assay_pack_authbench" / "pack" / "tasks"


def sqlite_db(script: str) -> bytes:
    """A SQLite database built from ``script``, with the library-version header field fixed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "db.sqlite")
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA page_size = 4096")
        con.execute("PRAGMA journal_mode = DELETE")
        con.executescript(script)
        con.execute("VACUUM")
        con.close()
        data = bytearray(Path(path).read_bytes())
    # Offsets 92 and 96: change counter copy and the version of the library that wrote the file; fixed so the
    # bytes do not depend on the SQLite version that ran the generator.
    data[92:100] = struct.pack(">II", 1, 3040001)
    data[24:28] = struct.pack(">I", 1)
    return bytes(data)


def tar_bytes(members: list[list[str | None]], mtime: int) -> bytes:
    """An uncompressed tar archive; a member with content None is a directory."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, content in members:
            info = tarfile.TarInfo(str(name))
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "root", "root"
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
            else:
                data = content.encode()
                info.size, info.mode = len(data), 0o644
                archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def built() -> dict[Path, bytes]:
    """Every binary fixture's path under tasks/ and its bytes, built from its source."""
    files = {}
    for source in sorted(SOURCES.rglob("*")):
        if not source.is_file():
            continue
        task, *rest = source.relative_to(SOURCES).parts
        relative = Path(*rest)
        if source.name.endswith(".db.sql"):
            files[TASKS / task / "files" / relative.with_suffix("")] = sqlite_db(source.read_text(encoding="utf-8"))
        elif source.name.endswith(".tar.json"):
            spec = json.loads(source.read_text(encoding="utf-8"))
            files[TASKS / task / "files" / relative.with_suffix("")] = tar_bytes(spec["members"], spec["mtime"])
        else:
            raise SystemExit(f"{source}: a source is <fixture>.db.sql or <fixture>.tar.json")
    return files


def main() -> None:
    for path, data in built().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(path.relative_to(HERE), file=sys.stderr)


if __name__ == "__main__":
    main()
