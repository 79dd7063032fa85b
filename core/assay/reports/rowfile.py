"""A bundle's rows as a sequence read from disk each time it is walked, never all held.

A report of a million-row bundle cannot hold its rows: as Python objects they
are several times the file. :func:`spool_rows` reads the rows once, checking
each against the spec, and copies the lines into a private file of its own
(a folder only this process made); :class:`RowFile` then gives them back in
order, as many times as a report walks them, keeping only the 8-byte offset of
each line. Reading a private copy, not the bundle's own file, means what a
report shows is what was checked even if the bundle changes under it.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import orjson

from ..errors import SpecError

__all__ = ["RowFile", "spool_rows"]

#: Bytes read from the private copy at a time when the rows are walked.
_READ_BUFFER = 1 << 20


class RowFile(Sequence[dict[str, Any]]):
    """Rows kept as JSON lines in a private file: iterating parses them again, one at a time.

    Indexing seeks to the line's offset; a slice gives a list. The file (and
    the folder it is in) is removed when the object is garbage collected, or
    by :meth:`close`.
    """

    def __init__(self, path: Path, offsets: array[int], cleanup: Callable[[], None] | None = None) -> None:
        self._path = path
        self._offsets = offsets  # offsets[i] is where line i starts; one more marks the end
        self._close = weakref.finalize(self, cleanup) if cleanup is not None else None

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with open(self._path, "rb", buffering=_READ_BUFFER) as handle:
            for line in handle:
                yield orjson.loads(line)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        number = range(len(self))[index]  # negative indices and IndexError as a list gives them
        start, end = self._offsets[number], self._offsets[number + 1]
        with open(self._path, "rb") as handle:
            handle.seek(start)
            data: dict[str, Any] = orjson.loads(handle.read(end - start))
        return data

    def __repr__(self) -> str:
        return f"RowFile({len(self)} rows)"

    def close(self) -> None:
        """Remove the private copy now (the rows cannot be read afterwards)."""
        if self._close is not None:
            self._close()


def spool_rows(source: Path, name: str, check: Callable[[Any, int], None]) -> RowFile:
    """Read the JSON lines of ``source`` once, ``check`` each parsed row (with its line number), keep a private copy.

    Blank lines are skipped, as a reader of the bundle skips them. ``check``
    raises to refuse a row; a line that is not JSON is refused here, named
    ``name:line``.
    """
    scratch = tempfile.TemporaryDirectory(prefix="assay-rows-")
    try:
        path = Path(scratch.name) / "rows.jsonl"
        offsets: array[int] = array("q", [0])
        written = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(source, "rb", buffering=_READ_BUFFER) as handle, open(fd, "wb", buffering=_READ_BUFFER) as copy:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    row = orjson.loads(raw)
                except (orjson.JSONDecodeError, RecursionError) as exc:
                    raise SpecError(f"{name}:{number}: not a JSON row: {str(exc).splitlines()[0]}") from None
                check(row, number)
                line = raw if raw.endswith(b"\n") else raw + b"\n"
                copy.write(line)
                written += len(line)
                offsets.append(written)
    except BaseException:
        scratch.cleanup()
        raise
    return RowFile(path, offsets, scratch.cleanup)
