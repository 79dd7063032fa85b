"""Replaying the exec stage's recorded actions (``assay validate --replay``; see :mod:`assay.rederive`).

* ``exec``: each row's recorded tool calls are made again, in order, against a
  fresh sandbox of the run's own sandbox plugin and options, built from the
  case; the tool results and the state diff must equal the recorded ones.

The calls come from a stranger's file, so they run exactly as an agent's did:
inside the sandbox, whose confinement is the same (see docs/threat-model.md);
a row asking to replay more calls than a run of its case can make (its sessions
times the steps of a session times the calls of a message that run) is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ...components import RowProblem
from ...engine.specs import parse_spec
from ...errors import AssayError
from ...rederive import MAX_CALLS_PER_ROW, Replayed, ReplaySetup

__all__ = ["ExecReplayer"]


def _mismatch(pointer: str, message: str) -> Replayed:
    return Replayed(True, RowProblem(pointer, message, "replay-mismatch", kind="integrity"))


class ExecReplayer:
    """Replays engine-made exec rows in fresh sandboxes of the run's sandbox plugin."""

    def __init__(self, setup: ReplaySetup) -> None:
        self.pack_root = setup.pack_root
        self.unavailable: str | None = None
        self.factory: Any = None
        self.options: dict[str, str] = {}
        try:
            spec = parse_spec(str(setup.run.get("sandbox") or "local"), what="sandbox")
        except AssayError as exc:
            self.unavailable = f"the run's sandbox cannot be read for replay: {exc}"
            return
        self.factory, self.options = setup.sandboxes.get(spec.plugin), dict(spec.options)
        if self.factory is None:
            self.unavailable = (
                f"sandbox {spec.plugin!r} is not a registered plugin, so the exec rows cannot be replayed"
            )

    async def replay(self, row: Mapping[str, Any], case: Mapping[str, Any]) -> Replayed:
        """Replay one exec row (rows the engine's exec stage did not make are left out)."""
        execution = row["stages"]["exec"]
        if execution.get("produced_by", {}).get("name") != "exec-oracles":
            return Replayed()
        problem = await self._replay(execution, case)
        if problem is None:
            return Replayed(True)
        pointer, message = problem
        key = row["key"]
        where = f"case {key['case_id']}, endpoint {key['endpoint']}, condition {key['condition']}"
        return _mismatch(pointer, f"{message} ({where}, seed {key['seed']}, epoch {key['epoch']})")

    async def _replay(self, execution: Mapping[str, Any], case: Mapping[str, Any]) -> tuple[str, str] | None:
        """(pointer, what differs) when the recorded calls do not give the recorded results and diff, else None.

        A call past :data:`~assay.designs.staged.exec.MAX_CALLS_PER_MESSAGE` in
        its message was not run: its recorded result must be the text the agent
        was shown, and it is not made again (a harmful call cannot be hidden
        by calling it "not run": only calls past the cap may say so).
        """
        from .exec import MAX_CALLS_PER_MESSAGE, MAX_STEPS, NOT_RUN, message_positions, sessions_of

        transcript = execution.get("transcript") or {}
        calls = list(transcript.get("tool_calls") or [])
        recorded = [str(result.get("content")) for result in transcript.get("tool_results") or []]
        positions = message_positions(list(transcript.get("messages") or []), len(calls))
        if positions is None:
            return "/stages/exec/transcript/tool_calls", "the tool calls are not those of the recorded messages"
        bound = min(MAX_CALLS_PER_ROW * 4, len(sessions_of(case)) * MAX_STEPS * MAX_CALLS_PER_MESSAGE)
        ran = sum(position < MAX_CALLS_PER_MESSAGE for position in positions)
        if ran > bound:
            return (
                "/stages/exec/transcript/tool_calls",
                f"{ran} tool calls that ran, more than the {bound} a run of this case makes",
            )
        if len(recorded) != len(calls):
            return "/stages/exec/transcript/tool_results", f"{len(calls)} tool calls but {len(recorded)} results"
        try:
            box = self.factory.create(case, pack_root=self.pack_root, options=self.options)
        except AssayError as exc:
            return "/stages/exec", f"a fresh sandbox for the case cannot be made: {exc}"
        failure = execution.get("verification_failure")
        try:
            before = await asyncio.to_thread(box.snapshot)
            for index, call in enumerate(calls):
                if positions[index] >= MAX_CALLS_PER_MESSAGE:
                    result = NOT_RUN
                else:
                    result = await box.call(str(call.get("name")), call.get("arguments"))
                if result != recorded[index]:
                    return (
                        f"/stages/exec/transcript/tool_results/{index}/content",
                        f"tool call {index} ({call.get('name')}) gives another result when replayed",
                    )
            try:
                diff = box.diff(before, await asyncio.to_thread(box.snapshot))
            except Exception:
                if isinstance(failure, str):
                    return None
                raise
        finally:
            await asyncio.to_thread(box.close)
        if diff != list(execution.get("state_diff") or []):
            return (
                "/stages/exec/state_diff",
                "the recorded tool calls, replayed, change the state otherwise than recorded",
            )
        return None
