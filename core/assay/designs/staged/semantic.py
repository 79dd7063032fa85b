"""The semantic stage: one prompt-level call, then the judge's CoreFail verdict."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...engine.messages import ChatRequest, ChatResponse
from ...engine.stages.context import StageContext
from .judges import judge_roles
from .prompts import semantic_messages

__all__ = ["call_text", "run_semantic"]


def call_text(call: Mapping[str, Any]) -> str:
    """One native tool call as the final output writes it: ``name(arguments JSON)``."""
    arguments = call["arguments"]
    return f"{call['name']}({arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)})"


def _final_text(response: ChatResponse) -> str:
    text = response.content or ""
    if response.tool_calls:
        calls = "; ".join(call_text(c) for c in response.tool_calls)
        text = f"{text}\n[tool calls] {calls}".strip()
    return text


async def run_semantic(ctx: StageContext) -> None:
    """Ask the endpoint once, record the transcript, and label it with the judge."""
    messages = semantic_messages(ctx.case, ctx.policy)
    request = ChatRequest(
        tuple(messages),
        temperature=ctx.temperature,
        max_tokens=ctx.max_tokens,
        seed=ctx.item.seed,
        context=ctx.request_context("semantic"),
    )
    response = await ctx.endpoint.complete(request)
    ctx.add_usage(response)
    final = _final_text(response)
    ctx.prompt_texts = [str(m.get("content") or "") for m in messages]
    assistant: dict[str, Any] = {"role": "assistant", "content": response.content}
    if response.tool_calls:
        assistant["tool_calls"] = [dict(c) for c in response.tool_calls]
    ctx.row["transcript"] = {"messages": [*messages, assistant]}
    if response.tool_calls:
        ctx.row["transcript"]["tool_calls"] = [dict(c) for c in response.tool_calls]
    ctx.row["final_output"] = final
    judge = judge_roles(ctx.judge, "semantic")
    ctx.row["stages"]["semantic"] = await judge.semantic(ctx.case, final, ctx.prompt_texts)
