"""The ``openai`` backend: any OpenAI-compatible chat-completions server over async HTTP.

Options: ``model``, ``base_url`` (default ``http://127.0.0.1:8000/v1``),
``api_key_env`` (the environment variable holding the key; default
``OPENAI_API_KEY``, none sent when unset), ``concurrency`` (default 8),
``timeout`` (seconds, default 60), ``retries`` (default 5), ``backoff``
(base seconds, default 0.5), ``backoff_cap`` (default 30), ``temperature``,
``max_tokens``, ``fold_system`` (``true`` folds system messages into the first
user turn, for servers whose chat format drops them, such as llama.cpp's
``gemma`` format), ``http`` (``aiohttp``, the default, or ``httpx``: see
:mod:`assay.backends._http` for why the default is the cheaper of the two).

Retries cover 429, 408, 5xx, timeouts, dropped connections and malformed
response bodies, with exponential backoff and full jitter, honouring
``Retry-After`` (seconds or an HTTP date) when the server sends it. After the
retry budget the call raises :class:`BackendError`; the engine records an
error row and the run goes on.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson

from .. import jsontext
from ..engine.messages import BackendError, ChatRequest, ChatResponse, fold_system
from ..errors import UsageError
from ._http import TransportFailure, TransportTimeout, make_transport

if TYPE_CHECKING:
    import asyncio

__all__ = ["OpenAIBackend", "OpenAIEndpoint", "retry_after_seconds"]

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _head(reply: Any) -> str:
    """The start of a response body, on one line (what a server says when it refuses)."""
    text = " ".join(reply.body[:200].decode("utf-8", "replace").split())
    return text or "(empty body)"


def _float(options: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(options.get(key, default))
    except ValueError:
        raise UsageError(f"openai option {key}={options[key]!r} is not a number") from None


@dataclass
class OpenAIEndpoint:
    """One OpenAI-compatible endpoint with its own connection pool and concurrency limit."""

    id: str
    base_url: str
    model: str | None
    concurrency: int = 8
    timeout_s: float = 60.0
    retries: int = 5
    backoff_s: float = 0.5
    backoff_cap_s: float = 30.0
    temperature: float | None = None
    max_tokens: int | None = None
    api_key: str | None = field(default=None, repr=False)
    fold_system: bool = False
    scripted: bool = False
    http: str = "aiohttp"
    _transport: Any = field(default=None, repr=False)
    _limit: asyncio.Semaphore | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        """The run manifest's endpoint entry."""
        generation: dict[str, Any] = {}
        if self.temperature is not None:
            generation["temperature"] = self.temperature
        if self.max_tokens is not None:
            generation["max_tokens"] = self.max_tokens
        return {
            "id": self.id,
            "backend": "openai",
            "scripted": False,
            "base_url": self.base_url,
            "model": {
                "name": self.model or "(server default)",
                "revision": None,
                "weights_sha256": None,
                "tokenizer": None,
                "chat_template_sha256": None,
                "precision": None,
                "quantization": None,
                "context_length": None,
            },
            "generation": generation,
            "concurrency": self.concurrency,
        }

    def _ensure(self) -> Any:
        # Created lazily inside the running event loop (a Ray worker builds its own).
        import asyncio

        if self._transport is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._transport = make_transport(self.http, self.base_url, headers, self.concurrency, self.timeout_s)
            self._limit = asyncio.Semaphore(self.concurrency)
        return self._transport

    def _delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_cap_s)
        return rng.uniform(0, min(self.backoff_cap_s, self.backoff_s * (2**attempt)))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """POST chat/completions with retries; raises BackendError when the budget is spent."""
        return await self._complete(request, self.retries)

    async def _complete(self, request: ChatRequest, retries: int) -> ChatResponse:
        import asyncio

        transport = self._ensure()
        if self.fold_system:
            request = replace(request, messages=fold_system(request.messages))
        body = request.payload(self.model)
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        content = jsontext.dumps(body)
        rng = random.Random(zlib.crc32(content))  # jitter only shapes timing, never results
        last = "no attempt"
        for attempt in range(retries + 1):
            retry_after = None
            async with self._limit:  # type: ignore[union-attr]
                started = time.perf_counter()
                try:
                    reply = await transport.post("chat/completions", content)
                except TransportTimeout:
                    last = f"timeout after {self.timeout_s:g} s"
                except TransportFailure as exc:
                    last = f"connection error: {exc}"
                else:
                    latency = time.perf_counter() - started
                    if reply.status == 200:
                        try:
                            return self._parse(orjson.loads(reply.body), latency, attempt + 1)
                        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as exc:
                            last = f"malformed response body from {self.url} ({type(exc).__name__}: {_head(reply)})"
                    elif reply.status in _RETRY_STATUS:
                        last = f"HTTP {reply.status} from {self.url}"
                        retry_after = retry_after_seconds(reply.headers.get("retry-after"))
                    else:
                        raise BackendError(
                            f"HTTP {reply.status} from {self.url}: {_head(reply)}{self.hint(reply.status)}",
                            kind=f"http_{reply.status}",
                            attempts=attempt + 1,
                        )
            if attempt < retries:
                await asyncio.sleep(self._delay(attempt, retry_after, rng))
        raise BackendError(
            f"{last} (gave up after {retries + 1} attempts)", kind="retries_exhausted", attempts=retries + 1
        )

    @property
    def url(self) -> str:
        """The URL requests go to."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def hint(self, status: int) -> str:
        """The likely fix for an HTTP status, as a clause ("" when there is none to guess)."""
        if status == 404 and not self.base_url.rstrip("/").endswith("/v1"):
            return " (missing /v1? OpenAI-compatible servers serve chat/completions under it)"
        if status == 404:
            return " (is base_url the server's OpenAI-compatible root, and the model name one it serves?)"
        if status in (401, 403):
            return " (check the API key: api_key_env names the environment variable holding it)"
        return ""

    async def preflight(self) -> None:
        """One small request before a run: BackendError (one line, with the URL, the status and the likely fix)
        when the endpoint cannot answer, so a run never spends its whole plan learning that."""
        request = ChatRequest(({"role": "user", "content": "ping"},), max_tokens=1, context={"preflight": True})
        await self._complete(request, min(self.retries, 1))  # a dead endpoint is told in seconds, not minutes

    @staticmethod
    def _parse(data: Any, latency: float, attempts: int) -> ChatResponse:
        choice = data["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict):
            raise TypeError("message is not an object")
        calls = []
        for call in message.get("tool_calls") or []:
            function = call["function"]
            arguments: Any = function.get("arguments", "")
            try:
                parsed = orjson.loads(arguments) if isinstance(arguments, str) else arguments
                # The model chose these numbers: no integer beyond 2**53 or NaN reaches a tool or a row as one.
                arguments, valid = (
                    (jsontext.json_safe(parsed), True) if isinstance(parsed, dict) else (arguments, False)
                )
            except orjson.JSONDecodeError:
                valid = False
            if not isinstance(arguments, dict | str):
                arguments = jsontext.dumps(jsontext.json_safe(arguments)).decode()
            name = function["name"]
            calls.append({"id": str(call.get("id") or ""), "name": str(name), "arguments": arguments, "valid": valid})
        usage = data.get("usage") or {}
        return ChatResponse(
            content=message.get("content"),
            tool_calls=tuple(calls),
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
            attempts=attempts,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()


def _http_choice(value: str) -> str:
    if value not in ("aiohttp", "httpx"):
        raise UsageError(f"openai option http={value!r}: expected aiohttp or httpx")
    return value


@dataclass(frozen=True)
class OpenAIBackend:
    """The ``openai`` backend plugin."""

    name: str = "openai"
    description: str = (
        "Any OpenAI-compatible chat-completions server (vLLM, llama.cpp, Ollama, hosted APIs) "
        "over async HTTP (aiohttp or httpx)."
    )

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> OpenAIEndpoint:
        """Make an endpoint from ``openai:model=...,base_url=...`` options."""
        options = dict(options)
        known = {
            "model",
            "base_url",
            "api_key_env",
            "concurrency",
            "timeout",
            "retries",
            "backoff",
            "backoff_cap",
            "temperature",
            "max_tokens",
            "fold_system",
            "http",
            "mode",
        }
        unknown = sorted(set(options) - known)
        if unknown:
            raise UsageError(
                f"openai backend: unknown option {unknown[0]!r} (known: {', '.join(sorted(known - {'mode'}))})"
            )
        key_env = options.get("api_key_env", "OPENAI_API_KEY")
        return OpenAIEndpoint(
            id=endpoint_id,
            base_url=options.get("base_url", "http://127.0.0.1:8000/v1"),
            model=options.get("model") or options.get("mode"),
            concurrency=int(_float(options, "concurrency", 8)),
            timeout_s=_float(options, "timeout", 60.0),
            retries=int(_float(options, "retries", 5)),
            backoff_s=_float(options, "backoff", 0.5),
            backoff_cap_s=_float(options, "backoff_cap", 30.0),
            temperature=_float(options, "temperature", 0.0) if "temperature" in options else None,
            max_tokens=int(_float(options, "max_tokens", 256)) if "max_tokens" in options else None,
            api_key=os.environ.get(key_env) or None,
            fold_system=options.get("fold_system", "false").lower() in ("1", "true", "yes"),
            http=_http_choice(options.get("http", "aiohttp")),
        )
