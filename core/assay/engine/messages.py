"""Chat requests and responses exchanged with backends, in OpenAI chat-completions form."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import jsontext
from ..errors import BackendError

__all__ = ["BackendError", "ChatRequest", "ChatResponse", "fold_system", "plain_turns"]


def fold_system(messages: tuple[Mapping[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """Fold system messages into the first user turn, as Gemma's own chat template does.

    Some chat formats (llama-cpp-python's ``gemma`` among them) silently drop
    system messages; folding keeps the system prompt, defenses included, in
    front of the model.
    """
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return tuple(rest)
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{system}\n\n{message.get('content') or ''}"
            return tuple(rest)
    return ({"role": "user", "content": system}, *rest)


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message in OpenAI wire form (assistant tool calls as {id, type, function})."""
    message = dict(message)
    if message.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": call.get("id", ""),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call.get("arguments"), str)
                    else json.dumps(call.get("arguments", {}), sort_keys=True),
                },
            }
            for call in message["tool_calls"]
        ]
    return message


def plain_turns(messages: tuple[Mapping[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """Tool traffic written as text turns, for chat formats without tool roles.

    Assistant tool calls become the JSON-action lines the exec prompt teaches;
    tool results become user turns; consecutive turns of one role are merged.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), str(message.get("content") or "")
        if role == "assistant" and message.get("tool_calls"):
            actions = "\n".join(
                json.dumps({"tool": c["name"], "arguments": c.get("arguments", {})}, sort_keys=True)
                for c in message["tool_calls"]
            )
            content = f"{content}\n{actions}".strip()
        elif role == "tool":
            role, content = "user", f"Result of {message.get('name', 'the tool')}:\n{content}"
        if turns and turns[-1]["role"] == role and role in ("user", "assistant"):
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": role, "content": content})
    return tuple(turns)


#: The most text one answer (its content, or one tool call's arguments) may hold; see :meth:`ChatResponse.bounded`.
MAX_ANSWER_CHARS = 256 << 10
#: The most tool calls one answer may hold (stages run fewer: the exec stage runs 16 of one message).
MAX_ANSWER_CALLS = 64


def _cut(text: str) -> str:
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    return text[:MAX_ANSWER_CHARS] + f"\n[... {len(text) - MAX_ANSWER_CHARS} characters of the answer cut by assay ...]"


def _cut_value(value: Any) -> Any:
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, dict):
        items = {key: _cut_value(item) for key, item in value.items()}
        return value if all(items[key] is value[key] for key in value) else items
    if isinstance(value, list):
        cut = [_cut_value(item) for item in value]
        return value if all(new is old for new, old in zip(cut, value, strict=True)) else cut
    return value


def _cut_call(call: Mapping[str, Any]) -> Mapping[str, Any]:
    arguments = call.get("arguments")
    cut = _cut_value(arguments)
    return call if cut is arguments else {**call, "arguments": cut}


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions request.

    ``context`` carries what scripted reference agents need (the case, the
    work-item key, the stage); real backends never send it, and it is not part
    of the cache key.
    """

    messages: tuple[Mapping[str, Any], ...]
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    json_mode: bool = False
    stop: tuple[str, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def payload(self, model: str | None) -> dict[str, Any]:
        """The JSON body of an OpenAI-compatible request."""
        body: dict[str, Any] = {
            "messages": [_wire(m) for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if model:
            body["model"] = model
        if self.seed is not None:
            body["seed"] = self.seed
        if self.tools:
            body["tools"] = [dict(t) for t in self.tools]
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if self.stop:
            body["stop"] = list(self.stop)
        return body

    def cache_key(self, endpoint_id: str, model: str | None) -> str:
        """The canonical-request digest the response cache is keyed by.

        Key-sorted compact JSON is canonical for one implementation, which is
        all a private cache needs, and ~10x cheaper than RFC 8785 per call.
        """
        body = jsontext.dumps({"endpoint": endpoint_id, "request": self.payload(model)}, option=orjson.OPT_SORT_KEYS)
        return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class ChatResponse:
    """The assistant's answer: text and/or tool calls, with usage and latency."""

    content: str | None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1

    def bounded(self) -> ChatResponse:
        """This answer within what a row can record: at most :data:`MAX_ANSWER_CHARS` of text in its content and in
        each tool call's arguments, and at most :data:`MAX_ANSWER_CALLS` tool calls; the rest is cut, with a note.

        A model (or a hostile server behind the endpoint) may ignore ``max_tokens``: one answer of megabytes would
        otherwise make a row larger than any validator reads. The cut is made when the answer arrives, so every
        stage, judge and re-derivation sees the same text.
        """
        content = _cut(self.content) if isinstance(self.content, str) else self.content
        calls = tuple(_cut_call(call) for call in self.tool_calls[:MAX_ANSWER_CALLS])
        if (
            content is self.content
            and len(calls) == len(self.tool_calls)
            and all(new is old for new, old in zip(calls, self.tool_calls, strict=False))
        ):
            return self
        return dataclasses.replace(self, content=content, tool_calls=calls)

    def to_json(self) -> dict[str, Any]:
        """JSON form stored in the response cache."""
        return {
            "content": self.content,
            "tool_calls": [dict(c) for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChatResponse:
        """Inverse of :meth:`to_json`."""
        return cls(
            content=data.get("content"),
            tool_calls=tuple(data.get("tool_calls") or ()),
            finish_reason=data.get("finish_reason"),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            latency_s=float(data.get("latency_s") or 0.0),
            attempts=int(data.get("attempts") or 1),
        )
