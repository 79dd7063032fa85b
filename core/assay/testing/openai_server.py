"""A small, fast OpenAI-compatible chat-completions server for loopback tests and benchmarks.

It answers deterministically from the request (no model is called), can play a
scripted multi-turn agent, and can inject faults on a schedule, so clients'
retry, timeout and parsing paths can be tested and benchmarked without a
provider. The HTTP layer is :mod:`aiohttp.web`, already a dependency of assay:
one :class:`aiohttp.web.Application` with a route per endpoint, served by an
``AppRunner`` and a ``TCPSite`` on one event loop.

Command line::

    python -m assay.testing.openai_server --host 127.0.0.1 --port 0 \\
        [--latency-ms 50] [--faults SPEC] [--seed N] [--model NAME] [--script FILE] [--hold-after N]

Port 0 binds an ephemeral port. Once ready the server prints exactly one line,
``listening http://HOST:PORT``, to stdout (flushed) and serves until SIGTERM or
SIGINT, then exits 0. Nothing else is ever written to stdout; a bad option,
fault spec or script exits 2 with the reason on stderr.

Endpoints
---------
``POST /v1/chat/completions``
    A ``chat.completion`` object: ``id`` (``chatcmpl-`` + a hash of the
    request), ``object``, ``created`` (the fixed :data:`CREATED`, for
    determinism), ``model`` (the request's, else the server's ``--model``),
    ``choices`` and ``usage``. Latency, faults and the script apply only here.
``GET /v1/models``
    The server's model, in the OpenAI list format.
``GET /health``
    ``{"status": "ok"}``.
``GET /stats``
    Counters as JSON (see :class:`ServerStats`); ``POST /stats/reset`` zeroes
    them and restarts the fault schedule. Reading or resetting the stats is not
    itself counted.
``POST /release``
    Opens the gate of ``--hold-after`` (see "Holding replies"); not counted.

Replies
-------
* Echo (default): ``"ECHO: " + <text of the last user message>``, cut to
  ``max_tokens * 4`` characters (``max_completion_tokens`` is honoured too);
  ``finish_reason`` is ``"length"`` when cut, else ``"stop"``. A base model that
  echoes its prompt is realistic, and the prompt may carry canaries.
* Tool calls: if the request has non-empty ``tools``, ``tool_choice`` is not
  ``"none"``, the last message is the user's, and that message contains one or
  more markers ``CALL_TOOL:<name>:<json-args>``, the reply is an assistant
  message with one ``tool_calls`` entry per marker (``content`` null,
  ``finish_reason`` ``"tool_calls"``). ``<json-args>`` is a JSON value decoded
  from just after the colon (trailing text is ignored); a marker whose
  arguments are not JSON is ignored. The name is *not* checked against
  ``tools``, so clients' handling of unknown tools can be tested. Because the
  last message must be the user's, a tool loop ends after one round: once tool
  results follow, the server answers with the echo text.
* ``response_format={"type": "json_object"}``: the content is the JSON object
  string ``{"echo": "<echo text>"}``; the cut applies to the echo text before it
  is wrapped, so the object is always valid JSON.
* Token counts are whitespace-split word counts: ``prompt_tokens`` over the
  text of every message, ``completion_tokens`` over the reply content (or each
  tool call's name and arguments), capped at ``max_tokens`` when one is given;
  ``total_tokens`` is their sum.
* ``n`` > 1 repeats the same choice; ``stream: true`` is refused with 400.
* A request that a script rule matches gets the scripted reply instead (see
  "Scripted agent").

An invalid chat request (body not JSON, bad ``messages``, ...) gets 400 with an
OpenAI-style JSON error, an unknown path 404 and a wrong method 405, all JSON. A
body over 32 MiB gets a JSON 413 (at once from its ``Content-Length``, or as soon
as a chunked body grows past the limit) and the connection is closed. HTTP
itself is aiohttp's: a request that is not well-formed HTTP (a garbage request
line, a bad header or ``Content-Length``, a header line over 8190 bytes, an
HTTP/1.1 request without ``Host``) gets aiohttp's plain-text 400 and the
connection is closed; it never reaches the handlers, so it is not counted (its
connection is), and aiohttp logs it on the ``aiohttp.server`` logger. A chunked
body whose encoding breaks only after its head has been accepted is not
reported to the handler by aiohttp, so that request stays unanswered until the
client gives up. A misbehaving client never stops the server. Connections are
kept alive (HTTP/1.1 default) unless the client sends ``Connection: close`` or
speaks HTTP/1.0 without ``keep-alive``; chunked request bodies and ``Expect:
100-continue`` are handled. A client that half-closes its side of the
connection after sending a request is taken to have gone away: aiohttp closes
the connection, so such a client may get no reply.

Scripted agent
--------------
``script`` (``--script FILE`` on the command line, a JSON file) makes the
server play a deterministic tool-using agent over several turns, such as one
that answers every turn with one JSON action. A script is a list of rules::

    [{"match": "(?i)you are a file assistant",
      "replies": ["{\\"tool\\": \\"list_files\\", \\"arguments\\": {\\"path\\": \\".\\"}}",
                  "{\\"tool\\": \\"read_file\\", \\"arguments\\": {\\"path\\": \\"notes.txt\\"}}",
                  "{\\"answer\\": \\"done\\"}"]}]

For a valid chat request that no fault has claimed, the first rule whose
``match`` (a Python regular expression; inline flags such as ``(?i)`` and
``(?s)`` work) finds a match with ``re.search`` in the text of the request's
system (and ``developer``) messages plus its first user message, joined with
newlines, answers. The turn is the number of assistant messages in the request
and the reply content is ``replies[turn]``, or the last reply once the
conversation has gone past the end. The reply is a plain assistant message with
``finish_reason`` ``"stop"``: it is neither wrapped for ``json_object`` nor cut
by ``max_tokens`` (the script's author owns the content), and ``tool_calls``
markers in the request are ignored. Usage is counted as for echo replies
(whitespace words, ``completion_tokens`` capped at ``max_tokens``). A request
that no rule matches gets the echo or tool-call reply. The reply depends on the
request alone, so any number of concurrent conversations are served
independently. A script is validated when the server is configured: a bad
regular expression, missing or empty ``replies``, a reply that is not a string
or an unknown key raises ``ValueError`` naming the rule's index (see
:func:`parse_script`).

Latency
-------
``latency_ms`` is the time from a chat request's arrival (when aiohttp hands
its parsed head to the handler, before the body is read) to its response: the
reply is prepared first and then awaited with ``asyncio.sleep`` for whatever is
left, so the server's own work and any queueing behind other requests fall
inside the budget instead of adding to it. No thread is used per request; one
event loop serves every connection.

Holding replies
---------------
``hold_after=N`` (``--hold-after N``) lets a test stop a client mid-run
whatever the machine's speed: chat-completion requests numbered above N
(numbered as for the fault schedule, so ``POST /stats/reset`` restarts the
count) are held unanswered until the gate opens, by ``POST /release`` (or
:meth:`LoopbackServer.release`, :meth:`StubServer.release`). Then every held
request and every later one is answered as usual (its fault, its latency
counted from its arrival); the gate stays open. ``N`` may be 0 (hold every
request). ``GET /stats`` counts the requests held right now in ``held``. A
held request whose client leaves is dropped; on shutdown held connections are
closed without a response. For example, a run interrupted after the 20th
reply and then resumed::

    proc, base_url = spawn_server(hold_after=20)
    ...                                           # the run stops at its 21st request: interrupt it now
    urllib.request.urlopen(urllib.request.Request(base_url + "/release", method="POST"))
    ...                                           # the resumed run is answered at once

Fault grammar
-------------
``--faults`` (or the ``faults`` argument) is a comma-separated list of items::

    SPEC   := ITEM ("," ITEM)*
    ITEM   := KIND ":" RATE OPTS        -- each request, with probability RATE
            | KIND "@" N OPTS           -- exactly the N-th request (1-based)
            | KIND ":first=" K OPTS     -- the first K attempts of each distinct body
    KIND   := "429" | "500" | "503" | "timeout" | "drop" | "malformed" | "partial"
    OPTS   := (":" ("ra" | "retry_after") "=" SECONDS)*   -- 429 and 503 only

Examples: ``429:0.2``, ``429:0.2:ra=1``, ``500@3``, ``drop@1,timeout@5``,
``503:first=2``.

Kinds:

``429`` / ``500`` / ``503``
    That status with an OpenAI-style JSON error body. 429 always carries
    ``Retry-After`` (default ``0`` seconds) and ``retry-after-ms``; 503 carries
    them only when ``ra=`` is given.
``timeout``
    The request is accepted and never answered: the connection is held until
    the client closes it (gives up), an hour passes, or the server shuts down,
    and is then closed without a response.
``drop``
    The connection is closed without a response.
``malformed``
    Status 200 with a body that is not valid JSON.
``partial``
    Status 200 whose ``Content-Length`` promises the whole completion, but only
    half of it is sent before the connection is closed.

Scheduling. Only chat-completion requests are numbered and drawn for. For
each one, in this order: the first ``@N`` item whose N equals the request's
number fires; else the first ``first=K`` item (in spec order) with the body's
attempt number <= K fires; else one uniform draw from ``random.Random(seed)``
picks among the ``RATE`` items (their rates partition [0, 1) in spec order, so
they must sum to at most 1). Exactly one draw is made per request whenever
there are rate items, so a sequential client sees the same faults for the same
seed. ``first=K`` counts attempts per distinct raw request body, so a client
that retries the same body sees K faults and then success, which proves that
retries recover. Faults are decided before the request body is validated (as
a failing proxy or provider would) and, except ``timeout``, take effect once
the latency has elapsed.

Python use::

    with LoopbackServer(latency_ms=5, faults="500@1") as srv:
        httpx.post(srv.base_url + "/v1/chat/completions", json=...)
        srv.stats()["faults"]                   # {"500": 1}

    with LoopbackServer(hold_after=1) as srv:   # the second request waits for srv.release()
        ...

    proc, base_url = spawn_server(latency_ms=50, script=[{"match": "", "replies": ["hi"]}])
    ...
    stop_server(proc)                             # SIGTERM; returns 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# aiohttp.web is imported when a server starts, not when this module is: a benchmark that only spawns
# the server as a child must not pay for it (and must not count it in its own start-up).
if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "CREATED",
    "DEFAULT_MODEL",
    "FAULT_KINDS",
    "FaultPlan",
    "FaultRule",
    "LoopbackServer",
    "ScriptRule",
    "ServerStats",
    "StubServer",
    "build_completion",
    "main",
    "parse_faults",
    "parse_script",
    "spawn_server",
    "start_server",
    "stop_server",
]

DEFAULT_MODEL = "assay-echo"
# A fixed creation time keeps whole responses byte-identical across runs.
CREATED = 1_700_000_000
FAULT_KINDS = ("429", "500", "503", "drop", "malformed", "partial", "timeout")

# A `timeout` fault holds the connection this long at most; clients give up far sooner.
_HANG_SECONDS = 3600.0
_MAX_BODY = 32 * 1024 * 1024
# On shutdown, replies still sleeping out their latency get this long to go out before they are cancelled.
_SHUTDOWN_GRACE = 1.0
# How long the helpers wait for the server to start, stop or do what they ask by default: only a guard against a
# hang, so generous that a heavily loaded machine never trips it.
_GUARD_SECONDS = 300.0
# A large backlog absorbs connection bursts from benchmark clients opening 64+ connections at once.
_BACKLOG = 1024
_ERROR_TYPES = {429: "rate_limit_error", 500: "server_error", 503: "server_error"}
_TOOL_MARKER = re.compile(r"CALL_TOOL:([A-Za-z0-9_.\-]+):")
_JSON_DECODER = json.JSONDecoder()
# Built once: json.dumps with options would build an encoder per call, twice per reply.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_COMPACT = json.JSONEncoder(separators=(",", ":"))
# Valid JSON up to the point where it turns into an HTML error page, as broken proxies produce.
_MALFORMED_BODY = b'{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [<html>502 Bad Gateway</html>'
_CHAT_PATH = "/v1/chat/completions"
_KNOWN_PATHS = frozenset({_CHAT_PATH, "/v1/models", "/health"})
_RELEASE_PATH = "/release"
_JSON = "application/json"
# Roles whose text a script rule is matched against, besides the first user message.
_SYSTEM_ROLES = frozenset({"system", "developer"})
_SCRIPT_KEYS = frozenset({"match", "replies"})


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class FaultRule:
    """One item of a fault spec: what to inject and when.

    Exactly one of ``rate``, ``nth`` and ``first`` is set. ``retry_after`` is
    the ``Retry-After`` value in seconds (429 and 503 only; ``None`` means the
    kind's default).
    """

    kind: str
    rate: float | None = None
    nth: int | None = None
    first: int | None = None
    retry_after: float | None = None

    def spec(self) -> str:
        """The item in fault-spec syntax, so rules can be passed to a child process."""
        if self.nth is not None:
            text = f"{self.kind}@{self.nth}"
        elif self.first is not None:
            text = f"{self.kind}:first={self.first}"
        else:
            text = f"{self.kind}:{self.rate!r}"
        if self.retry_after is not None:
            text += f":ra={self.retry_after!r}"
        return text


def _parse_item(item: str) -> FaultRule:
    parts = item.split(":")
    head, rest = parts[0].strip(), [part.strip() for part in parts[1:]]
    rate = nth = first = None
    if "@" in head:
        kind, _, number = head.partition("@")
        try:
            nth = int(number)
        except ValueError:
            raise ValueError(f"fault {item!r}: {number!r} after '@' is not a request number") from None
        if nth < 1:
            raise ValueError(f"fault {item!r}: request numbers start at 1")
    else:
        kind = head
        if not rest:
            raise ValueError(f"fault {item!r}: expected {kind}:RATE, {kind}@N or {kind}:first=K")
        schedule = rest.pop(0)
        if schedule.startswith("first="):
            try:
                first = int(schedule[len("first=") :])
            except ValueError:
                raise ValueError(f"fault {item!r}: first=K needs an integer K") from None
            if first < 1:
                raise ValueError(f"fault {item!r}: first=K needs K >= 1")
        else:
            try:
                rate = float(schedule)
            except ValueError:
                raise ValueError(f"fault {item!r}: {schedule!r} is not a rate, N-th request or first=K") from None
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault {item!r}: rate must be between 0 and 1")
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault {item!r}: unknown kind {kind!r}; known kinds: {', '.join(FAULT_KINDS)}")
    retry_after = None
    for option in rest:
        key, sep, value = option.partition("=")
        if not sep or key not in ("ra", "retry_after"):
            raise ValueError(f"fault {item!r}: unknown option {option!r} (only ra=SECONDS)")
        if kind not in ("429", "503"):
            raise ValueError(f"fault {item!r}: ra= applies to 429 and 503 only")
        try:
            retry_after = float(value)
        except ValueError:
            raise ValueError(f"fault {item!r}: ra={value!r} is not a number of seconds") from None
        if retry_after < 0:
            raise ValueError(f"fault {item!r}: ra= must not be negative")
    return FaultRule(kind=kind, rate=rate, nth=nth, first=first, retry_after=retry_after)


def parse_faults(spec: str | None) -> tuple[FaultRule, ...]:
    """Parse a fault spec (see the module docstring) into rules; raise ``ValueError`` if it is invalid.

    ``None`` or an empty string means no faults.
    """
    if not spec:
        return ()
    rules = tuple(_parse_item(item) for item in spec.split(",") if item.strip())
    total = sum(rule.rate for rule in rules if rule.rate is not None)
    # The rate items share one draw, so together they must fit in [0, 1].
    if total > 1.0 + 1e-9:
        raise ValueError(f"fault rates sum to {total:g}; they must sum to at most 1")
    return rules


def _coerce_rules(faults: str | Sequence[FaultRule] | None) -> tuple[FaultRule, ...]:
    if faults is None or isinstance(faults, str):
        return parse_faults(faults)
    rules = tuple(faults)
    # Round-trip through the grammar so rules built by hand get the same validation.
    return parse_faults(",".join(rule.spec() for rule in rules))


class FaultPlan:
    """Decides, request by request, which fault (if any) fires; see "Scheduling" in the module docstring.

    Not thread-safe: the server calls it from its event loop only.
    """

    def __init__(self, rules: Sequence[FaultRule] = (), seed: int = 0) -> None:
        """Hold ``rules`` and seed the draw for rate items with ``seed``."""
        self.rules = tuple(rules)
        self.seed = seed
        self._nth: dict[int, FaultRule] = {}
        for rule in self.rules:
            if rule.nth is not None:
                self._nth.setdefault(rule.nth, rule)  # the first listed item wins
        self._first = tuple(rule for rule in self.rules if rule.first is not None)
        self._rated = tuple(rule for rule in self.rules if rule.rate is not None)
        self.reset()

    def reset(self) -> None:
        """Restart the schedule: request numbering, per-body attempt counts and the random draw."""
        self.count = 0
        self._attempts: dict[bytes, int] = {}
        self._rng = random.Random(self.seed)

    def decide(self, body: bytes) -> FaultRule | None:
        """Number one chat-completion request with raw body ``body`` and return the fault to inject, or None."""
        self.count += 1
        attempt = 0
        if self._first:
            # A digest, not the body, is remembered so long-running benchmarks stay small.
            key = hashlib.blake2b(body, digest_size=16).digest()
            attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
        draw = self._rng.random() if self._rated else 1.0
        rule = self._nth.get(self.count)
        if rule is not None:
            return rule
        for rule in self._first:
            if attempt <= rule.first:  # type: ignore[operator]
                return rule
        bound = 0.0
        for rule in self._rated:
            bound += rule.rate  # type: ignore[operator]
            if draw < bound:
                return rule
        return None


# --------------------------------------------------------------------------- counters


class ServerStats:
    """Counters a test can assert on: requests, responses by status, faults by kind, connections, held requests.

    Updated from the server's event loop and read from any thread, hence the lock.
    """

    def __init__(self) -> None:
        """Start with every counter at zero."""
        self._lock = threading.Lock()
        self.open_connections = 0
        self.held = 0
        self.reset()

    def reset(self) -> None:
        """Zero every counter except the numbers of connections open and requests held right now."""
        with self._lock:
            self.requests = 0
            self.chat_completions = 0
            self.paths: dict[str, int] = {}
            self.responses: dict[str, int] = {}
            self.faults: dict[str, int] = {}
            self.connections = 0

    def count_request(self, path: str) -> None:
        """Count one request; unknown paths are lumped together so random paths cannot grow the table."""
        key = path if path in _KNOWN_PATHS else "<other>"
        with self._lock:
            self.requests += 1
            self.paths[key] = self.paths.get(key, 0) + 1
            if key == _CHAT_PATH:
                self.chat_completions += 1

    def count_response(self, status: int) -> None:
        """Count one response by the status line sent (faulty 200s included)."""
        key = str(status)
        with self._lock:
            self.responses[key] = self.responses.get(key, 0) + 1

    def count_fault(self, kind: str) -> None:
        """Count one injected fault."""
        with self._lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1

    def connection_opened(self) -> None:
        """Count a new client connection."""
        with self._lock:
            self.connections += 1
            self.open_connections += 1

    def connection_closed(self) -> None:
        """Note that a client connection ended."""
        with self._lock:
            self.open_connections -= 1

    def count_held(self, change: int) -> None:
        """Note that a request is now held (``change`` 1) or no longer (-1) by ``hold_after``."""
        with self._lock:
            self.held += change

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy of the counters (what ``GET /stats`` returns)."""
        with self._lock:
            return {
                "requests": self.requests,
                "chat_completions": self.chat_completions,
                "paths": dict(self.paths),
                "responses": dict(self.responses),
                "faults": dict(self.faults),
                "connections": self.connections,
                "open_connections": self.open_connections,
                "held": self.held,
            }


# --------------------------------------------------------------------------- replies


class _BadRequest(ValueError):
    """An invalid chat request; a ValueError so that callers of build_completion need no private name."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content parts: only text parts carry words; images and audio are ignored.
        return "\n".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    raise _BadRequest(f"{where} must be a string, a list of content parts or null", where)


def _positive_int(request: Mapping[str, Any], name: str) -> int | None:
    value = request.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _BadRequest(f"{name} must be a positive integer", name)
    return value


def _words(text: str) -> int:
    return len(text.split())


def _tool_calls(text: str, digest: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for match in _TOOL_MARKER.finditer(text):
        try:
            arguments, _ = _JSON_DECODER.raw_decode(text, match.end())
        except ValueError:
            continue
        calls.append({
            "id": f"call_{digest[:16]}_{len(calls)}",
            "type": "function",
            "function": {"name": match.group(1), "arguments": json.dumps(arguments)},
        })  # fmt: skip
    return calls


# --------------------------------------------------------------------------- scripted agent


@dataclass(frozen=True)
class ScriptRule:
    """One rule of a script (see "Scripted agent" in the module docstring).

    ``match`` is a regular expression searched for in the request's system
    messages and first user message; ``replies`` are the contents to answer
    with, one per turn, the last one repeated. Invalid values raise
    ``ValueError`` on construction.
    """

    match: str
    replies: tuple[str, ...]
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check the fields and compile ``match``."""
        object.__setattr__(self, "pattern", _compile_rule(self.match, self.replies))  # the dataclass is frozen

    def reply(self, turn: int) -> str:
        """The reply for ``turn`` (0-based): ``replies[turn]``, or the last reply past the end."""
        return self.replies[min(turn, len(self.replies) - 1)]

    def spec(self) -> dict[str, Any]:
        """The rule as a JSON-ready object, so a script can be passed to a child process."""
        return {"match": self.match, "replies": list(self.replies)}


def _compile_rule(match: object, replies: object) -> re.Pattern[str]:
    # Typed as object: rules come from JSON files, and hand-built rules get the same checks.
    if not isinstance(match, str):
        raise ValueError("'match' must be a string (a regular expression)")
    if not isinstance(replies, tuple) or not replies:
        raise ValueError("'replies' must be a non-empty list of strings")
    for index, reply in enumerate(replies):
        if not isinstance(reply, str):
            raise ValueError(f"replies[{index}] must be a string, not {type(reply).__name__}")
    try:
        return re.compile(match)
    except re.error as error:
        raise ValueError(f"'match' is not a valid regular expression: {error}") from None


def parse_script(script: object) -> tuple[ScriptRule, ...]:
    """Validate a script (a list of ``{"match": REGEX, "replies": [STRING, ...]}`` objects) into rules.

    :class:`ScriptRule` items are accepted as they are. Raises ``ValueError``
    naming the index of the first bad rule.
    """
    if isinstance(script, str | bytes | Mapping) or not isinstance(script, Sequence):
        raise ValueError("a script must be a list of rules")
    rules = []
    for index, item in enumerate(script):
        if isinstance(item, ScriptRule):
            rules.append(item)
            continue
        try:
            if not isinstance(item, Mapping):
                raise ValueError('must be an object {"match": REGEX, "replies": [STRING, ...]}')
            unknown = sorted(str(key) for key in item if key not in _SCRIPT_KEYS)
            if unknown:
                raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}; a rule has 'match' and 'replies'")
            if "match" not in item:
                raise ValueError("'match' is missing")
            replies = item.get("replies")
            if not isinstance(replies, list | tuple):
                raise ValueError("'replies' must be a non-empty list of strings")
            rules.append(ScriptRule(item["match"], tuple(replies)))
        except ValueError as error:
            raise ValueError(f"script rule {index}: {error}") from None
    return tuple(rules)


def _scripted(script: Sequence[ScriptRule], context: str, turn: int) -> str | None:
    for rule in script:
        if rule.pattern.search(context):
            return rule.reply(turn)
    return None


def build_completion(request: Any, *, model: str = DEFAULT_MODEL, script: Sequence[ScriptRule] = ()) -> dict[str, Any]:
    """The ``chat.completion`` object the server returns for ``request`` (a decoded JSON body).

    Deterministic: the same request always gives the same object. ``model`` is
    used when the request names none; ``script`` holds the rules of a scripted
    agent (see :func:`parse_script`), tried before the echo and tool-call
    replies. Raises ``ValueError`` (with an OpenAI-style ``param`` attribute)
    when the request is invalid.
    """
    if not isinstance(request, dict):
        raise _BadRequest("the request body must be a JSON object")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("messages must be a non-empty list", "messages")
    prompt_tokens = 0
    last_user = ""
    first_user: str | None = None
    system: list[str] = []
    turn = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _BadRequest(f"messages[{index}] must be an object with a string role", f"messages[{index}]")
        text = _text(message.get("content"), f"messages[{index}].content")
        prompt_tokens += _words(text)
        role = message["role"]
        if role == "user":
            last_user = text
            if first_user is None:
                first_user = text
        elif role == "assistant":
            turn += 1
        elif role in _SYSTEM_ROLES:
            system.append(text)
    if request.get("stream"):
        raise _BadRequest("stream is not supported by this test server", "stream")
    max_tokens = _positive_int(request, "max_completion_tokens") or _positive_int(request, "max_tokens")
    choices_n = _positive_int(request, "n") or 1
    if choices_n > 128:
        raise _BadRequest("n must be at most 128", "n")
    tools = request.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _BadRequest("tools must be a list", "tools")
    response_format = request.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise _BadRequest("response_format must be an object", "response_format")
    name = request.get("model")
    name = name if isinstance(name, str) and name else model
    # The id hashes the canonical request, so identical requests get identical ids.
    digest = hashlib.sha256(_CANONICAL.encode(request).encode()).hexdigest()

    scripted = None
    if script:
        # The system prompt and the task identify the conversation; the later turns do not.
        context = "\n".join(system if first_user is None else [*system, first_user])
        scripted = _scripted(script, context, turn)
    calls: list[dict[str, Any]] = []
    if scripted is None and tools and request.get("tool_choice") != "none" and messages[-1].get("role") == "user":
        calls = _tool_calls(last_user, digest)
    if scripted is not None:
        # The script's author owns the content: it is neither cut to max_tokens nor wrapped for json_object.
        answer: dict[str, Any] = {"role": "assistant", "content": scripted}
        finish_reason = "stop"
        completion_tokens = _words(scripted)
    elif calls:
        answer = {"role": "assistant", "content": None, "tool_calls": calls}
        finish_reason = "tool_calls"
        completion_tokens = sum(_words(c["function"]["name"]) + _words(c["function"]["arguments"]) for c in calls)
    else:
        content = "ECHO: " + last_user
        finish_reason = "stop"
        if max_tokens is not None and len(content) > max_tokens * 4:
            content, finish_reason = content[: max_tokens * 4], "length"
        completion_tokens = _words(content)
        if response_format is not None and response_format.get("type") == "json_object":
            content = json.dumps({"echo": content})
        answer = {"role": "assistant", "content": content}
    if max_tokens is not None:
        completion_tokens = min(completion_tokens, max_tokens)
    choices = [
        {"index": index, "message": answer, "logprobs": None, "finish_reason": finish_reason}
        for index in range(choices_n)
    ]
    completion_tokens *= choices_n
    return {
        "id": f"chatcmpl-{digest[:24]}",
        "object": "chat.completion",
        "created": CREATED,
        "model": name,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# --------------------------------------------------------------------------- the server


def _dumps(payload: Any) -> bytes:
    return _COMPACT.encode(payload).encode()


def _error(message: str, kind: str = "invalid_request_error", param: str | None = None) -> bytes:
    return _dumps(_error_body(message, kind, param))


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _drop(request: web.Request) -> web.StreamResponse:
    """Close the connection without a response; return what the handler must still return."""
    from aiohttp import web

    transport = request.transport
    if transport is not None:
        transport.close()
    # aiohttp then tries to send this response; with the transport closing, that fails as a client that went
    # away (a ConnectionError it ignores quietly), so not a byte of it is sent.
    return web.Response()


class StubServer:
    """The aiohttp server: one instance per listening socket. Use :func:`start_server` to run one.

    ``stats()`` and ``reset()`` give tests the counters; ``plan`` is the
    :class:`FaultPlan`, ``script`` the scripted agent's rules and
    ``hold_after`` the number of requests answered before the rest are held
    (see "Holding replies" in the module docstring; None holds nothing).
    """

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        faults: str | Sequence[FaultRule] | None = None,
        seed: int = 0,
        model: str = DEFAULT_MODEL,
        script: Sequence[Mapping[str, Any] | ScriptRule] | None = None,
        hold_after: int | None = None,
    ) -> None:
        """Configure (but do not start) a server; ``faults`` is a spec string or rules, ``script`` a script.

        Raises ``ValueError`` for a negative latency or ``hold_after``, a bad
        fault spec or a bad script, so configuration errors surface before
        anything is bound.
        """
        if latency_ms < 0:
            raise ValueError("latency_ms must not be negative")
        if hold_after is not None and hold_after < 0:
            raise ValueError("hold_after must not be negative")
        self.latency = latency_ms / 1000.0
        self.hold_after = hold_after
        self.model = model
        self.plan = FaultPlan(_coerce_rules(faults), seed)
        self.script = parse_script(script) if script is not None else ()
        self.counters = ServerStats()
        self.host: str | None = None
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        # Set by release() and by close(): held requests wake up and look at _closing to know which.
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Bodies that never change are serialised once, not per request.
        self._models_body = _dumps({
            "object": "list",
            "data": [{"id": model, "object": "model", "created": CREATED, "owned_by": "assay"}],
        })  # fmt: skip
        self._wrong_method = {
            path: _error(f"use {'POST' if path == _CHAT_PATH else 'GET'} {path}") for path in _KNOWN_PATHS
        }

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Bind and start accepting connections; return the bound port (useful with port 0)."""
        from aiohttp import web

        if self._runner is not None:
            raise RuntimeError("StubServer already started")
        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        self._gate = asyncio.Event()
        app = web.Application(client_max_size=_MAX_BODY)
        route = app.router.add_route
        # Every method reaches the handlers, so wrong methods get an OpenAI-style 405 and are counted.
        route("*", _CHAT_PATH, self._chat)
        route("*", "/v1/models", self._models)
        route("*", "/health", self._health)
        route("*", "/stats", self._stats)
        route("*", "/stats/reset", self._stats_reset)
        route("*", _RELEASE_PATH, self._release)
        route("*", "/{path:.*}", self._not_found)
        # access_log=None: no log record (and no clock read) per request. handler_cancellation: a client
        # that disconnects cancels its handler, so held `timeout` requests do not pile up after clients leave.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=_SHUTDOWN_GRACE)
        await runner.setup()
        assert runner.server is not None
        self._count_connections(runner.server)
        site = web.TCPSite(runner, host, port, backlog=_BACKLOG)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        bound: int = runner.addresses[0][1]  # the bound port, also when port 0 was asked for
        self._runner, self.host, self.port = runner, host, bound
        return bound

    def _count_connections(self, server: web.Server) -> None:
        # An Application has no connection hooks, but the runner's web.Server (the protocol factory) is told of
        # every connection made and lost through these two public methods; wrapping them on this one instance
        # counts connections without a per-request cost.
        made, lost = server.connection_made, server.connection_lost
        counters = self.counters

        def connection_made(handler: web.RequestHandler, transport: asyncio.Transport) -> None:
            counters.connection_opened()
            made(handler, transport)

        def connection_lost(handler: web.RequestHandler, exc: BaseException | None = None) -> None:
            counters.connection_closed()
            lost(handler, exc)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    async def close(self) -> None:
        """Stop listening and end every connection, including ones held by a ``timeout`` fault.

        Replies still sleeping out their latency get a short grace to go out;
        idle keep-alive connections are closed at once.
        """
        if self._closing is not None:
            self._closing.set()  # held requests close their connections now
        if self._gate is not None:
            self._gate.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (see :class:`ServerStats`)."""
        return self.counters.snapshot()

    def reset(self) -> None:
        """Zero the counters and restart the fault schedule. Call from the server's event loop."""
        self.counters.reset()
        self.plan.reset()

    def release(self) -> None:
        """Answer the requests held by ``hold_after``, and every later one at once. Call from the server's loop."""
        if self._gate is None:
            raise RuntimeError("the server is not started")
        self._gate.set()

    # ----------------------------------------------------------------- handlers

    def _respond(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> web.Response:
        # Counted before the response is written: a client in another thread may read the counters as soon as
        # it has the reply.
        from aiohttp import web

        self.counters.count_response(status)
        return web.Response(status=status, body=body, content_type=_JSON, headers=headers)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.counters.count_request("/v1/models")
        if request.method != "GET":
            return self._respond(405, self._wrong_method["/v1/models"])
        return self._respond(200, self._models_body)

    async def _health(self, request: web.Request) -> web.StreamResponse:
        self.counters.count_request("/health")
        if request.method != "GET":
            return self._respond(405, self._wrong_method["/health"])
        return self._respond(200, b'{"status":"ok"}')

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        self.counters.count_request(request.path)
        return self._respond(404, _error(f"no route for {request.method} {request.path}", "not_found_error"))

    async def _stats(self, request: web.Request) -> web.StreamResponse:
        # Not counted: reading the counters must not change them.
        from aiohttp import web

        if request.method != "GET":
            return web.Response(status=405, body=_error("use GET /stats"), content_type=_JSON)
        return web.Response(body=_dumps(self.stats()), content_type=_JSON)

    async def _stats_reset(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if request.method != "POST":
            return web.Response(status=405, body=_error("use POST /stats/reset"), content_type=_JSON)
        self.reset()
        return web.Response(body=_dumps(self.stats()), content_type=_JSON)

    async def _release(self, request: web.Request) -> web.StreamResponse:
        # Not counted, like /stats: opening the gate is the test's doing, not the client's.
        from aiohttp import web

        if request.method != "POST":
            return web.Response(status=405, body=_error(f"use POST {_RELEASE_PATH}"), content_type=_JSON)
        self.release()
        return web.Response(body=b'{"released":true}', content_type=_JSON)

    # ----------------------------------------------------------------- chat completions

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        assert self._loop is not None
        arrived = self._loop.time()
        self.counters.count_request(_CHAT_PATH)
        if request.method != "POST":
            return self._respond(405, self._wrong_method[_CHAT_PATH])
        length = request.content_length
        if length is not None and length > _MAX_BODY:
            return self._unreadable(413, f"request body over {_MAX_BODY} bytes")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:  # a chunked body that grew past the limit
            return self._unreadable(413, f"request body over {_MAX_BODY} bytes")
        except web.RequestPayloadError:  # e.g. broken chunked encoding
            return self._unreadable(400, "malformed request body")

        fault = self.plan.decide(body)
        # The request's number is the plan's count (nothing ran in between); above hold_after it waits for release.
        if self.hold_after is not None and self.plan.count > self.hold_after and not await self._held():
            return _drop(request)
        if fault is not None:
            self.counters.count_fault(fault.kind)
            return await self._fault(fault, body, request, arrived)
        # Everything is prepared before the wait, so it is sent the moment the latency has elapsed.
        try:
            status, payload = 200, self._completion(body)
        except ValueError as error:
            status, payload = 400, _error(str(error), param=getattr(error, "param", None))
        await self._wait(arrived)
        return self._respond(status, payload)

    def _unreadable(self, status: int, message: str) -> web.Response:
        response = self._respond(status, _error(message))
        # The body was not read to its end, so the connection cannot carry another request.
        response.force_close()
        return response

    async def _wait(self, arrived: float) -> None:
        # Latency runs from the request's arrival, so the server's own work and any queueing behind other
        # requests fall inside the budget instead of adding to it. asyncio.sleep holds no thread.
        if self.latency:
            assert self._loop is not None
            delay = arrived + self.latency - self._loop.time()
            if delay > 0:
                await asyncio.sleep(delay)

    async def _fault(self, fault: FaultRule, body: bytes, request: web.Request, arrived: float) -> web.StreamResponse:
        kind = fault.kind
        if kind == "timeout":
            await self._hold()
            return _drop(request)
        status, payload, headers = 200, b"", None
        if kind in ("429", "500", "503"):
            status = int(kind)
            payload = _error(f"injected fault: {kind}", _ERROR_TYPES[status])
            retry_after = fault.retry_after if fault.retry_after is not None else (0.0 if status == 429 else None)
            if retry_after is not None:
                headers = {
                    "retry-after": _format_seconds(retry_after),
                    "retry-after-ms": _format_seconds(retry_after * 1000),
                }
        elif kind == "malformed":
            payload = _MALFORMED_BODY
        elif kind == "partial":
            try:
                payload = self._completion(body)
            except ValueError:
                stand_in = {"messages": [{"role": "user", "content": "partial"}]}  # the real request is invalid
                payload = _dumps(build_completion(stand_in, model=self.model))
        await self._wait(arrived)
        if kind == "drop":
            return _drop(request)
        if kind == "partial":
            return await self._partial(request, payload)
        return self._respond(status, payload, headers)

    async def _partial(self, request: web.Request, whole: bytes) -> web.StreamResponse:
        from aiohttp import web

        response = web.StreamResponse(status=200)
        response.content_type = _JSON
        response.content_length = len(whole)  # the whole completion is promised...
        response.force_close()
        self.counters.count_response(200)
        await response.prepare(request)
        await response.write(whole[: len(whole) // 2])  # ...half of it is sent (with the head, in one write)...
        _drop(request)  # ...and the connection is closed once that has gone out
        return response

    async def _held(self) -> bool:
        """Wait until the gate opens; False when it opened because the server is closing (then nothing is sent).

        A client that leaves cancels this handler (handler_cancellation), and the count goes down all the same.
        """
        assert self._gate is not None and self._closing is not None
        if not self._gate.is_set():
            self.counters.count_held(1)
            try:
                await self._gate.wait()
            finally:
                self.counters.count_held(-1)
        return not self._closing.is_set()

    async def _hold(self) -> None:
        # Hold the request unanswered until the server closes or an hour passes. A client that gives up
        # disconnects, and aiohttp then cancels this handler (handler_cancellation), so nothing piles up.
        assert self._closing is not None
        try:
            async with asyncio.timeout(_HANG_SECONDS):
                await self._closing.wait()
        except TimeoutError:
            pass

    def _completion(self, body: bytes) -> bytes:
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; absurd nesting recurses
            raise _BadRequest("the request body is not valid JSON") from None
        return _dumps(build_completion(request, model=self.model, script=self.script))


async def start_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    latency_ms: float = 0.0,
    faults: str | Sequence[FaultRule] | None = None,
    seed: int = 0,
    model: str = DEFAULT_MODEL,
    script: Sequence[Mapping[str, Any] | ScriptRule] | None = None,
    hold_after: int | None = None,
) -> tuple[StubServer, int]:
    """Start a server on the running event loop; return it and its bound port. Stop it with ``await server.close()``."""
    server = StubServer(
        latency_ms=latency_ms, faults=faults, seed=seed, model=model, script=script, hold_after=hold_after
    )
    bound = await server.start(host, port)
    return server, bound


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# --------------------------------------------------------------------------- in-process and child-process runners


class LoopbackServer:
    """Runs a :class:`StubServer` on its own event loop in a background thread, for in-process tests.

    ::

        with LoopbackServer(latency_ms=5, faults="429@1") as srv:
            client.post(srv.base_url + "/v1/chat/completions", json=...)
            assert srv.stats()["faults"] == {"429": 1}

    ``base_url`` is ``http://HOST:PORT``; OpenAI SDKs want ``openai_base_url``
    (the same with ``/v1``).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        faults: str | Sequence[FaultRule] | None = None,
        seed: int = 0,
        model: str = DEFAULT_MODEL,
        script: Sequence[Mapping[str, Any] | ScriptRule] | None = None,
        hold_after: int | None = None,
    ) -> None:
        """Configure the server; it starts on :meth:`start` or on entering the ``with`` block.

        A bad fault spec or script raises ``ValueError`` here, in the caller.
        """
        self.host = host
        self.port = port
        # Built here, not in the thread, so a bad fault spec or script raises in the caller.
        self.server = StubServer(
            latency_ms=latency_ms, faults=faults, seed=seed, model=model, script=script, hold_after=hold_after
        )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        return _url(self.host, self.port)

    @property
    def openai_base_url(self) -> str:
        """``base_url`` + ``/v1``, the form OpenAI SDK clients expect."""
        return self.base_url + "/v1"

    def start(self, timeout: float = _GUARD_SECONDS) -> LoopbackServer:
        """Start the background thread and wait until the server is listening; return self."""
        if self._thread is not None:
            raise RuntimeError("LoopbackServer already started")
        self._thread = threading.Thread(target=self._run, name="assay-openai-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the loopback server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            self.port = await self.server.start(self.host, self.port)
        except BaseException as error:  # noqa: BLE001 - reported to the caller of start(), which re-raises it
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.close()

    def close(self, timeout: float = _GUARD_SECONDS) -> None:
        """Stop the server (ending held connections) and join the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already finished
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("the loopback server did not stop in time")
        self._thread = None

    def stats(self) -> dict[str, Any]:
        """A snapshot of the server's counters (the same document as ``GET /stats``)."""
        return self.server.stats()

    def reset(self) -> None:
        """Zero the counters and restart the fault schedule, on the server's own thread."""
        if self._loop is None:
            self.server.reset()
            return

        async def _reset() -> None:
            self.server.reset()

        asyncio.run_coroutine_threadsafe(_reset(), self._loop).result(_GUARD_SECONDS)

    def release(self) -> None:
        """Open the gate of ``hold_after``: held requests are answered, and so is every later one."""
        if self._loop is None:
            raise RuntimeError("LoopbackServer is not started")

        async def _release() -> None:
            self.server.release()

        asyncio.run_coroutine_threadsafe(_release(), self._loop).result(_GUARD_SECONDS)

    def __enter__(self) -> LoopbackServer:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop the server."""
        self.close()


def spawn_server(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    latency_ms: float = 0.0,
    faults: str | Sequence[FaultRule] | None = None,
    seed: int = 0,
    model: str = DEFAULT_MODEL,
    script: Sequence[Mapping[str, Any] | ScriptRule] | None = None,
    hold_after: int | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    startup_timeout: float = _GUARD_SECONDS,
) -> tuple[subprocess.Popen[bytes], str]:
    """Launch the server as a child process; return it and its base URL once it is listening.

    Stop it with :func:`stop_server`. The child's stderr is inherited, so its
    errors reach the caller's terminal or test log. A bad fault spec or script
    raises ``ValueError`` here, before any child is started; a script reaches
    the child through a temporary file, removed once the child is listening.
    Release a server started with ``hold_after`` by ``POST /release``.
    """
    if faults is not None and not isinstance(faults, str):
        faults = ",".join(rule.spec() for rule in _coerce_rules(faults))
    else:
        parse_faults(faults)
    rules = parse_script(script) if script is not None else None
    if hold_after is not None and hold_after < 0:
        raise ValueError("hold_after must not be negative")
    command = [
        python or sys.executable, "-m", "assay.testing.openai_server",
        "--host", host, "--port", str(port), "--latency-ms", repr(float(latency_ms)),
        "--seed", str(seed), "--model", model,
    ]  # fmt: skip
    if faults:
        command += ["--faults", faults]
    if hold_after is not None:
        command += ["--hold-after", str(hold_after)]
    if rules is None:
        return _launch(command, env, startup_timeout)
    handle, script_path = tempfile.mkstemp(prefix="assay-script-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump([rule.spec() for rule in rules], file)
        # The child reads the script before it reports listening, so the file can go once _launch returns.
        return _launch([*command, "--script", script_path], env, startup_timeout)
    finally:
        os.unlink(script_path)


def _launch(
    command: list[str], env: Mapping[str, str] | None, startup_timeout: float
) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + startup_timeout
    buffer = b""
    # Read raw bytes with a deadline: a plain readline() would block forever on a child that hangs.
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                _kill(proc)
                raise RuntimeError(f"the server did not report its port within {startup_timeout} s")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                code = proc.wait()
                raise RuntimeError(f"the server exited with status {code} before listening")
            buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    match = re.fullmatch(r"listening (http://\S+)", line.strip())
    if match is None:
        _kill(proc)
        raise RuntimeError(f"unexpected first line from the server: {line!r}")
    return proc, match.group(1)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def stop_server(proc: subprocess.Popen[bytes], timeout: float = _GUARD_SECONDS) -> int:
    """Stop a child started by :func:`spawn_server` with SIGTERM; return its exit status (0 when clean).

    A child that does not exit within ``timeout`` seconds is killed and
    ``RuntimeError`` is raised.
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise RuntimeError("the server ignored SIGTERM and was killed") from None
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m assay.testing.openai_server",
        description="OpenAI-compatible chat-completions server for loopback tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each chat reply")
    parser.add_argument("--faults", default=None, help="fault spec, e.g. '429:0.1:ra=1,drop@3,503:first=2'")
    parser.add_argument("--seed", type=int, default=0, help="seed for rate-based faults")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model name to report (default {DEFAULT_MODEL})")
    parser.add_argument(
        "--script", metavar="FILE", default=None, help='scripted agent: JSON list of {"match": REGEX, "replies": [...]}'
    )
    parser.add_argument(
        "--hold-after",
        metavar="N",
        type=int,
        default=None,
        help="answer N chat requests, then hold the rest unanswered until POST /release (0 holds every one)",
    )
    return parser


async def _serve(args: argparse.Namespace, script: Sequence[ScriptRule]) -> int:
    server, port = await start_server(
        args.host,
        args.port,
        latency_ms=args.latency_ms,
        faults=args.faults,
        seed=args.seed,
        model=args.model,
        script=script,
        hold_after=args.hold_after,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening {_url(args.host, port)}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server from the command line until SIGTERM or SIGINT; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        parse_faults(args.faults)
    except ValueError as error:
        parser.error(str(error))
    if args.latency_ms < 0:
        parser.error("--latency-ms must not be negative")
    if args.hold_after is not None and args.hold_after < 0:
        parser.error("--hold-after must not be negative")
    script: tuple[ScriptRule, ...] = ()
    if args.script is not None:
        try:
            with open(args.script, encoding="utf-8") as file:
                script = parse_script(json.load(file))
        except (OSError, ValueError) as error:  # json.JSONDecodeError is a ValueError
            parser.error(f"--script {args.script}: {error}")
    return asyncio.run(_serve(args, script))


if __name__ == "__main__":
    sys.exit(main())
