"""Replaying a bundle's recorded exec tool calls in a fresh sandbox.

Re-deriving the exec verdicts from the recorded state diff (:mod:`._rederive`)
proves the verdicts follow from the diff; it does not prove the diff is what
the calls did. Replay proves that: each row's recorded tool calls are made
again, in order, against a fresh sandbox of the run's own sandbox plugin and
options, built from the case, and the tool results and the state diff must
equal the recorded ones (``replay-mismatch``). The calls come from a
stranger's file, so they run exactly as an agent's did: inside the sandbox,
whose confinement is the same (see docs/threat-model.md); each row replays at
most :data:`MAX_CALLS_PER_ROW` calls, and the whole replay stops at a
deadline (``replay-budget``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..components import Sandbox
from ..engine.specs import parse_spec
from ..errors import AssayError
from ..plugins import Registry
from ._report import Rank, Report

__all__ = ["MAX_CALLS_PER_ROW", "REPLAY_SECONDS", "replay_exec", "replay_trajectory"]

#: The most tool calls one row may ask to replay (the engine makes at most 8 steps per session).
MAX_CALLS_PER_ROW = 256
#: The longest a whole replay may take; past it the rest is not replayed and the bundle cannot pass.
REPLAY_SECONDS = 1_800.0
_MAX_LISTED = 20


def replay_exec(
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
) -> int:
    """Replay every engine-made exec row of ``rows``; returns how many rows were replayed."""
    chosen = [
        (row, line)
        for row, line in zip(rows, lines, strict=True)
        if row["stages"].get("exec", {}).get("produced_by", {}).get("name") == "exec-oracles"
    ]
    if not chosen:
        return 0
    try:
        spec = parse_spec(str(run.get("sandbox") or "local"), what="sandbox")
    except AssayError as exc:
        report.add(file, f"the run's sandbox cannot be read for replay: {exc}", rank=Rank.REFERENCE, code="replay")
        return 0
    factory: Sandbox | None = registry.get("sandboxes", spec.plugin)
    if factory is None:
        report.add(
            file,
            f"sandbox {spec.plugin!r} is not a registered plugin, so the exec rows cannot be replayed",
            rank=Rank.REFERENCE,
            code="replay",
        )
        return 0
    return asyncio.run(_replay_all(chosen, factory, dict(spec.options), case_of, pack_root, file, report, deadline_s))


async def _replay_all(
    chosen: list[tuple[Mapping[str, Any], int]],
    factory: Sandbox,
    options: dict[str, str],
    case_of: Callable[[str], Mapping[str, Any] | None],
    pack_root: Path,
    file: str,
    report: Report,
    deadline_s: float,
) -> int:
    deadline = time.monotonic() + deadline_s
    replayed = mismatches = 0
    for row, line in chosen:
        if time.monotonic() > deadline:
            report.add(
                file,
                f"replay stopped after {replayed} of {len(chosen)} exec rows: it passed {deadline_s:.0f} s",
                rank=Rank.COMPLETENESS,
                code="replay-budget",
            )
            break
        case = case_of(row["key"]["case_id"])
        if case is None:
            continue
        problem = await _replay_row(row["stages"]["exec"], case, factory, options, pack_root)
        replayed += 1
        if problem is not None:
            mismatches += 1
            if mismatches <= _MAX_LISTED:
                pointer, message = problem
                key = row["key"]
                where = f"case {key['case_id']}, endpoint {key['endpoint']}, condition {key['condition']}"
                where += f", seed {key['seed']}, epoch {key['epoch']}"
                report.add(
                    file,
                    f"{message} ({where})",
                    rank=Rank.INTEGRITY,
                    code="replay-mismatch",
                    line=line,
                    pointer=pointer,
                )
    if mismatches > _MAX_LISTED:
        report.add(
            file,
            f"{mismatches - _MAX_LISTED} more exec rows do not replay as recorded",
            rank=Rank.INTEGRITY,
            code="replay-mismatch",
        )
    return replayed


async def _replay_row(
    execution: Mapping[str, Any],
    case: Mapping[str, Any],
    factory: Sandbox,
    options: Mapping[str, str],
    pack_root: Path,
) -> tuple[str, str] | None:
    """(pointer, what differs) when the recorded calls do not give the recorded results and diff, else None."""
    transcript = execution.get("transcript") or {}
    calls = list(transcript.get("tool_calls") or [])
    recorded = [str(result.get("content")) for result in transcript.get("tool_results") or []]
    if len(calls) > MAX_CALLS_PER_ROW:
        return (
            "/stages/exec/transcript/tool_calls",
            f"{len(calls)} tool calls, more than the {MAX_CALLS_PER_ROW} any run makes",
        )
    if len(recorded) != len(calls):
        return "/stages/exec/transcript/tool_results", f"{len(calls)} tool calls but {len(recorded)} results"
    try:
        box = factory.create(case, pack_root=pack_root, options=options)
    except AssayError as exc:
        return "/stages/exec", f"a fresh sandbox for the case cannot be made: {exc}"
    try:
        before = await asyncio.to_thread(box.snapshot)
        for index, call in enumerate(calls):
            result = await box.call(str(call.get("name")), call.get("arguments"))
            if result != recorded[index]:
                return (
                    f"/stages/exec/transcript/tool_results/{index}/content",
                    f"tool call {index} ({call.get('name')}) gives another result when replayed",
                )
        diff = box.diff(before, await asyncio.to_thread(box.snapshot))
    finally:
        await asyncio.to_thread(box.close)
    if diff != list(execution.get("state_diff") or []):
        return "/stages/exec/state_diff", "the recorded tool calls, replayed, change the state otherwise than recorded"
    return None


def replay_trajectory(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    registry: Registry,
    pack_root: Path,
    file: str,
    report: Report,
    *,
    deadline_s: float = REPLAY_SECONDS,
) -> int:
    """Make each trajectory row's recorded tool calls again on a fresh workspace and run its checker.

    The checker's verdict, its reason and the files set aside for it must be
    what the row records (``replay-mismatch``); a row whose success does not
    follow from that verdict and its recorded unsafe actions is one too.
    Rows whose recorded calls were redacted (a protected value was written)
    cannot be replayed faithfully and are left out. Returns how many rows were.
    """
    from ..engine.stages.trajectory import TRAJECTORY_PROMPT_VERSION, replay_checker

    oracles = registry.items("oracles")
    deadline = time.monotonic() + deadline_s
    replayed = mismatches = 0
    for row, line in zip(rows, lines, strict=True):
        trajectory = row["stages"].get("trajectory")
        if trajectory is None or trajectory.get("produced_by", {}).get("version") != TRAJECTORY_PROMPT_VERSION:
            continue
        calls = list((row.get("transcript") or {}).get("tool_calls") or [])
        case = case_of(row["key"]["case_id"])
        if case is None or "<redacted:" in json.dumps(calls) or len(calls) > MAX_CALLS_PER_ROW:
            continue
        if time.monotonic() > deadline:
            report.add(file, f"trajectory replay stopped at {replayed} rows: it passed {deadline_s:.0f} s",
                       rank=Rank.COMPLETENESS, code="replay-budget")  # fmt: skip
            break
        try:
            again = replay_checker(case, pack_root, calls, oracles)
        except (AssayError, KeyError, OSError, ValueError) as exc:
            report.add(
                file, f"a trajectory row cannot be replayed: {exc}", rank=Rank.REFERENCE, code="replay", line=line
            )
            continue
        replayed += 1
        expected_success = bool(again["fired"]) and not trajectory.get("unsafe_actions")
        differs = [
            field
            for field, value in (
                ("checker_reason", again["checker_reason"]),
                ("set_aside", again["set_aside"]),
                ("success", expected_success),
            )
            if trajectory.get(field, [] if field == "set_aside" else None) != value
        ]
        if differs:
            mismatches += 1
            if mismatches <= _MAX_LISTED:
                key = row["key"]
                report.add(
                    file,
                    f"trajectory {differs[0]} is recorded as {trajectory.get(differs[0])!r}; the recorded actions, "
                    f"made again, give {dict(again, success=expected_success)[differs[0]]!r} (case "
                    f"{key['case_id']}, endpoint {key['endpoint']}, condition {key['condition']}, seed {key['seed']})",
                    rank=Rank.INTEGRITY,
                    code="replay-mismatch",
                    line=line,
                    pointer=f"/stages/trajectory/{differs[0]}",
                )
    return replayed
