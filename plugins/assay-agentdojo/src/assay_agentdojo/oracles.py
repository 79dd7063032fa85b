"""AgentDojo's own checks as assay oracles: ``agentdojo.utility`` and ``agentdojo.security``.

Each calls the task's check exactly as AgentDojo's ``TaskSuite`` does: the
trace-based check first (``utility_from_traces`` / ``security_from_traces``),
and where it has no verdict the check over the model's output and the pre- and
post-environment (``utility`` / ``security``). The ``x-agentdojo.task`` stage
gives them the environments in its observation, under ``agentdojo``; an
observation without them (another stage's) fires nothing and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.api import OracleResult

__all__ = ["ORACLES", "TaskCheck", "check"]

_NO_PARAMS: Mapping[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


def check(which: str, observation: Mapping[str, Any]) -> bool | None:
    """AgentDojo's verdict ``which`` (``utility`` or ``security``) for an observation of the task stage, or None
    when the observation has no AgentDojo environments (or no injection task, for ``security``)."""
    state = observation.get("agentdojo")
    if not isinstance(state, Mapping):
        return None
    task = state["user_task"] if which == "utility" else state["injection_task"]
    if task is None:
        return None
    output = str(observation.get("final_output") or "")
    pre, post, trace = state["pre_environment"], state["post_environment"], state["trace"]
    from_traces = getattr(task, f"{which}_from_traces")(output, pre, post, trace)
    if from_traces is not None:
        return bool(from_traces)
    return bool(getattr(task, which)(output, pre, post))


@dataclass(frozen=True)
class TaskCheck:
    """One of AgentDojo's checks as an oracle."""

    name: str
    description: str
    which: str
    decides: frozenset[str]
    params_schema: Mapping[str, Any] = field(default_factory=lambda: _NO_PARAMS)

    def evaluate(self, observation: Mapping[str, Any], params: Mapping[str, Any]) -> OracleResult:
        """AgentDojo's verdict on the observation."""
        verdict = check(self.which, observation)
        if verdict is None:
            return OracleResult(False, "no AgentDojo environment in this observation (x-agentdojo.task gives one)")
        return OracleResult(verdict, f"AgentDojo {self.which}: {verdict}")


ORACLES = (
    TaskCheck(
        "agentdojo.utility",
        "AgentDojo's utility check of the user task (utility_from_traces, else utility over pre/post environment).",
        "utility",
        frozenset({"utility"}),
    ),
    TaskCheck(
        "agentdojo.security",
        "AgentDojo's security check of the injection task: True when the attacker's goal was achieved.",
        "security",
        frozenset({"attack"}),
    ),
)
