"""The loopback OpenAI-compatible server: startup, replies, keep-alive, faults, schedules and counters.

Tests that need a real HTTP client use httpx (skipped if it is not installed);
the rest use the standard library. No test asserts on timing: the throughput
check only proves that a burst of concurrent requests all succeed.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from assay.testing.openai_server import (
    CREATED,
    DEFAULT_MODEL,
    FaultRule,
    LoopbackServer,
    build_completion,
    parse_faults,
    spawn_server,
    stop_server,
)

CHAT = "/v1/chat/completions"


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


def raw_exchange(srv: LoopbackServer, data: bytes) -> bytes:
    """Send raw bytes on a fresh connection and return everything the server sends before closing."""
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)  # so the server sees EOF after our request and closes its side too
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    """The status code of the first response in ``response``."""
    return int(response.split(b" ", 2)[1])


# --------------------------------------------------------------------------- startup and the helpers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_one_listening_line_then_exits_zero_on_signal(signum):
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
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert json.load(response) == {"status": "ok"}
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == "", "the listening line must be the only output"


def test_cli_rejects_a_bad_fault_spec():
    result = subprocess.run(
        [sys.executable, "-m", "assay.testing.openai_server", "--faults", "418:0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown kind" in result.stderr
    assert result.stdout == ""


def test_spawn_server_starts_serves_and_stops_cleanly():
    proc, base_url = spawn_server(latency_ms=1, faults="500@1", model="spawned")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
        request = urllib.request.Request(
            base_url + CHAT, data=json.dumps(chat_body()).encode(), headers={"content-type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(request, timeout=10)
        assert failed.value.code == 500
        failed.value.close()  # an HTTPError holds the response socket open
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.load(response)["model"] == "test-model"
        with urllib.request.urlopen(base_url + "/v1/models", timeout=10) as response:
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
    response = httpx.post(server.base_url + CHAT, json=body, timeout=10)
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
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
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
    reply = httpx.post(server.base_url + CHAT, json=chat_body(text, max_tokens=5), timeout=10).json()
    content = reply["choices"][0]["message"]["content"]
    assert content == ("ECHO: " + text)[:20]
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] <= 5
    newer = httpx.post(server.base_url + CHAT, json=chat_body(text, max_completion_tokens=3), timeout=10).json()
    assert newer["choices"][0]["message"]["content"] == ("ECHO: " + text)[:12]


def test_tool_call_marker_produces_tool_calls(server, httpx):
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    text = 'please CALL_TOOL:read_file:{"path": "/etc/hosts", "lines": 3} and CALL_TOOL:ls:{} now'
    reply = httpx.post(server.base_url + CHAT, json=chat_body(text, tools=tools), timeout=10).json()
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
    reply = httpx.post(server.base_url + CHAT, json=body, timeout=10).json()
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"echo": 'ECHO: quote " and \\ backslash'}


def test_models_health_and_request_errors(server, httpx):
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
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
    assert status_of(raw_exchange(server, b"NONSENSE\r\n\r\n")) == 400
    assert status_of(raw_exchange(server, b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")) == 400
    assert status_of(raw_exchange(server, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n")) == 400
    huge = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"
    assert status_of(raw_exchange(server, huge)) == 413
    assert status_of(raw_exchange(server, b"GET / HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n")) == 431
    deep = b"[" * 100_000
    head = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(deep)
    assert status_of(raw_exchange(server, head + deep)) == 400
    # A body cut short by the client, and a client that vanishes mid-head: no answer is possible, no harm done.
    assert raw_exchange(server, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{") == b""
    assert raw_exchange(server, b"GET /health HTTP/1.1\r\nHost") == b""
    assert httpx.post(server.base_url + CHAT, json=chat_body(), timeout=10).status_code == 200


# --------------------------------------------------------------------------- connections


def test_keep_alive_serves_many_requests_on_one_connection(httpx):
    with LoopbackServer() as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
        for index in range(5):
            assert client.post(CHAT, json=chat_body(f"request {index}")).status_code == 200
        assert client.get("/health").status_code == 200
        stats = srv.stats()
    assert stats["connections"] == 1
    assert stats["requests"] == 6 and stats["chat_completions"] == 5


def test_connection_close_is_honoured():
    with LoopbackServer() as srv:
        body = json.dumps(chat_body()).encode()
        request = b"POST /v1/chat/completions HTTP/1.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
        with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
            sock.sendall(request + body)  # no shutdown: the server must close on its own
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert status_of(received) == 200
        assert b"connection: close\r\n" in received.lower()
        # HTTP/1.0 closes by default too.
        with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.endswith(b'{"status":"ok"}')


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("kind", ["429", "500", "503"])
def test_status_faults_answer_with_that_status_then_recover(kind, httpx):
    with LoopbackServer(faults=f"{kind}@1") as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
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
        response = httpx.post(srv.base_url + CHAT, json=chat_body(), timeout=10)
    assert response.headers["retry-after"] == expected
    assert response.headers["retry-after-ms"] == str(int(float(expected) * 1000))


@pytest.mark.parametrize("kind", ["drop", "partial"])
def test_drop_and_partial_are_transport_errors(kind, httpx):
    with LoopbackServer(faults=f"{kind}@1") as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
        with pytest.raises(httpx.TransportError):
            client.post(CHAT, json=chat_body())
        assert client.post(CHAT, json=chat_body()).status_code == 200
        stats = srv.stats()
    assert stats["faults"] == {kind: 1}
    assert stats["connections"] == 2  # the faulty connection was closed, the retry opened another


def test_partial_sends_half_of_what_content_length_promises():
    with LoopbackServer(faults="partial@1") as srv:
        body = json.dumps(chat_body()).encode()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
        response = raw_exchange(srv, head + body)
    head, _, payload = response.partition(b"\r\n\r\n")
    promised = int(re.search(rb"content-length: (\d+)", head).group(1))
    assert status_of(response) == 200
    assert 0 < len(payload) < promised


def test_malformed_is_a_200_that_is_not_json(httpx):
    with LoopbackServer(faults="malformed@1") as srv:
        response = httpx.post(srv.base_url + CHAT, json=chat_body(), timeout=10)
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            response.json()
        assert srv.stats()["faults"] == {"malformed": 1}


def test_timeout_holds_the_request_until_the_client_gives_up(httpx):
    with LoopbackServer(faults="timeout@1") as srv, httpx.Client(base_url=srv.base_url) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(CHAT, json=chat_body(), timeout=0.3)
        assert client.post(CHAT, json=chat_body(), timeout=10).status_code == 200
        stats = srv.stats()
    assert stats["faults"] == {"timeout": 1}
    assert stats["responses"] == {"200": 1}


def test_close_ends_a_held_timeout_connection(httpx):
    srv = LoopbackServer(faults="timeout:1.0").start()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, srv.base_url + CHAT, json=chat_body(), timeout=600)
        while srv.stats()["faults"].get("timeout") != 1:
            time.sleep(0.01)  # wait until the request is held, or close() would race it
        srv.close()  # raises if the server thread does not stop
        with pytest.raises(httpx.TransportError):
            pending.result()


def test_nth_request_schedule_is_deterministic(httpx):
    with LoopbackServer(faults="500@2,429@4,drop@5") as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
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
    with LoopbackServer(faults="503:first=2") as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
        codes = {name: [client.post(CHAT, json=chat_body(name)).status_code for _ in range(3)] for name in "ab"}
        assert client.post(CHAT, json=chat_body("a")).status_code == 200
        stats = srv.stats()
    assert codes == {"a": [503, 503, 200], "b": [503, 503, 200]}
    assert stats["faults"] == {"503": 4}
    assert stats["chat_completions"] == 7


def test_first_k_items_apply_in_spec_order(httpx):
    spec = "429:first=1,500:first=2"
    with LoopbackServer(faults=spec) as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
        codes = [client.post(CHAT, json=chat_body()).status_code for _ in range(3)]
    assert codes == [429, 500, 200]


def test_rate_faults_are_reproducible_for_a_seed(httpx):
    def run(seed: int, spec: str) -> list[int]:
        with LoopbackServer(faults=spec, seed=seed) as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
            return [client.post(CHAT, json=chat_body()).status_code for _ in range(40)]

    first = run(7, "429:0.3,500:0.2")
    assert first == run(7, "429:0.3,500:0.2")
    assert {429, 500, 200} == set(first)
    assert run(0, "500:1") == [500] * 40
    assert run(0, "500:0") == [200] * 40


def test_nth_wins_over_rate_and_rules_can_be_objects(httpx):
    rules = [FaultRule("500", nth=1), FaultRule("429", rate=1.0, retry_after=3)]
    with LoopbackServer(faults=rules) as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
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


# --------------------------------------------------------------------------- counters


def test_stats_endpoint_matches_the_in_process_counters_and_resets(httpx):
    with LoopbackServer(faults="500@1,drop@2") as srv, httpx.Client(base_url=srv.base_url, timeout=10) as client:
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


def test_concurrent_burst_all_succeeds(httpx):
    """500 requests, 50 at a time, 10 ms latency: every one answered correctly. No timing is asserted."""

    async def burst(base_url: str) -> list[str]:
        limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
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
