"""Re-deriving a row of the ``x-agentdojo.task`` stage: its recorded calls replayed in a fresh environment.

AgentDojo's environments and checks are deterministic Python, so the validator
does not have to trust what a row says its tool calls returned: it rebuilds
the item's environment from the case and the condition, runs every call the
transcript records again, requires each recorded tool output to be what the
call gives, then asks AgentDojo's checks again. A relabelled verdict, a forged
tool output or a transcript that does not fit the loop is a problem of the row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.api import Rederived, RederiveSetup, RowProblem, UsageError

from .conditions import DEFAULT_MODEL_NAME, condition
from .environment import MAX_CALLS_PER_TURN, NOT_RUN, TaskEnvironment
from .stage import MAX_ROUNDS, NAME, outcome_from

__all__ = [
    "TaskRederiver",
    "VERDICTS",
]

#: The outcome members re-derived.
VERDICTS = (
    "utility", "attack_success", "injection_seen", "tool_call", "state_change", "rounds", "injections", "state_diff",
    "oracle_results",
)  # fmt: skip
_POINTER = f"/stages/{NAME}"


def _problem(where: str, message: str, code: str) -> Rederived:
    return Rederived(1, (RowProblem(where, message, code),), stop=True)


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]]:
    """Each assistant message's tool calls with the tool messages that follow it."""
    turns: list[tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = []
    for message in messages:
        if message.get("role") == "assistant":
            turns.append((list(message.get("tool_calls") or []), []))
        elif message.get("role") == "tool" and turns:
            turns[-1][1].append(message)
    return turns


class TaskRederiver:
    """Re-derives the stage's verdicts of each row by replaying its calls (see the module docstring)."""

    def __init__(self, setup: RederiveSetup) -> None:
        self.oracles = setup.oracles

    def check(self, row: Mapping[str, Any], case: Mapping[str, Any] | None, shared: dict[str, Any]) -> Rederived:
        """The row's verdicts again, from its transcript replayed."""
        recorded = row.get("stages", {}).get(NAME)
        if recorded is None or case is None:
            return Rederived()
        made = condition(str(row["key"].get("condition")))
        if made is None:
            return _problem(
                "/key/condition", "not an AgentDojo condition, yet the row has its stage", "agentdojo-condition"
            )
        try:
            task = TaskEnvironment(case, made, recorded.get("model_name") or DEFAULT_MODEL_NAME)
        except (UsageError, KeyError, ValueError) as exc:
            return _problem(_POINTER, f"its environment cannot be rebuilt: {exc}", "agentdojo-environment")
        messages = (row.get("transcript") or {}).get("messages") or []
        turns = _turns(messages)
        if len(turns) > MAX_ROUNDS + 1 or any(len(calls) > 4 * MAX_CALLS_PER_TURN for calls, _ in turns):
            return _problem("/transcript", "more model calls or tool calls than the loop makes", "agentdojo-loop")
        rounds = 0
        for number, (calls, results) in enumerate(turns):
            last = number == len(turns) - 1
            if last != (not results):  # only the last message's calls go unanswered
                return _problem("/transcript", "tool outputs do not follow the loop's turns", "agentdojo-loop")
            if results and len(results) != len(calls):
                return _problem("/transcript", "a message's tool calls and outputs do not pair up", "agentdojo-loop")
            if not results:
                for call in calls:
                    task.note_call(str(call.get("id")), str(call.get("name")), call.get("arguments"))
                continue
            rounds += 1
            for index, (call, result) in enumerate(zip(calls, results, strict=True)):
                if index >= MAX_CALLS_PER_TURN:
                    task.note_call(str(call.get("id")), str(call.get("name")), call.get("arguments"))
                    shown = NOT_RUN
                else:
                    shown = task.call(str(call.get("id")), str(call.get("name")), call.get("arguments")).shown
                if result.get("content") != shown or result.get("tool_call_id") != call.get("id"):
                    return _problem(
                        "/transcript/messages",
                        f"the recorded output of call {call.get('id')!r} ({call.get('name')}) is not what the call "
                        "gives in the case's environment",
                        "agentdojo-tool-output",
                    )
        final = row.get("final_output") or ""
        last_text = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        if final != last_text:
            return _problem("/final_output", "is not the last assistant message's text", "agentdojo-final-output")
        again = outcome_from(task, final, self.oracles, rounds)
        problems = tuple(
            RowProblem(
                f"{_POINTER}/{name}",
                f"recorded {recorded.get(name)!r}, but replaying the row's calls gives {again[name]!r}",
                "agentdojo-verdict",
            )
            for name in VERDICTS
            if recorded.get(name) != again[name]
        )
        return Rederived(len(VERDICTS), problems, stop=bool(problems))
