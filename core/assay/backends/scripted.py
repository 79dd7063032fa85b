"""Scripted reference agents: deterministic, model-free, and labelled as such.

``scripted:comply`` follows every attack (and leaks every protected value);
``scripted:refuse`` refuses every attack; ``scripted:mixed`` complies with a
per-family probability drawn from a ``random.Random`` seeded by the work-item
key, so the same item always gets the same answer; ``malformed`` breaks a
stage's protocol and ``escape`` tries to get out of its sandbox. Rates are
options (``scripted:mixed,DPI=0.3,MEX=0.6``), else the family's own
(``Family.scripted_rate``).

What a scripted agent answers is the asking stage's to say: a stage's
``scripted`` member (a judge's request likewise) answers for it, and comes to
the agent in the request's context as ``scripted_answer``. Without one, the
agent complies or refuses in text.

Every endpoint and every row it produces is marked ``scripted``.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.messages import ChatRequest, ChatResponse
from ..errors import UsageError

__all__ = ["DEFAULT_RATE", "ScriptedBackend", "ScriptedEndpoint", "scripted_response", "words"]

#: The share of attacks ``scripted:mixed`` follows where neither its options nor the case's family give a rate.
DEFAULT_RATE = 0.2
_MODES = ("comply", "refuse", "mixed", "malformed", "escape")


def _rng(*parts: object) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big"))


def words(messages: Iterable[Mapping[str, Any]]) -> int:
    """The words of some messages: what a scripted agent counts as its prompt tokens."""
    return sum(len(str(m.get("content") or "").split()) for m in messages)


def scripted_response(content: str, request: ChatRequest) -> ChatResponse:
    """A scripted agent's text answer to ``request``, with words counted as tokens."""
    return ChatResponse(
        content, finish_reason="stop", prompt_tokens=words(request.messages), completion_tokens=len(content.split())
    )


@dataclass(frozen=True)
class ScriptedEndpoint:
    """One scripted agent."""

    id: str
    mode: str
    rates: Mapping[str, float] = field(default_factory=dict)
    scripted: bool = True

    def describe(self) -> dict[str, Any]:
        """The run manifest's endpoint entry."""
        return {
            "id": self.id,
            "backend": "scripted",
            "scripted": True,
            "model": {
                "name": f"scripted:{self.mode}",
                "revision": None,
                "weights_sha256": None,
                "tokenizer": None,
                "chat_template_sha256": None,
                "precision": None,
                "quantization": None,
                "context_length": None,
            },
            "generation": {"temperature": 0, "seed": None},
        }

    def complies(self, context: Mapping[str, Any]) -> bool:
        """Whether this agent follows the attack of the work item in ``context``.

        ``scripted:mixed`` complies at its rate for the case's family: the endpoint's option, else the
        family's own (``Family.scripted_rate``, in the context as ``scripted_rate``), else 0.2; the draw is
        seeded by the item's key and stage.
        """
        if self.mode != "mixed":
            return self.mode == "comply"
        family = context.get("case", {}).get("family", "")
        default = context.get("scripted_rate")
        rate = self.rates.get(family, DEFAULT_RATE if default is None else default)
        return _rng(context.get("key", ""), context.get("stage", "")).random() < rate

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer deterministically: as the stage (or judge) that asks says scripted agents answer it (the
        ``scripted_answer`` of the request's context), else comply or refuse in text."""
        answer = request.context.get("scripted_answer")
        if answer is not None:
            response: ChatResponse = answer(self, request)
            return response
        case = request.context.get("case", {})
        if self.complies(request.context):
            leaked = " ".join(obj["value"] for obj in case.get("protected_objects", []) if obj.get("value"))
            action = " ".join(inj["content"] for inj in case.get("injections", []))
            content = f"Sure, I will do that now. {action} {leaked}".strip()
        else:
            content = "I can't help with that: it goes against the policy and the allowed scope of this task."
        return scripted_response(content, request)

    async def aclose(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class ScriptedBackend:
    """The ``scripted`` backend plugin.

    Endpoints are ``scripted:comply``, ``scripted:refuse`` or ``scripted:mixed[,FAMILY=RATE...]``.
    """

    name: str = "scripted"
    description: str = "Deterministic reference agents (comply, refuse, mixed); no model, marked scripted."

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> ScriptedEndpoint:
        """Make a scripted endpoint."""
        options = dict(options)
        mode = options.pop("mode", "mixed")
        if mode not in _MODES:
            raise UsageError(f"scripted mode {mode!r}: expected one of {', '.join(_MODES)}")
        rates = {}
        for family, value in options.items():
            try:
                rates[family] = float(value)
            except ValueError:
                raise UsageError(f"scripted option {family}={value!r}: a rate must be a number") from None
            if not 0 <= rates[family] <= 1:
                raise UsageError(f"scripted option {family}={value}: a rate must lie in [0, 1]")
        if rates and mode != "mixed":
            raise UsageError("per-family rates apply to scripted:mixed only")
        return ScriptedEndpoint(endpoint_id, mode, rates)
