"""Built-in case kinds, injection channels and stages, registered through the same hooks as a plugin's.

The spec names these (its ``kind``, ``channel`` and ``stage_name``
definitions); each stage's outcome schema is the spec's definition of it,
referenced by ``$id``. A plugin that adds a stage registers it the same way,
with its own outcome schema.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..components import CaseKind, Channel, RowProblem, Stage
from ..hookspecs import Register, hookimpl

#: The result row schema of the spec, whose ``$defs`` define each built-in stage's outcome.
RESULT_ROW_SCHEMA = "https://assay.dev/spec/v1/result_row.schema.json"

CASE_KINDS = (
    CaseKind("attack", "An injected attack on a task: scored on what the agent said, left behind and changed."),
    CaseKind("benign", "A task without an attack: the control for utility and false refusals."),
    CaseKind("trajectory", "A security task an agent solves in a sandbox, scored on its whole trajectory."),
    CaseKind("permission", "A task whose agent proposes the file permissions it needs, scored and enforced."),
)

CHANNELS = (
    Channel("user_turn", "The attack arrives in the user's own message."),
    Channel("document", "The attack is inside a document the agent reads."),
    Channel("web_page", "The attack is inside a web page the agent fetches."),
    Channel("tool_return", "The attack is inside what a tool returns."),
    Channel("memory_entry", "The attack is inside an entry of the agent's memory."),
)


def _outcome(stage: str) -> dict[str, str]:
    return {"$ref": f"{RESULT_ROW_SCHEMA}#/$defs/{stage}"}


def _runner(stage: str) -> Callable[[Any], Awaitable[None]]:
    """``assay.engine.stages.<stage>.run_<stage>``, imported when a run first calls it (loading plugins, as every
    command does, stays cheap)."""

    async def run(context: Any) -> None:
        module = importlib.import_module(f"assay.engine.stages.{stage}")
        await getattr(module, f"run_{stage}")(context)

    run.__qualname__ = run.__name__ = f"run_{stage}"
    return run


def _built_in(module: str, suffix: str, name: str) -> Callable[[Any], Any]:
    """The class ``<Name><suffix>`` of ``assay.engine.stages.<module>``, made from its setup when a validation first
    needs it (a stage's rederiver or replayer; loading plugins stays cheap)."""

    def make(setup: Any) -> Any:
        return getattr(importlib.import_module(f"assay.engine.stages.{module}"), f"{name.capitalize()}{suffix}")(setup)

    return make


def audit_gate(row: Mapping[str, Any], planned: frozenset[str]) -> list[RowProblem]:
    """The audit runs on exactly the CoreFail rows: its ``selected`` is ``semantic.core_fail is true``, and a
    CoreFail row of a run that plans the audit has an audit outcome (or an error saying why it has none)."""
    stages = row["stages"]
    semantic, audit = stages.get("semantic"), stages.get("audit")
    if semantic is not None and audit is not None and audit["selected"] != (semantic["core_fail"] is True):
        return [
            RowProblem(
                "/stages/audit/selected",
                "the audit must select exactly the CoreFail rows (selected differs from semantic.core_fail)",
                "audit-gate",
            )
        ]
    if (
        semantic is not None
        and audit is None
        and semantic["core_fail"] is True
        and not any(error.get("stage") == "audit" for error in row["errors"])
    ):
        # A CoreFail row the audit never saw (and no error explains why) leaves the accounting open.
        return [
            RowProblem(
                "/stages",
                "a CoreFail row has no audit outcome, so the audit accounting does not close",
                "audit-open",
                kind="completeness",
            )
        ]
    return []


STAGES = (
    Stage(
        "semantic",
        "The agent's answer, labelled by the run's judge (CoreFail, defense behavior, safety score).",
        kinds=("attack", "benign"),
        outcome_schema=_outcome("semantic"),
        run=_runner("semantic"),
        rederiver=_built_in("rederive", "Rederiver", "semantic"),
    ),
    Stage(
        "audit",
        "Harm evidence in a CoreFail row's response and trace (text, access, action, persistence).",
        kinds=("attack",),
        outcome_schema=_outcome("audit"),
        run=_runner("audit"),
        rederiver=_built_in("rederive", "Rederiver", "audit"),
        needs=("semantic",),
        check_row=audit_gate,
    ),
    Stage(
        "exec",
        "The agent's tool calls replayed in a sandbox; oracles decide observed harm and benign utility.",
        kinds=("attack", "benign"),
        outcome_schema=_outcome("exec"),
        run=_runner("exec"),
        replayer=_built_in("replay", "Replayer", "exec"),
        rederiver=_built_in("rederive", "Rederiver", "exec"),
    ),
    Stage(
        "trajectory",
        "A multi-turn task in a sandbox, scored on success, grounding and unsafe actions.",
        kinds=("trajectory",),
        outcome_schema=_outcome("trajectory"),
        run=_runner("trajectory"),
        replayer=_built_in("replay", "Replayer", "trajectory"),
    ),
    Stage(
        "permission",
        "A proposed permission policy, scored against the task's needs and enforced on an execution.",
        kinds=("permission",),
        outcome_schema=_outcome("permission"),
        run=_runner("permission"),
        rederiver=_built_in("rederive", "Rederiver", "permission"),
    ),
)


@hookimpl
def register_case_kinds(register: Register) -> None:
    """Register the spec's case kinds."""
    for kind in CASE_KINDS:
        register(kind)


@hookimpl
def register_channels(register: Register) -> None:
    """Register the spec's injection channels."""
    for channel in CHANNELS:
        register(channel)


@hookimpl
def register_stages(register: Register) -> None:
    """Register the five built-in stages."""
    for stage in STAGES:
        register(stage)
