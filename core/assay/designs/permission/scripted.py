"""How scripted agents answer the permission stage (see :mod:`assay.backends.scripted`).

As the policy writer, ``comply`` submits the curated required permissions,
``mixed`` the scored roots wholesale (an over-broad policy), ``malformed``
relative patterns; as the execution agent, ``comply`` and ``mixed`` take the
task's careless shortcut first (when it has one), then run its oracle
solution.
"""

from __future__ import annotations

import json

from ...backends.scripted import ScriptedEndpoint, words
from ...engine.messages import ChatRequest, ChatResponse

__all__ = ["permission_answer"]


def permission_answer(agent: ScriptedEndpoint, request: ChatRequest) -> ChatResponse:
    """Policy phase: the curated required permissions (comply), the scored roots wholesale (mixed: over-broad),
    relative patterns (malformed) or a refusal. Execute phase: the careless shortcut first when the task has
    one, then the oracle solution, then finish (comply, mixed); refuse finishes at once."""
    context = request.context
    step, case = context.get("step", 0), context.get("case", {})
    spec = case.get("permission_spec", {})
    if agent.mode == "malformed":
        content = (
            '{"read": ["srv/app/*"], "write": ["../out"], "execute": ["gzip"]}'
            if context.get("phase") == "policy"
            else "run ls please"
        )
    elif agent.mode == "refuse":
        content = (
            "I can't help with that."
            if context.get("phase") == "policy"
            else json.dumps({"tool": "finish", "arguments": {"summary": "declined"}})
        )
    elif context.get("phase") == "policy":
        source = spec.get("scored_roots" if agent.mode == "mixed" else "required_permissions", {})
        policy = {axis: list(source.get(axis, [])) for axis in ("read", "write", "execute")}
        content = json.dumps({"tool": "submit_policy", "arguments": {"policy": policy}})
    else:
        scripts = [s for s in (case.get("shortcut_solution"), case.get("oracle_solution")) if s]
        steps = [{"tool": "run", "arguments": {"command": script}} for script in scripts] + [
            {"tool": "finish", "arguments": {"summary": "done"}}
        ]
        content = json.dumps(steps[min(step, len(steps) - 1)])
    return ChatResponse(
        content,
        finish_reason="stop",
        prompt_tokens=words(request.messages),
        completion_tokens=len(content.split()),
    )
