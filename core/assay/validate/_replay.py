"""Replaying a bundle's recorded actions (``assay validate --replay``), stage by stage.

Re-deriving verdicts (:mod:`._rederive`) proves they follow from what a row
says its actions did; replay proves the actions did it. Every stage that
registered a replayer (:mod:`assay.rederive`) is given, in the stages' order,
each row that carries it; what its replay does not give is a
``replay-mismatch``. The actions come from a stranger's file, so each
replayer runs them as an agent's ran (in its sandbox); the whole replay stops
at a deadline (``replay-budget``). Nothing here knows any stage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..components import Stage
from ..plugins import Registry
from ..rederive import ReplaySetup
from ..stage_order import stage_order
from ._report import Rank, Report

__all__ = ["REPLAY_SECONDS", "replay_rows"]

#: The longest a whole replay may take; past it the rest is not replayed and the bundle cannot pass.
REPLAY_SECONDS = 1_800.0
_MAX_LISTED = 20
_RANKS = {"reference": Rank.REFERENCE, "completeness": Rank.COMPLETENESS, "integrity": Rank.INTEGRITY}


def replay_rows(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    run: Mapping[str, Any],
    case_of: Callable[[str], Mapping[str, Any] | None],
    registry: Registry,
    pack_root: Path,
    file: str,
    report: Report,
    *,
    deadline_s: float = REPLAY_SECONDS,
) -> dict[str, int]:
    """Replay the rows of every stage that has a replayer; returns how many rows of each stage were replayed."""
    stages = registry.items("stages")
    setup = ReplaySetup(run, registry.items("sandboxes"), registry.items("oracles"), pack_root)
    deadline = time.monotonic() + deadline_s
    counts = {}
    for name in stage_order(stages):
        stage = stages[name]
        if stage.replayer is not None and any(name in row["stages"] for row in rows):
            counts[name] = asyncio.run(_replay_stage(stage, setup, rows, lines, case_of, file, report, deadline))
    return counts


async def _replay_stage(
    stage: Stage,
    setup: ReplaySetup,
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    file: str,
    report: Report,
    deadline: float,
) -> int:
    assert stage.replayer is not None
    replayer = stage.replayer(setup)
    if replayer.unavailable is not None:
        report.add(file, replayer.unavailable, rank=Rank.REFERENCE, code="replay")
        return 0
    replayed = mismatches = 0
    for row, line in zip(rows, lines, strict=True):
        if stage.name not in row["stages"]:
            continue
        if time.monotonic() > deadline:
            report.add(
                file,
                f"{stage.name} replay stopped after {replayed} rows: the whole replay passed its time budget",
                rank=Rank.COMPLETENESS,
                code="replay-budget",
            )
            break
        case = case_of(row["key"]["case_id"])
        if case is None:
            continue
        result = await replayer.replay(row, case)
        replayed += result.replayed
        problem = result.problem
        if problem is None:
            continue
        if not result.replayed:  # why the row could not be replayed
            report.add(
                file, problem.message, rank=_RANKS.get(problem.kind, Rank.REFERENCE), code=problem.code, line=line
            )
            continue
        mismatches += 1
        if mismatches <= _MAX_LISTED:
            rank = _RANKS.get(problem.kind, Rank.INTEGRITY)
            report.add(file, problem.message, rank=rank, code=problem.code, line=line, pointer=problem.pointer)
    if mismatches > _MAX_LISTED:
        report.add(
            file,
            f"{mismatches - _MAX_LISTED} more {stage.name} rows do not replay as recorded",
            rank=Rank.INTEGRITY,
            code="replay-mismatch",
        )
    return replayed
