"""Conditions applied, or refused: which stage places a condition, and whether what it sent carried it.

A run compares conditions (defenses, prompt framings), so a condition no stage
applied would make a comparison of identical prompts look like a defense
effect. Each stage declares the placements it applies (``Stage.applies``); the
engine refuses a plan with a condition whose placement no planned stage
applies (:func:`unapplied_conditions`), records a digest of every prompt each
stage sends, and makes the row an error row when a stage that applies the
condition's placement sent a prompt without its text (:class:`PromptWatch`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..components import Endpoint, Stage
from ..engine.messages import ChatRequest, ChatResponse
from ..extensions import is_extension_name

__all__ = ["MAX_PROMPTS_RECORDED", "PromptWatch", "applies", "condition_text", "unapplied_conditions"]

#: Prompts a row records (an agent loop's calls are bounded by its budget; this bounds the row whatever it is).
MAX_PROMPTS_RECORDED = 1024


def condition_text(policy: Mapping[str, Any]) -> str:
    """The text a condition places (empty for one that places nothing)."""
    if policy.get("placement", "none") == "none":
        return ""
    return str(policy.get("text") or "")


def applies(stage: Stage, placement: str) -> bool:
    """Whether ``stage`` applies a condition placed at ``placement``.

    A plugin's own placement (an extension name, spec 1.2) is applied by the
    stages of its namespace, as that placement's definition says, and by any
    stage that lists it.
    """
    if placement in stage.applies:
        return True
    return is_extension_name(placement) and stage.name.startswith(placement.split(".", 1)[0] + ".")


def unapplied_conditions(conditions: Sequence[tuple[str, Mapping[str, Any]]], stages: Sequence[Stage]) -> list[str]:
    """One line per condition (id, policy) that places text no planned stage applies."""
    problems = []
    for condition, policy in conditions:
        placement = str(policy.get("placement", "none"))
        if placement == "none" or (not condition_text(policy) and not is_extension_name(placement)):
            continue
        if not any(applies(stage, placement) for stage in stages):
            declared = "; ".join(f"{s.name} applies {', '.join(s.applies) or 'none'}" for s in stages)
            problems.append(
                f"condition {condition!r} is placed at {placement}, and no planned stage applies that placement "
                f"({declared}): a run of it would compare prompts the condition never reached"
            )
    return problems


def _digest(messages: Sequence[Mapping[str, Any]]) -> str:
    text = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _carries(messages: Sequence[Mapping[str, Any]], text: str) -> bool:
    return any(isinstance(m, Mapping) and text in str(m.get("content") or "") for m in messages)


class PromptWatch:
    """The endpoint one work item's stages call, as the engine watches it: each request's digest, by stage, and
    whether it carried the condition's text."""

    def __init__(self, inner: Endpoint, policy: Mapping[str, Any], applying: frozenset[str]) -> None:
        self.inner = inner
        self.text = condition_text(policy)
        self.placement = str(policy.get("placement", "none"))
        self.applying = applying  # the planned stages that apply this condition's placement
        self.sent: list[dict[str, Any]] = []
        #: stage -> [prompts sent, prompts carrying the condition's text], for the stages that apply it.
        self.counts: dict[str, list[int]] = {}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Record the request, then send it."""
        stage = str(request.context.get("stage") or "")
        entry: dict[str, Any] = {"stage": stage, "sha256": _digest(request.messages)}
        # A prompt placement is checked here; a plugin's own placement (text inside a tool's output, say) is its
        # stages' to place, where the engine cannot see it in the prompt.
        if stage in self.applying and self.text and not is_extension_name(self.placement):
            carried = _carries(request.messages, self.text)
            entry["condition_applied"] = carried
            counts = self.counts.setdefault(stage, [0, 0])
            counts[0] += 1
            counts[1] += carried
        if len(self.sent) < MAX_PROMPTS_RECORDED:
            self.sent.append(entry)
        return await self.inner.complete(request)

    def errors(self, condition: str) -> list[dict[str, Any]]:
        """An error per stage that applies the condition's placement and sent prompts, none with its text (a
        stage of two phases may apply it to one of them)."""
        return [
            {
                "stage": stage,
                "type": "condition_not_applied",
                "message": f"the {stage} stage applies {self.placement} conditions and sent {sent} prompt"
                f"{'s' if sent != 1 else ''}, none with condition {condition}'s text: a condition that was not "
                "applied is an error, not a result",
            }
            for stage, (sent, carried) in sorted(self.counts.items())
            if sent and not carried
        ]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
