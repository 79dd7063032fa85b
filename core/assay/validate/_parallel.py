"""A bundle's verdicts re-derived on two cores: a forked child and the parent share the rows in chunks.

The parent must read and check every row itself (its findings depend on them
all, in order); the child, forked before that, reads the rows too and starts
re-deriving at once. See :class:`RederiveJob`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..components import Stage
from ..rederive import RederiveSetup
from ._rederive import Derivation, derive_rows
from ._report import Report

__all__ = ["CHUNK_LINES", "PARALLEL_BYTES", "RederiveJob"]


#: Rows files of at least this size re-derive in a forked child while the parent checks the rows and the metrics.
PARALLEL_BYTES = 4 << 20
#: Rows are re-derived in chunks of this many lines, the unit the parent and the child share the work in.
CHUNK_LINES = 512
#: Rows the parent reads again and re-derives at once (a part of a chunk).
_PART_LINES = 64

_Rows = tuple[Sequence[Mapping[str, Any]], Sequence[int]]


def _chunk_of(line: int) -> int:
    return (line - 1) // CHUNK_LINES


def _chunks(pairs: Iterable[tuple[Mapping[str, Any], int]]) -> Iterator[tuple[int, _Rows]]:
    """(row, line) pairs in line order, gathered into their chunks as they come."""
    current, rows, lines = -1, list[Mapping[str, Any]](), list[int]()
    for row, line in pairs:
        chunk = _chunk_of(line)
        if chunk != current and rows:
            yield current, (rows, lines)
            rows, lines = [], []
        current = chunk
        rows.append(row)
        lines.append(line)
    if rows:
        yield current, (rows, lines)


class _Claims:
    """Which chunks each side has taken, in memory both processes share: the child from the front, the parent
    from the back, until they meet.

    Each side writes only its own end, and only before it works a chunk, so
    no chunk is left to neither; at the meeting point both may take the same
    chunk, which is only done twice (the child's result is kept).
    """

    _NOBODY = 1 << 62

    def __init__(self) -> None:
        import mmap
        import struct

        self._memory = mmap.mmap(-1, 16)  # anonymous and shared: the forked child sees the parent's writes
        self._pack, self._end = struct.Struct("=qq"), struct.Struct("=q")  # aligned 8-byte stores: never torn
        self._pack.pack_into(self._memory, 0, 0, self._NOBODY)

    def _ends(self) -> tuple[int, int]:
        front, back = self._pack.unpack_from(self._memory, 0)
        return int(front), int(back)

    def take_front(self, chunk: int) -> bool:
        """The child's claim on ``chunk`` (its chunks come in rising order): False once the parent holds it."""
        if chunk >= self._ends()[1]:
            return False
        self._end.pack_into(self._memory, 0, chunk + 1)  # front: every chunk below it is the child's
        return True

    def take_back(self, chunk: int) -> bool:
        """The parent's claim on ``chunk`` (its chunks come in falling order): False once the child holds it."""
        if chunk < self._ends()[0]:
            return False
        self._end.pack_into(self._memory, 8, chunk)  # back: every chunk from it on is the parent's
        return True

    def close(self) -> None:
        """Release the shared memory."""
        self._memory.close()


class _Sent:
    """One chunk's findings as the child sent them: verdicts checked per line, by its place in the chunk."""

    __slots__ = ("chunk", "counts", "mismatches")

    def __init__(self, chunk: int, counts: list[int], mismatches: list[tuple[int, str, str]]) -> None:
        self.chunk, self.counts, self.mismatches = chunk, counts, mismatches

    def restricted(self, lines: Sequence[int]) -> Derivation:
        """Only what was found on ``lines`` (of this chunk), as :meth:`Derivation.restricted` gives it."""
        keep = set(lines)
        checked = {line: int(self.counts[(line - 1) % CHUNK_LINES]) for line in lines}
        return Derivation(checked, [found for found in self.mismatches if found[0] in keep])


class RederiveJob:
    """Re-derivation of a bundle's verdicts, run alongside the rest of the validation when the bundle is large.

    On Linux, for a rows file of :data:`PARALLEL_BYTES` or more, a child is
    forked before the rows are read. It parses them itself and re-derives, a
    chunk of :data:`CHUNK_LINES` lines at a time from the first, every row that
    the schema accepts, while the parent reads them again for its own checks
    and recomputes the metrics; then the parent takes chunks from the last
    (reading their rows a third time, whole), until the two meet. The child
    sends back what it found per line, and the parent keeps what concerns the
    rows it accepted. (The child checks the schema but not the keys against
    the plan: a duplicate or unplanned row is re-derived in vain, under the
    same per-row guard, and dropped.) If the child cannot be made or fails,
    the work is done in the parent. The findings are the same, in the same
    order, either way.
    """

    def __init__(self, derive: Callable[[Sequence[Mapping[str, Any]], Sequence[int]], Derivation], file: str) -> None:
        self._derive, self._file = derive, file
        self._pid: int | None = None
        self._fd: int | None = None
        self._claims: _Claims | None = None

    @classmethod
    def prepare(
        cls,
        case_of: Callable[[str], Mapping[str, Any] | None],
        stages: Sequence[Stage],
        setup: RederiveSetup,
        file: str,
    ) -> RederiveJob:
        """A job re-deriving the rows it is given (:meth:`fork`, :meth:`finish`) by the rederivers of ``stages``."""

        def derive(rows: Sequence[Mapping[str, Any]], lines: Sequence[int]) -> Derivation:
            return derive_rows(rows, lines, case_of, stages, setup)

        return cls(derive, file)

    @property
    def forked(self) -> bool:
        """True while a child is at work on the rows."""
        return self._pid is not None

    def fork(self, load: Callable[[], Iterable[tuple[Mapping[str, Any], int]]]) -> None:
        """Start the work in a child on the candidate rows ``load()`` gives; nothing happens where fork is missing.

        The candidates, (row, line) pairs in line order, must include every
        row the parent will accept, at the same line and with the same
        content; the child reads them a chunk at a time, and a failure to read
        them on is a failure of the child.
        """
        import os
        import sys

        import orjson

        if sys.platform != "linux" or not hasattr(os, "fork"):
            return
        claims = _Claims()
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            claims.close()
            return
        if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
            status = 1
            try:
                os.close(read_fd)
                done: list[tuple[int, list[int]]] = []
                mismatches: list[tuple[int, str, str]] = []
                # A chunk at a time: its rows are let go before the next is parsed, so the memory they held is
                # used again (a parse into fresh pages costs a page fault every 4 KiB), and they are re-derived
                # while they are still in the cache.
                for chunk, (rows, lines) in _chunks(load()):
                    if not claims.take_front(chunk):
                        break
                    part = self._derive(rows, lines)
                    # One count per line of the chunk, by its place in it: the parent parses a list of small
                    # numbers per chunk, not a pair per line (a million lines would be a million lists).
                    counts = [0] * CHUNK_LINES
                    for line, count in part.checked.items():
                        counts[(line - 1) % CHUNK_LINES] = count
                    done.append((chunk, counts))
                    mismatches.extend(part.mismatches)
                message = {"chunks": done, "mismatches": mismatches}
                view = memoryview(orjson.dumps(message))
                while view:
                    view = view[os.write(write_fd, view) :]
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        self._pid, self._fd, self._claims = pid, read_fd, claims

    def finish(
        self,
        report: Report,
        lines: Sequence[int],
        rows_at: Callable[[Sequence[int]], _Rows],
    ) -> int:
        """Add the re-derived findings to ``report`` (after what it holds); returns how many verdicts were checked.

        ``lines`` are the lines of the rows the parent accepted; ``rows_at``
        reads the whole rows at some of them again (the parent keeps only what
        its metrics read). The parent re-derives chunks from the last while
        the child has not reached them, then collects the child's work,
        keeping it for ``lines`` only. Without a child, or when it fails, the
        chunks it owed are re-derived here.
        """
        chunks = list(dict.fromkeys(_chunk_of(line) for line in lines))  # rising, as the lines do
        mine: dict[int, Derivation] = {}
        if self._pid is not None:
            assert self._claims is not None
            for chunk in reversed(chunks):
                if not self._claims.take_back(chunk):
                    break
                mine[chunk] = self._derive_here(rows_at, _within(lines, chunk))
        theirs = None if self._pid is None else self._collect()
        if theirs is None:  # no child, or no usable answer: re-derive here what it owed
            for chunk in chunks:
                if chunk not in mine:
                    mine[chunk] = self._derive_here(rows_at, _within(lines, chunk))
            theirs = {}
        return self._assemble(mine, theirs, lines).report(report, self._file)

    def _derive_here(self, rows_at: Callable[[Sequence[int]], _Rows], lines: Sequence[int]) -> Derivation:
        """Re-derive the rows at ``lines`` (one chunk's) in the parent, a part at a time, and keep the counts.

        The parent reads whole rows again here, while holding what the rest of the validation gathered: a
        part of a chunk at a time keeps that on top small.
        """
        found = Derivation()
        for start in range(0, len(lines), _PART_LINES):
            part = self._derive(*rows_at(lines[start : start + _PART_LINES]))
            found.counted += part.counted + sum(part.checked.values())
            found.mismatches.extend(part.mismatches)
        return found

    def abandon(self) -> None:
        """End the job without findings (the rows could not be read): the child, if any, is waited for."""
        if self._pid is not None:
            self._collect()

    def _collect(self) -> dict[int, _Sent] | None:
        """The child's work per chunk, once it has ended; None when it failed or sent nothing usable."""
        import os

        import orjson

        assert self._pid is not None and self._fd is not None and self._claims is not None
        chunks = []
        with os.fdopen(self._fd, "rb") as pipe:
            while chunk := pipe.read(1 << 20):
                chunks.append(chunk)
        _, status = os.waitpid(self._pid, 0)
        self._claims.close()
        self._pid = self._fd = self._claims = None
        if status != 0:
            return None
        try:
            sent = orjson.loads(b"".join(chunks))
            del chunks
            parts = {}
            for chunk, counts in sent["chunks"]:
                if (
                    not isinstance(counts, list)
                    or len(counts) != CHUNK_LINES
                    or any(type(c) is not int for c in counts)
                ):
                    return None
                parts[int(chunk)] = _Sent(int(chunk), counts, [])
            for line, pointer, message in sent["mismatches"]:
                parts[_chunk_of(int(line))].mismatches.append((int(line), str(pointer), str(message)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        return parts

    def _assemble(
        self, mine: Mapping[int, Derivation], theirs: Mapping[int, _Sent], lines: Sequence[int]
    ) -> Derivation:
        """Every chunk's findings in line order (the child's where both did one), kept for ``lines`` (which rise):
        chunk by chunk, so no table of every line is made (a bundle may have a million)."""
        whole = Derivation()
        for chunk in sorted(set(mine) | set(theirs)):
            if chunk in theirs:
                kept = theirs[chunk].restricted(_within(lines, chunk))
                whole.counted += sum(kept.checked.values())
                whole.mismatches.extend(kept.mismatches)
            else:  # re-derived here from the accepted rows only: nothing to leave out
                whole.counted += mine[chunk].counted
                whole.mismatches.extend(mine[chunk].mismatches)
        return whole


def _within(lines: Sequence[int], chunk: int) -> Sequence[int]:
    """The lines of ``lines`` (rising) that fall in ``chunk``."""
    first = chunk * CHUNK_LINES + 1
    return lines[bisect_left(lines, first) : bisect_left(lines, first + CHUNK_LINES)]
