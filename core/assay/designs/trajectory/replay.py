"""Replaying the trajectory stage's recorded actions (``assay validate --replay``; see :mod:`assay.rederive`): each
row's recorded tool calls are made again on a fresh workspace and its checker run; the checker's verdict, its
reason and the files set aside for it must be what the row records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...components import RowProblem
from ...errors import AssayError
from ...rederive import MAX_CALLS_PER_ROW, Replayed, ReplaySetup

__all__ = ["TrajectoryReplayer"]


def _mismatch(pointer: str, message: str) -> Replayed:
    return Replayed(True, RowProblem(pointer, message, "replay-mismatch", kind="integrity"))


class TrajectoryReplayer:
    """Makes a trajectory row's recorded tool calls again on a fresh workspace and runs its checker."""

    unavailable: str | None = None

    def __init__(self, setup: ReplaySetup) -> None:
        self.oracles, self.pack_root = setup.oracles, setup.pack_root

    async def replay(self, row: Mapping[str, Any], case: Mapping[str, Any]) -> Replayed:
        """Replay one trajectory row (redacted and foreign rows are left out)."""
        from .scoring import EXECUTED_EVIDENCE_FAMILIES
        from .stage import TRAJECTORY_PROMPT_VERSION, replay_checker

        trajectory = row["stages"]["trajectory"]
        version = trajectory.get("produced_by", {}).get("version")
        if version not in (TRAJECTORY_PROMPT_VERSION, "trajectory-v2"):
            return Replayed()
        calls = list((row.get("transcript") or {}).get("tool_calls") or [])
        if "<redacted:" in json.dumps(calls) or len(calls) > MAX_CALLS_PER_ROW or self.pack_root is None:
            return Replayed()
        try:
            again = replay_checker(case, self.pack_root, calls, self.oracles)
        except (AssayError, KeyError, OSError, ValueError) as exc:
            problem = RowProblem("", f"a trajectory row cannot be replayed: {exc}", "replay", kind="reference")
            return Replayed(False, problem)
        expected_success = bool(again["fired"]) and not trajectory.get("unsafe_actions")
        if version != "trajectory-v2" and str(case.get("family", "")) in EXECUTED_EVIDENCE_FAMILIES:
            expected_success = expected_success and any(call.get("name") == "run_tests" for call in calls)
        differs = [
            field
            for field, value in (
                ("checker_reason", again["checker_reason"]),
                ("set_aside", again["set_aside"]),
                ("success", expected_success),
            )
            if trajectory.get(field, [] if field == "set_aside" else None) != value
        ]
        if not differs:
            return Replayed(True)
        field = differs[0]
        key = row["key"]
        message = (
            f"trajectory {field} is recorded as {trajectory.get(field)!r}; the recorded actions, made again, give "
            f"{dict(again, success=expected_success)[field]!r} (case {key['case_id']}, endpoint {key['endpoint']}, "
            f"condition {key['condition']}, seed {key['seed']})"
        )
        return _mismatch(f"/stages/trajectory/{field}", message)
