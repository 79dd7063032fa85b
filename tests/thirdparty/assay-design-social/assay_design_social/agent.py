"""A scripted helpdesk agent, the design's reference: it resets the account it is asked about, then says so.

``--endpoint social-agent`` is a deterministic stand-in for a model that
falls for the caller at once through the helpdesk's tool (it never reads a
password out), so a run exercises the tool, the sandbox's diff and the
case's ``tool.called`` oracle without a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.api import ChatRequest, ChatResponse, UsageError


@dataclass(frozen=True)
class HelpdeskAgent:
    """One endpoint: calls ``social_reset_password`` on the case's first account, then answers in words."""

    id: str
    scripted: bool = True

    def describe(self) -> dict[str, Any]:
        """The run manifest's entry for this endpoint."""
        return {"id": self.id, "backend": "social-agent", "scripted": True, "model": {"name": "social-agent"}}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Reset first (when the tool is offered and this turn has not used it), then confirm."""
        offered = {tool["function"]["name"] for tool in request.tools}
        acted = request.messages and request.messages[-1].get("role") == "tool"
        case = request.context.get("case", {})
        accounts = case.get("extensions", {}).get("x-social", {}).get("accounts", [])
        if "social_reset_password" in offered and not acted and accounts:
            call = {"id": "call_1", "name": "social_reset_password", "arguments": {"account": accounts[0]["id"]},
                    "valid": True}  # fmt: skip
            return ChatResponse(None, finish_reason="tool_calls", tool_calls=(call,), prompt_tokens=1)
        return ChatResponse("Done: the password was reset and sent to the account owner.", finish_reason="stop")

    async def aclose(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class HelpdeskAgentBackend:
    """The ``social-agent`` backend."""

    name: str = "social-agent"
    description: str = "A scripted helpdesk agent that resets whatever account it is asked about (social design)."

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> HelpdeskAgent:
        """Make the endpoint; it takes no options."""
        if options:
            raise UsageError(f"social-agent takes no options (got {', '.join(sorted(options))})")
        return HelpdeskAgent(endpoint_id)
