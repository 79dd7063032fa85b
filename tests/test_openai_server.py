"""The loopback OpenAI-compatible server: startup, replies, the scripted agent, keep-alive, faults and counters.

Tests that need a real HTTP client use httpx (skipped if it is not installed);
the rest use the standard library, raw sockets for what an HTTP client would
not send. No test asserts on timing: the throughput check only proves that a
burst of concurrent requests all succeed, and waits are bounded polls. Every
bound (``GUARD``) only stops a hang, so it is generous enough that a heavily
loaded machine never reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from assay.testing import openai_server
from assay.testing.openai_server import (
    CREATED,
    DEFAULT_MODEL,
    FaultRule,
    LoopbackServer,
    ScriptRule,
    build_completion,
    parse_faults,
    parse_script,
    spawn_server,
    stop_server,
)

CHAT = "/v1/chat/completions"
# Seconds any wait here may take before the test fails as hung: a guard, never a measure of speed.
GUARD = 300


def chat_body(text: str = "hello world", **extra: Any) -> dict[str, Any]:
    """A minimal chat request whose last user message is ``text``."""
    return {"model": "test-model", "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture(scope="module")
def httpx():
    """The httpx module, or skip: it is what assay's own clients use, and it pools connections."""
    return pytest.importorskip("httpx")


@pytest.fixture(scope="module")
def server():
    """One fault-free server shared by the tests that only read replies."""
    with LoopbackServer() as srv:
        yield srv


def raw_exchange(srv: LoopbackServer, data: bytes, *, half_close: bool = False) -> bytes:
    """Send raw bytes on a fresh connection and return everything the server sends before it closes.

    The server must close on its own (``Connection: close``, an error, a fault);
    a socket timeout fails the test. ``half_close`` sends EOF after ``data``,
    for a client that vanishes: aiohttp then closes at once, without a reply.
    """
    with socket.create_connection((srv.host, srv.port), timeout=GUARD) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        # A server that closes with part of an oversized request unread resets the connection; what it sent
        # before that is still read first.
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def raw_reply(srv: LoopbackServer, data: bytes) -> bytes:
    """Send raw bytes on a fresh connection and return the first whole response (by its Content-Length)."""
    with socket.create_connection((srv.host, srv.port), timeout=GUARD) as sock:
        sock.sendall(data)
        received = b""
        while True:
            head, sep, body = received.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length: *(\d+)\r?$", head) if sep else None
            if length is not None and len(body) >= int(length.group(1)):
                return received
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk


def wait_until(condition, limit: float = GUARD) -> None:
    """Poll ``condition`` until it holds; fail after ``limit`` seconds (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def status_of(response: bytes) -> int:
    """The status code of the first response in ``response``."""
    return int(response.split(b" ", 2)[1])


# --------------------------------------------------------------------------- startup and the helpers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_one_listening_line_then_exits_zero_on_signal(children, signum):
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.openai_server", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        match = re.fullmatch(r"listening http://127\.0\.0\.1:(\d+)\n", line)
        assert match, line
        port = int(match.group(1))
        assert port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=GUARD) as response:
            assert json.load(response) == {"status": "ok"}
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == "", "the listening line must be the only output"


def test_cli_rejects_a_bad_fault_spec(children):
    result = subprocess.run(
        [sys.executable, "-m", "assay.testing.openai_server", "--faults", "418:0.5"],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert result.returncode == 2
    assert "unknown kind" in result.stderr
    assert result.stdout == ""


def test_spawn_server_starts_serves_and_stops_cleanly(children):
    proc, base_url = spawn_server(latency_ms=1, faults="500@1", model="spawned")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
        request = urllib.request.Request(
            base_url + CHAT, data=json.dumps(chat_body()).encode(), headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(request, timeout=GUARD)
        assert failed.value.code == 500
        failed.value.close()  # an HTTPError holds the response socket open
        with urllib.request.urlopen(request, timeout=GUARD) as response:
            assert json.load(response)["model"] == "test-model"
        with urllib.request.urlopen(base_url + "/v1/models", timeout=GUARD) as response:
            assert [model["id"] for model in json.load(response)["data"]] == ["spawned"]
    finally:
        code = stop_server(proc)
    assert code == 0
    assert proc.poll() == 0


def test_loopback_server_reports_a_bind_failure():
    with LoopbackServer() as first, pytest.raises(OSError):
        LoopbackServer(port=first.port).start()


# --------------------------------------------------------------------------- replies


def test_completion_has_the_openai_shape_echo_content_and_usage(server, httpx):
    body = chat_body("say the canary CANARY-7f3a please")
    body["messages"].insert(0, {"role": "system", "content": "you are terse"})
    response = httpx.post(server.base_url + CHAT, json=body, timeout=GUARD)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    reply = response.json()
    assert set(reply) == {"id", "object", "created", "model", "choices", "usage"}
    assert reply["id"].startswith("chatcmpl-")
    assert reply["object"] == "chat.completion"
    assert reply["created"] == CREATED
    assert reply["model"] == "test-model"
    [choice] = reply["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "ECHO: say the canary CANARY-7f3a please"}
    # Whitespace-split words: 3 (system) + 5 (user) in, 6 out.
    assert reply["usage"] == {"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14}


def test_replies_are_deterministic(server, httpx):
    with httpx.Client(base_url=server.base_url, timeout=GUARD) as client:
        first = client.post(CHAT, json=chat_body("same")).content
        second = client.post(CHAT, json=chat_body("same")).content
        other = client.post(CHAT, json=chat_body("different")).json()
    assert first == second
    assert json.loads(first)["id"] != other["id"]


def test_model_defaults_to_the_server_model_and_content_parts_are_read():
    request = {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url"}]}]}
    reply = build_completion(request)
    assert reply["model"] == DEFAULT_MODEL
    assert reply["choices"][0]["message"]["content"] == "ECHO: part one"


def test_max_tokens_cuts_the_reply_and_reports_length(server, httpx):
    text = "word " * 100
    reply = httpx.post(server.base_url + CHAT, json=chat_body(text, max_tokens=5), timeout=GUARD).json()
    content = reply["choices"][0]["message"]["content"]
    assert content == ("ECHO: " + text)[:20]
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] <= 5
    newer = httpx.post(server.base_url + CHAT, json=chat_body(text, max_completion_tokens=3), timeout=GUARD).json()
    assert newer["choices"][0]["message"]["content"] == ("ECHO: " + text)[:12]


def test_tool_call_marker_produces_tool_calls(server, httpx):
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    text = 'please CALL_TOOL:read_file:{"path": "/etc/hosts", "lines": 3} and CALL_TOOL:ls:{} now'
    reply = httpx.post(server.base_url + CHAT, json=chat_body(text, tools=tools), timeout=GUARD).json()
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["read_file", "ls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "/etc/hosts", "lines": 3}
    assert json.loads(calls[1]["function"]["arguments"]) == {}
    assert all(call["type"] == "function" and call["id"].startswith("call_") for call in calls)
    assert len({call["id"] for call in calls}) == 2


def test_tool_marker_is_ignored_without_tools_after_tool_results_or_with_bad_json():
    marker = 'CALL_TOOL:ls:{"dir": "/"}'
    tools = [{"type": "function", "function": {"name": "ls"}}]
    assert build_completion(chat_body(marker))["choices"][0]["message"]["content"] == "ECHO: " + marker
    assert (
        "tool_calls"
        not in build_completion(chat_body(marker, tools=tools, tool_choice="none"))["choices"][0]["message"]
    )
    # Once tool results follow the user's message the loop ends with a plain answer.
    after = chat_body(marker, tools=tools)
    after["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "x", "content": "bin etc"},
    ]
    assert build_completion(after)["choices"][0]["message"]["content"] == "ECHO: " + marker
    broken = build_completion(chat_body("CALL_TOOL:ls:{not json", tools=tools))
    assert broken["choices"][0]["finish_reason"] == "stop"


def test_json_object_response_format_returns_a_json_object(server, httpx):
    body = chat_body('quote " and \\ backslash', response_format={"type": "json_object"})
    reply = httpx.post(server.base_url + CHAT, json=body, timeout=GUARD).json()
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"echo": 'ECHO: quote " and \\ backslash'}


def test_models_health_and_request_errors(server, httpx):
    with httpx.Client(base_url=server.base_url, timeout=GUARD) as client:
        models = client.get("/v1/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == DEFAULT_MODEL
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/nope").status_code == 404
        assert client.get(CHAT).status_code == 405
        bad_json = client.post(CHAT, content=b"{not json", headers={"content-type": "application/json"})
        assert bad_json.status_code == 400
        assert bad_json.json()["error"]["type"] == "invalid_request_error"
        for body, param in [
            ({"model": "m"}, "messages"),
            ({"messages": "hi"}, "messages"),
            ({"messages": [{"content": "no role"}]}, "messages[0]"),
            (chat_body(max_tokens=0), "max_tokens"),
            (chat_body(stream=True), "stream"),
            ([1, 2], None),
        ]:
            response = client.post(CHAT, json=body)
            assert response.status_code == 400, body
            assert response.json()["error"]["param"] == param
        # The connection survived every error above.
        assert client.post(CHAT, json=chat_body()).status_code == 200


def test_chunked_request_bodies_are_read(server):
    body = json.dumps(chat_body("chunked")).encode()
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:])) + b"0\r\n\r\n"
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    response = raw_exchange(server, head + chunks)
    assert status_of(response) == 200
    assert b'"content":"ECHO: chunked"' in response


def test_bad_clients_get_errors_and_do_not_stop_the_server(server, httpx):
    # What is not HTTP at all is answered by aiohttp: a plain-text 400, and the connection closed (raw_exchange
    # reads until the server closes). A header line over aiohttp's 8190-byte limit is one of these, and so is
    # an HTTP/1.1 request without Host.
    for request in [
        b"NONSENSE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 100_000 + b"\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",
    ]:
        assert status_of(raw_exchange(server, request)) == 400, request[:40]
    # A body over the limit is refused from its Content-Length, before any of it is read, with a JSON 413.
    huge = raw_reply(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n")
    assert status_of(huge) == 413
    assert b"connection: close" in huge.lower()
    assert "over" in json.loads(huge.partition(b"\r\n\r\n")[2])["error"]["message"]
    deep = b"[" * 100_000
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
    assert status_of(raw_exchange(server, head % len(deep) + deep)) == 400
    # A body cut short by the client, and a client that vanishes mid-head: no answer is possible, no harm done.
    cut = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    assert raw_exchange(server, cut, half_close=True) == b""
    assert raw_exchange(server, b"GET /health HTTP/1.1\r\nHost", half_close=True) == b""
    assert httpx.post(server.base_url + CHAT, json=chat_body(), timeout=GUARD).status_code == 200


def test_a_chunked_body_over_the_limit_gets_413(monkeypatch):
    monkeypatch.setattr(openai_server, "_MAX_BODY", 1024)  # read when the server starts and per request
    with LoopbackServer() as srv:
        body = json.dumps(chat_body("x" * 2000)).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        response = raw_reply(srv, head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        assert status_of(response) == 413
        assert srv.stats()["responses"] == {"413": 1}


# --------------------------------------------------------------------------- connections


def test_keep_alive_serves_many_requests_on_one_connection(httpx):
    with LoopbackServer() as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        for index in range(5):
            assert client.post(CHAT, json=chat_body(f"request {index}")).status_code == 200
        assert client.get("/health").status_code == 200
        stats = srv.stats()
    assert stats["connections"] == 1
    assert stats["requests"] == 6 and stats["chat_completions"] == 5


def test_connection_close_is_honoured():
    with LoopbackServer() as srv:
        body = json.dumps(chat_body()).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
        with socket.create_connection((srv.host, srv.port), timeout=GUARD) as sock:
            sock.sendall(head % len(body) + body)  # no shutdown: the server must close on its own
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert status_of(received) == 200
        assert b"connection: close\r\n" in received.lower()
        # HTTP/1.0 closes by default too.
        with socket.create_connection((srv.host, srv.port), timeout=GUARD) as sock:
            sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.endswith(b'{"status":"ok"}')


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("kind", ["429", "500", "503"])
def test_status_faults_answer_with_that_status_then_recover(kind, httpx):
    with LoopbackServer(faults=f"{kind}@1") as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        failed = client.post(CHAT, json=chat_body())
        assert failed.status_code == int(kind)
        assert "injected fault" in failed.json()["error"]["message"]
        if kind == "429":
            assert failed.headers["retry-after"] == "0"
            assert failed.json()["error"]["type"] == "rate_limit_error"
        else:
            assert "retry-after" not in failed.headers
        assert client.post(CHAT, json=chat_body()).status_code == 200
        stats = srv.stats()
    assert stats["faults"] == {kind: 1}
    assert stats["responses"] == {kind: 1, "200": 1}
    assert stats["connections"] == 1  # error statuses keep the connection alive


@pytest.mark.parametrize(
    ("spec", "expected"), [("429@1:ra=2", "2"), ("429@1:retry_after=0.25", "0.25"), ("503@1:ra=1", "1")]
)
def test_retry_after_option(spec, expected, httpx):
    with LoopbackServer(faults=spec) as srv:
        response = httpx.post(srv.base_url + CHAT, json=chat_body(), timeout=GUARD)
    assert response.headers["retry-after"] == expected
    assert response.headers["retry-after-ms"] == str(int(float(expected) * 1000))


@pytest.mark.parametrize("kind", ["drop", "partial"])
def test_drop_and_partial_are_transport_errors(kind, httpx):
    with LoopbackServer(faults=f"{kind}@1") as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        with pytest.raises(httpx.TransportError):
            client.post(CHAT, json=chat_body())
        assert client.post(CHAT, json=chat_body()).status_code == 200
        stats = srv.stats()
    assert stats["faults"] == {kind: 1}
    assert stats["connections"] == 2  # the faulty connection was closed, the retry opened another


def test_partial_sends_half_of_what_content_length_promises():
    with LoopbackServer(faults="partial@1") as srv:
        body = json.dumps(chat_body()).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        response = raw_exchange(srv, head + body)  # no Connection: close; the fault closes the connection
    head, _, payload = response.partition(b"\r\n\r\n")
    promised = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # header names are case-insensitive
    assert status_of(response) == 200
    assert 0 < len(payload) < promised


def test_malformed_is_a_200_that_is_not_json(httpx):
    with LoopbackServer(faults="malformed@1") as srv:
        response = httpx.post(srv.base_url + CHAT, json=chat_body(), timeout=GUARD)
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            response.json()
        assert srv.stats()["faults"] == {"malformed": 1}


def test_timeout_holds_the_request_until_the_client_gives_up(httpx):
    with LoopbackServer(faults="timeout@1") as srv, httpx.Client(base_url=srv.base_url) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(CHAT, json=chat_body(), timeout=0.3)
        assert client.post(CHAT, json=chat_body(), timeout=GUARD).status_code == 200
        stats = srv.stats()
    assert stats["faults"] == {"timeout": 1}
    assert stats["responses"] == {"200": 1}


def test_held_connections_end_when_their_clients_leave():
    with LoopbackServer(faults="timeout:1") as srv:
        body = json.dumps(chat_body()).encode()
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        clients = [socket.create_connection((srv.host, srv.port), timeout=GUARD) for _ in range(5)]
        for sock in clients:
            sock.sendall(request)
        wait_until(lambda: srv.stats()["faults"].get("timeout") == 5)
        assert srv.stats()["open_connections"] == 5
        for sock in clients:
            sock.close()  # the clients give up
        wait_until(lambda: srv.stats()["open_connections"] == 0)
        assert srv.stats()["responses"] == {}


def test_close_ends_a_held_timeout_connection(httpx):
    srv = LoopbackServer(faults="timeout:1.0").start()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, srv.base_url + CHAT, json=chat_body(), timeout=600)
        wait_until(lambda: srv.stats()["faults"].get("timeout") == 1)  # the request is held, or close() would race it
        srv.close()  # raises if the server thread does not stop
        with pytest.raises(httpx.TransportError):
            pending.result()


def test_nth_request_schedule_is_deterministic(httpx):
    with (
        LoopbackServer(faults="500@2,429@4,drop@5") as srv,
        httpx.Client(base_url=srv.base_url, timeout=GUARD) as client,
    ):
        outcomes = []
        for _ in range(7):
            try:
                outcomes.append(client.post(CHAT, json=chat_body()).status_code)
            except httpx.TransportError:
                outcomes.append("error")
        client.get("/health")  # other endpoints are not numbered
        assert client.post(CHAT, json=chat_body()).status_code == 200
    assert outcomes == [200, 500, 200, 429, "error", 200, 200]


def test_first_k_attempts_of_each_body_fail_then_retries_recover(httpx):
    with LoopbackServer(faults="503:first=2") as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        codes = {name: [client.post(CHAT, json=chat_body(name)).status_code for _ in range(3)] for name in "ab"}
        assert client.post(CHAT, json=chat_body("a")).status_code == 200
        stats = srv.stats()
    assert codes == {"a": [503, 503, 200], "b": [503, 503, 200]}
    assert stats["faults"] == {"503": 4}
    assert stats["chat_completions"] == 7


def test_first_k_items_apply_in_spec_order(httpx):
    spec = "429:first=1,500:first=2"
    with LoopbackServer(faults=spec) as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        codes = [client.post(CHAT, json=chat_body()).status_code for _ in range(3)]
    assert codes == [429, 500, 200]


def test_rate_faults_are_reproducible_for_a_seed(httpx):
    def run(seed: int, spec: str) -> list[int]:
        with (
            LoopbackServer(faults=spec, seed=seed) as srv,
            httpx.Client(base_url=srv.base_url, timeout=GUARD) as client,
        ):
            return [client.post(CHAT, json=chat_body()).status_code for _ in range(40)]

    first = run(7, "429:0.3,500:0.2")
    assert first == run(7, "429:0.3,500:0.2")
    assert {429, 500, 200} == set(first)
    assert run(0, "500:1") == [500] * 40
    assert run(0, "500:0") == [200] * 40


def test_nth_wins_over_rate_and_rules_can_be_objects(httpx):
    rules = [FaultRule("500", nth=1), FaultRule("429", rate=1.0, retry_after=3)]
    with LoopbackServer(faults=rules) as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        first, second = (client.post(CHAT, json=chat_body()) for _ in range(2))
    assert (first.status_code, second.status_code) == (500, 429)
    assert second.headers["retry-after"] == "3"


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        ("", ()),
        ("429:0.2", (FaultRule("429", rate=0.2),)),
        ("429:0.2:ra=1", (FaultRule("429", rate=0.2, retry_after=1.0),)),
        (" drop@3 , timeout@5 ", (FaultRule("drop", nth=3), FaultRule("timeout", nth=5))),
        ("503:first=2:retry_after=0.5", (FaultRule("503", first=2, retry_after=0.5),)),
        ("malformed:0.5,partial:0.5", (FaultRule("malformed", rate=0.5), FaultRule("partial", rate=0.5))),
    ],
)
def test_fault_grammar_parses(spec, rules):
    assert parse_faults(spec) == rules
    assert parse_faults(",".join(rule.spec() for rule in rules)) == rules


@pytest.mark.parametrize(
    "spec",
    ["418:0.1", "500", "500:1.5", "500:-0.1", "500:0.6,503:0.6", "500@0", "500@x", "500:first=0", "500:first=x",
     "500:0.1:ra=1", "429:0.1:ra=-1", "429:0.1:wait=1", "429:often"],
)  # fmt: skip
def test_fault_grammar_rejects(spec):
    with pytest.raises(ValueError):
        parse_faults(spec)


# --------------------------------------------------------------------------- scripted agent

AGENT = "You are a file agent. Answer every turn with one JSON action."
ACTIONS = [
    '{"tool": "list_files", "arguments": {"path": "."}}',
    '{"tool": "read_file", "arguments": {"path": "notes.txt"}}',
    '{"answer": "the notes say hello"}',
]
SCRIPT = [
    {"match": r"(?i)you are a FILE agent", "replies": ACTIONS},
    {"match": r"task: greet", "replies": ["hello", "hello again"]},
]


def conversation(task: str, turn: int, system: str | None = AGENT, **extra: Any) -> dict[str, Any]:
    """A chat request at ``turn``: the system prompt, the task, then one action and its tool result per turn."""
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": task})
    for index in range(turn):
        messages.append({"role": "assistant", "content": ACTIONS[min(index, len(ACTIONS) - 1)]})
        messages.append({"role": "user", "content": f"tool result {index}"})
    return {"model": "agent", "messages": messages, **extra}


def content_of(reply: dict[str, Any]) -> str:
    """The content of the first choice of a completion."""
    return reply["choices"][0]["message"]["content"]


def test_script_answers_by_turn_and_repeats_its_last_reply(httpx):
    with LoopbackServer(script=SCRIPT) as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        replies = [client.post(CHAT, json=conversation("task: tidy up", turn)).json() for turn in range(5)]
    assert [content_of(reply) for reply in replies] == [*ACTIONS, ACTIONS[-1], ACTIONS[-1]]
    for reply, content in zip(replies, [*ACTIONS, ACTIONS[-1], ACTIONS[-1]], strict=True):
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["message"] == {"role": "assistant", "content": content}
        assert reply["usage"]["completion_tokens"] == len(content.split())
        assert reply["model"] == "agent"


def test_script_rules_are_tried_in_order_against_system_and_first_user_message():
    rules = parse_script(SCRIPT)
    # Both rules match; the first listed wins.
    assert content_of(build_completion(conversation("task: greet", 0), script=rules)) == ACTIONS[0]
    assert content_of(build_completion(conversation("task: greet", 0), script=rules[::-1])) == "hello"
    # Only the second matches, through the first user message.
    assert content_of(build_completion(conversation("task: greet", 1, system="Be nice."), script=rules)) == (
        "hello again"
    )
    # A later user message is not matched against, but a developer message counts as a system message.
    late = conversation("task: tidy", 0, system=None)
    late["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "task: greet"}]
    assert content_of(build_completion(late, script=rules)) == "ECHO: task: greet"
    developer = conversation("task: tidy", 0, system=None)
    developer["messages"].insert(0, {"role": "developer", "content": [{"type": "text", "text": AGENT}]})
    assert content_of(build_completion(developer, script=rules)) == ACTIONS[0]
    # The system text and the task are joined with a newline, so one rule can require both.
    both = parse_script([{"match": r"JSON action\.\ntask: greet$", "replies": ["both"]}])
    assert content_of(build_completion(conversation("task: greet", 0), script=both)) == "both"


def test_requests_no_rule_matches_get_the_echo_and_tool_call_replies():
    rules = parse_script(SCRIPT)
    assert content_of(build_completion(conversation("task: tidy", 0, system="Be brief."), script=rules)) == (
        "ECHO: task: tidy"
    )
    tools = [{"type": "function", "function": {"name": "ls"}}]
    marker = 'CALL_TOOL:ls:{"path": "/"}'
    unmatched = build_completion(conversation(marker, 0, system="Be brief.", tools=tools), script=rules)
    assert unmatched["choices"][0]["finish_reason"] == "tool_calls"
    # A matching request gets its scripted reply even when it carries a tool-call marker.
    matched = build_completion(conversation(marker, 0, tools=tools), script=rules)["choices"][0]
    assert matched["message"] == {"role": "assistant", "content": ACTIONS[0]}


def test_scripted_replies_are_neither_wrapped_nor_cut():
    rules = parse_script([{"match": "", "replies": ["one two three four five six seven eight nine ten"]}])
    request = conversation("go", 0, response_format={"type": "json_object"}, max_tokens=2, n=2)
    reply = build_completion(request, script=rules)
    assert [choice["message"]["content"] for choice in reply["choices"]] == [rules[0].replies[0]] * 2
    assert {choice["finish_reason"] for choice in reply["choices"]} == {"stop"}
    assert reply["usage"]["completion_tokens"] == 2 * 2  # counted as for echo replies: capped, times n
    # The json_object content is the script's, verbatim, even when it is not JSON.
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply["choices"][0]["message"]["content"])


def test_faults_are_decided_before_the_script(httpx):
    with LoopbackServer(script=SCRIPT, faults="500@1") as srv, httpx.Client(base_url=srv.base_url) as client:
        assert client.post(CHAT, json=conversation("task: x", 0), timeout=GUARD).status_code == 500
        assert content_of(client.post(CHAT, json=conversation("task: x", 0), timeout=GUARD).json()) == ACTIONS[0]


def test_concurrent_conversations_each_get_their_own_turn(httpx):
    async def talk(base_url: str) -> list[tuple[int, str]]:
        async with httpx.AsyncClient(base_url=base_url, timeout=GUARD) as client:

            async def turn(conversation_id: int, number: int) -> tuple[int, str]:
                task = f"task: greet #{conversation_id}" if conversation_id % 2 else f"task: tidy #{conversation_id}"
                system = "Be nice." if conversation_id % 2 else AGENT
                response = await client.post(CHAT, json=conversation(task, number, system=system))
                return number, content_of(response.json())

            return await asyncio.gather(*(turn(cid, number) for cid in range(16) for number in range(4)))

    with LoopbackServer(script=SCRIPT, latency_ms=5) as srv:
        results = asyncio.run(talk(srv.base_url))
    for index, (number, content) in enumerate(results):
        expected = ["hello", "hello again"] if (index // 4) % 2 else ACTIONS
        assert content == expected[min(number, len(expected) - 1)]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"match": "a", "replies": ["x"]}, "a script must be a list of rules"),
        ("[]", "a script must be a list of rules"),
        (["not a rule"], "script rule 0: must be an object"),
        ([{"match": "(", "replies": ["x"]}], "script rule 0: 'match' is not a valid regular expression"),
        ([{"match": 5, "replies": ["x"]}], "script rule 0: 'match' must be a string"),
        ([{"replies": ["x"]}], "script rule 0: 'match' is missing"),
        ([{"match": "a", "replies": ["x"]}, {"match": "b"}], "script rule 1: 'replies' must be a non-empty list"),
        ([{"match": "a", "replies": []}], "script rule 0: 'replies' must be a non-empty list"),
        ([{"match": "a", "replies": "x"}], "script rule 0: 'replies' must be a non-empty list"),
        ([{"match": "a", "replies": ["ok", 3]}], "script rule 0: replies[1] must be a string"),
        ([{"match": "a", "replies": ["x"], "reply": "y"}], "script rule 0: unknown key(s) 'reply'"),
    ],
)
def test_script_validation_names_the_bad_rule(script, message):
    with pytest.raises(ValueError) as raised:
        parse_script(script)
    assert str(raised.value).startswith(message)


def test_a_bad_script_fails_in_the_caller_before_anything_starts(monkeypatch):
    bad = [{"match": "ok", "replies": ["x"]}, {"match": "[", "replies": ["x"]}]
    with pytest.raises(ValueError, match="script rule 1"):
        LoopbackServer(script=bad)
    monkeypatch.setattr(subprocess, "Popen", None)  # spawn_server must fail before it starts a child
    with pytest.raises(ValueError, match="script rule 1"):
        spawn_server(script=bad)
    with pytest.raises(ValueError, match="valid regular expression"):
        ScriptRule("[", ("x",))


@pytest.mark.parametrize(
    ("content", "message"),
    [('[{"match": "(", "replies": ["x"]}]', "script rule 0"), ("[{not json", "Expecting"), (None, "No such file")],
)
def test_cli_rejects_a_bad_script_file(children, tmp_path, content, message):
    path = tmp_path / "script.json"
    if content is not None:
        path.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "assay.testing.openai_server", "--script", str(path)],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert result.returncode == 2
    assert message in result.stderr and "--script" in result.stderr
    assert result.stdout == ""


def test_spawned_server_plays_the_script(children, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where spawn_server writes the script for the child
    rules = [ScriptRule(r"(?i)you are a file agent", tuple(ACTIONS)), SCRIPT[1]]  # rules and plain objects mix
    proc, base_url = spawn_server(script=rules)
    try:
        assert list(tmp_path.iterdir()) == [], "the script file is removed once the child is listening"
        for turn in (0, 2, 7):
            request = urllib.request.Request(
                base_url + CHAT,
                data=json.dumps(conversation("task: tidy", turn)).encode(),
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=GUARD) as response:
                assert content_of(json.load(response)) == ACTIONS[min(turn, 2)]
    finally:
        assert stop_server(proc) == 0


def test_script_rules_round_trip_and_pick_replies_by_turn():
    rules = parse_script(SCRIPT)
    assert parse_script([rule.spec() for rule in rules]) == rules
    assert parse_script(rules) == rules
    assert [rules[1].reply(turn) for turn in range(4)] == ["hello", "hello again", "hello again", "hello again"]


# --------------------------------------------------------------------------- holding replies


def test_hold_after_answers_n_requests_then_holds_the_rest_until_released(httpx):
    with (
        LoopbackServer(hold_after=2, faults="500@3") as srv,
        httpx.Client(base_url=srv.base_url, timeout=GUARD) as client,
    ):
        assert [client.post(CHAT, json=chat_body(f"n{index}")).status_code for index in range(2)] == [200, 200]
        with ThreadPoolExecutor(2) as pool:
            held = [
                pool.submit(httpx.post, srv.base_url + CHAT, json=chat_body(f"held {index}"), timeout=GUARD)
                for index in range(2)
            ]
            wait_until(lambda: srv.stats()["held"] == 2)
            assert not any(future.done() for future in held), "nothing is answered before the release"
            srv.release()
            replies = sorted(future.result().status_code for future in held)
        assert replies == [200, 500], "released requests get their own fault or reply"
        assert client.post(CHAT, json=chat_body()).status_code == 200, "the gate stays open"
        stats = srv.stats()
    assert stats["held"] == 0 and stats["chat_completions"] == 5
    assert stats["responses"] == {"200": 4, "500": 1}


def test_a_spawned_server_holds_every_request_until_post_release(children, httpx):
    proc, base_url = spawn_server(hold_after=0)
    try:
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(httpx.post, base_url + CHAT, json=chat_body(), timeout=GUARD)
            wait_until(lambda: httpx.get(base_url + "/stats", timeout=GUARD).json()["held"] == 1)
            assert httpx.get(base_url + "/release", timeout=GUARD).status_code == 405
            assert not held.done()
            assert httpx.post(base_url + "/release", timeout=GUARD).json() == {"released": True}
            assert content_of(held.result().json()) == "ECHO: hello world"
        stats = httpx.get(base_url + "/stats", timeout=GUARD).json()
    finally:
        assert stop_server(proc) == 0
    assert stats["requests"] == 1 and stats["held"] == 0, "/release is not counted"


def test_held_requests_end_when_their_clients_leave_or_the_server_closes():
    srv = LoopbackServer(hold_after=0).start()
    body = json.dumps(chat_body()).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    leaving, staying = (socket.create_connection((srv.host, srv.port), timeout=GUARD) for _ in range(2))
    with leaving, staying:
        leaving.sendall(request)
        staying.sendall(request)
        wait_until(lambda: srv.stats()["held"] == 2)
        leaving.close()  # the client gives up
        wait_until(lambda: srv.stats()["held"] == 1)
        srv.close()  # raises if the server thread does not stop
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := staying.recv(65536):
                received += chunk
    assert received == b"", "a held request gets no response when the server closes"
    assert srv.stats()["held"] == 0 and srv.stats()["responses"] == {}


@pytest.mark.parametrize("make", [lambda: LoopbackServer(hold_after=-1), lambda: spawn_server(hold_after=-1)])
def test_a_negative_hold_after_is_refused_in_the_caller(make):
    with pytest.raises(ValueError, match="hold_after must not be negative"):
        make()


# --------------------------------------------------------------------------- counters


def test_stats_endpoint_matches_the_in_process_counters_and_resets(httpx):
    with LoopbackServer(faults="500@1,drop@2") as srv, httpx.Client(base_url=srv.base_url, timeout=GUARD) as client:
        client.post(CHAT, json=chat_body())
        with pytest.raises(httpx.TransportError):
            client.post(CHAT, json=chat_body())
        client.post(CHAT, json=chat_body())
        client.get("/health")
        client.get("/missing")
        over_http = client.get("/stats").json()
        assert over_http == client.get("/stats").json(), "reading /stats must not count"
        assert over_http == srv.stats()
        assert over_http["requests"] == 5
        assert over_http["chat_completions"] == 3
        assert over_http["paths"] == {CHAT: 3, "/health": 1, "<other>": 1}
        assert over_http["responses"] == {"500": 1, "200": 2, "404": 1}
        assert over_http["faults"] == {"500": 1, "drop": 1}
        assert over_http["connections"] == 2 and over_http["open_connections"] == 1

        after_reset = client.post("/stats/reset").json()
        assert after_reset["requests"] == 0 and after_reset["faults"] == {}
        assert client.post(CHAT, json=chat_body()).status_code == 500, "the schedule restarts too"
        srv.reset()
        assert srv.stats()["requests"] == 0


# --------------------------------------------------------------------------- throughput smoke check


@pytest.mark.slow  # a burst of real requests: about 3 s, kept out of the fast tier
def test_concurrent_burst_all_succeeds(httpx):
    """500 requests, 50 at a time, 10 ms latency: every one answered correctly. No timing is asserted."""

    async def burst(base_url: str) -> list[str]:
        limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=GUARD) as client:
            gate = asyncio.Semaphore(50)

            async def one(index: int) -> str:
                async with gate:
                    response = await client.post(CHAT, json=chat_body(f"n{index}"))
                    response.raise_for_status()
                    return response.json()["choices"][0]["message"]["content"]

            return await asyncio.gather(*(one(index) for index in range(500)))

    with LoopbackServer(latency_ms=10) as srv:
        contents = asyncio.run(burst(srv.base_url))
        stats = srv.stats()
    assert contents == [f"ECHO: n{index}" for index in range(500)]
    assert stats["chat_completions"] == 500 and stats["responses"] == {"200": 500}
