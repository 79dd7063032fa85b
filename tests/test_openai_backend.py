"""The openai backend against a real HTTP server on loopback: normal runs, injected faults, SIGKILL + resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.testing.openai_server import LoopbackServer, spawn_server, stop_server

ATTACK_AND_BENIGN = 6  # example-pack cases the semantic stage runs


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


def _settings(out: Path, base_url: str, stages: list[str] | None = None, **endpoint_options) -> RunSettings:
    options = {
        "model": "echo",
        "base_url": base_url,
        "id": "echo",
        "backoff": "0.01",
        "backoff_cap": "0.05",
        **endpoint_options,
    }
    spec = "openai:" + ",".join(f"{k}={v}" for k, v in options.items())
    return RunSettings(
        pack="example",
        endpoints=[spec],
        out=out,
        seeds=[0, 1],
        progress=False,
        concurrency=4,
        stages=stages or ["semantic", "audit", "exec"],
        preflight=False,  # the fault plans count requests from the run's first; test_preflight.py tests the preflight
    )


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
def test_clean_run_records_usage_and_validates(tmp_path, host, http):
    with LoopbackServer(latency_ms=5) as server:
        outcome = execute_run(_settings(tmp_path / "out", server.openai_base_url, http=http), host=host)
    assert outcome.report.ok and outcome.error_rows == 0
    rows = _rows(outcome.bundle)
    assert len(rows) == ATTACK_AND_BENIGN * 2 and not any(row["scripted"] for row in rows)
    assert all(
        row["usage"]["model_calls"] >= 2 and row["usage"]["prompt_tokens"] > 0 for row in rows
    )  # semantic + exec
    assert all(row["final_output"].startswith("ECHO: ") for row in rows)
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert run["endpoints"][0]["backend"] == "openai" and run["endpoints"][0]["options"]["http"] == http


def test_retries_recover_from_every_fault_kind(tmp_path, host):
    # Each distinct request fails once per listed fault kind before it succeeds. No fault holds a request, so the
    # client's timeout only guards against a hang.
    faults = "429:first=1:ra=0,500:first=2,malformed:first=3,drop:first=4,partial:first=5"
    with LoopbackServer(faults=faults) as server:
        settings = _settings(tmp_path / "out", server.openai_base_url, retries="6", timeout="300")
        outcome = execute_run(settings, host=host)
        stats = server.stats()
    assert outcome.report.ok and outcome.error_rows == 0, [r["errors"] for r in _rows(outcome.bundle) if r["errors"]]
    assert outcome.rows == ATTACK_AND_BENIGN * 2
    for kind in ("429", "500", "malformed", "drop", "partial"):
        assert stats["faults"].get(kind, 0) >= ATTACK_AND_BENIGN * 2, (kind, stats["faults"])


def test_exhausted_retries_become_error_rows_and_nothing_is_lost(tmp_path, host):
    # 90% of requests fail (503s and 429s, and the 4th request times out); with one retry most items exhaust their
    # budget. The client's timeout must also let every reply that does come arrive in time, on however loaded a
    # machine: one held request costs it once, so it is long.
    with LoopbackServer(faults="timeout@4,503:0.45,429:0.45:ra=0") as server:
        outcome = execute_run(
            _settings(tmp_path / "out", server.openai_base_url, ["semantic", "audit"], retries="1", timeout="5"),
            host=host,
        )
        stats = server.stats()
    assert stats["faults"]["timeout"] == 1, stats["faults"]
    rows = _rows(outcome.bundle)
    assert outcome.report.ok, [i.format() for i in outcome.report.ordered()]
    assert len(rows) == ATTACK_AND_BENIGN * 2 == len({json.dumps(r["key"], sort_keys=True) for r in rows})
    errors = [r for r in rows if r["errors"]]
    assert errors and len(errors) < len(rows), (len(errors), stats["faults"])
    for row in errors:
        error = row["errors"][0]
        assert error["stage"] == "semantic" and error["type"] == "retries_exhausted" and error["attempts"] == 2
        assert row["stages"] == {}


def test_retry_after_is_honoured(tmp_path, host):
    with LoopbackServer(faults="429:first=1:ra=1") as server:
        started = time.monotonic()
        outcome = execute_run(
            RunSettings(
                pack="example",
                endpoints=[f"openai:model=echo,base_url={server.openai_base_url},backoff=0.001,id=echo"],
                out=tmp_path / "o",
                limit=1,
                progress=False,
                stages=["semantic"],
            ),
            host=host,
        )
        waited = time.monotonic() - started
    assert outcome.error_rows == 0
    assert waited >= 1.0  # the server asked for one second; the backoff alone would be ~1 ms


def test_sigkill_then_resume_gives_the_rows_of_an_uninterrupted_run(children, tmp_path):
    # The whole run makes 105 requests (the preflight, then two or three per item). The server answers 50 of them,
    # enough for at least 15 items at two at a time, then holds the rest until it is released: the victim is still
    # at work when it is killed, however fast the machine is.
    proc, base_url = spawn_server(hold_after=50)
    command = [
        sys.executable, "-m", "assay.cli", "run", "--pack", "example", "--seeds", "0,1,2,3,4,5,6,7",
        "--endpoint", f"openai:model=echo,base_url={base_url}/v1,id=echo", "--concurrency", "2", "--quiet",
        "--stages", "semantic,audit,exec",
    ]  # fmt: skip
    victim = subprocess.Popen(
        [*command, "--out", str(tmp_path / "victim")], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        log = tmp_path / "victim" / "state" / "rows.jsonl"
        deadline = time.monotonic() + 300  # a guard against a hang, not a measure of speed
        while not log.exists() or log.read_bytes().count(b"\n") < 10:
            assert victim.poll() is None, victim.communicate()
            assert time.monotonic() < deadline, "the victim did not log 10 rows in 300 s"
            time.sleep(0.02)
        os.kill(victim.pid, signal.SIGKILL)
        victim.communicate()
        done = log.read_bytes().count(b"\n")
        assert 10 <= done < 48, done
        with urllib.request.urlopen(urllib.request.Request(f"{base_url}/release", method="POST"), timeout=300):
            pass
        resumed = subprocess.run(
            [*command, "--out", str(tmp_path / "victim"), "--resume"], capture_output=True, text=True, timeout=300
        )
        assert resumed.returncode == 0, resumed.stderr
        assert f"{done} resumed" in resumed.stdout
        reference = subprocess.run(
            [*command, "--out", str(tmp_path / "reference")], capture_output=True, text=True, timeout=300
        )
        assert reference.returncode == 0, reference.stderr
    finally:
        if victim.poll() is None:  # a failed check above: the victim is still held
            victim.kill()
            victim.communicate()
        stop_server(proc)

    # Wall time is measured, so it differs between any two real runs; every other byte is the same.
    def without_timing(path: Path) -> list[dict]:
        rows = _rows(path)
        for row in rows:
            row["usage"].pop("wall_time_s")
        return rows

    assert without_timing(tmp_path / "victim" / "bundle") == without_timing(tmp_path / "reference" / "bundle")
    victim_rows = (tmp_path / "victim" / "bundle" / "rows.jsonl").read_bytes().splitlines()
    assert len(victim_rows) == 48 == len(set(victim_rows))
