"""A run fails loudly and cannot collide (issue 15): every bad input here was first tried as an attack on trust.

Each test gives ``assay run`` something a user gets wrong (a dead endpoint, a URL without ``/v1``, a server
that answers garbage, a second run in the same ``--out``, Ctrl-C, an impossible ``--out``) and checks for
one line naming the cause, the right exit status, nothing written where nothing should be, and nothing lost
or paid for twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from assay.testing.openai_server import LoopbackServer, spawn_server, stop_server

BASE = ["run", "--pack", "example", "--stages", "semantic", "--quiet"]


def _endpoint(base_url: str, **options: str) -> str:
    settings = {"model": "echo", "base_url": base_url, "id": "echo", "backoff": "0.01", "backoff_cap": "0.02"}
    return "openai:" + ",".join(f"{k}={v}" for k, v in {**settings, **options}.items())


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# -- fail loudly: the preflight request ---------------------------------------------------------------------------


def test_a_refused_connection_stops_the_run_before_anything_is_written(cli, tmp_path):
    result = cli(*BASE, "--endpoint", _endpoint("http://127.0.0.1:9/v1"), "--out", str(tmp_path / "o"))
    line = _one_error_line(result)
    assert result.returncode == 1
    assert "preflight" in line and "127.0.0.1:9" in line and "Connect call failed" in line, line
    assert not (tmp_path / "o").exists()


def test_an_unresolvable_host_is_named(cli, tmp_path):
    result = cli(*BASE, "--endpoint", _endpoint("http://no-such-host.invalid/v1"), "--out", str(tmp_path / "o"))
    line = _one_error_line(result)
    assert result.returncode == 1 and "no-such-host.invalid" in line, line


def test_a_base_url_without_v1_gets_the_likely_fix(cli, tmp_path):
    with LoopbackServer() as server:
        result = cli(*BASE, "--endpoint", _endpoint(server.base_url), "--out", str(tmp_path / "o"))
    line = _one_error_line(result)
    assert result.returncode == 1
    assert f"HTTP 404 from {server.base_url}/chat/completions" in line and "missing /v1?" in line, line
    assert not (tmp_path / "o").exists()


def test_malformed_response_bodies_are_named_with_what_came_back(cli, tmp_path):
    with LoopbackServer(faults="malformed:1.0") as server:
        result = cli(*BASE, "--endpoint", _endpoint(server.openai_base_url), "--out", str(tmp_path / "o"))
    line = _one_error_line(result)
    assert result.returncode == 1 and "malformed response body from" in line, line


# -- fail loudly: the error rate ----------------------------------------------------------------------------------


def test_a_dead_endpoint_without_preflight_fails_the_run_and_every_reader_flags_it(cli, tmp_path):
    out = tmp_path / "o"
    result = cli(*BASE, "--endpoint", _endpoint("http://127.0.0.1:9/v1"), "--no-preflight", "--out", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "6 error rows" in result.stdout  # the bundle is kept: it is a faithful record
    assert "endpoint echo: 6 of 6 rows are error rows (100%, more than 10%)" in result.stderr
    assert "127.0.0.1:9" in result.stderr and "--resume --retry-errors" in result.stderr
    validated = cli("validate", str(out / "bundle"))
    assert validated.returncode == 0 and "warning: endpoint echo: 6 of 6 rows are error rows" in validated.stderr
    report = cli("report", str(out / "bundle")).stdout
    assert "> **Warning:** Endpoint echo: 6 of 6 rows are error rows" in report


def test_an_error_rate_under_the_limit_warns_and_passes(cli, tmp_path):
    with LoopbackServer(faults="500@1") as server:  # one request of the run fails for good (retries=0)
        endpoint = _endpoint(server.openai_base_url, retries="0")
        result = cli(*BASE, "--endpoint", endpoint, "--no-preflight", "--max-error-rate", "0.5", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "warning: endpoint echo: 1 of 6 rows are error rows" in result.stderr


def test_a_model_that_answers_one_thing_looks_degenerate_not_safe(cli, tmp_path):
    script = [{"match": ".*", "replies": ["OK."]}]
    with LoopbackServer(script=script) as server:
        result = cli(*BASE, "--endpoint", _endpoint(server.openai_base_url), "--out", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    assert "warning: endpoint echo looks degenerate: 6 of 6 answers are one and the same text" in result.stderr
    report = cli("report", str(tmp_path / "o" / "bundle")).stdout
    assert "looks degenerate" in report


# -- runs that cannot collide ------------------------------------------------------------------------------------


def test_retry_errors_runs_only_the_error_rows_again_and_pays_for_nothing_twice(cli, tmp_path):
    out = tmp_path / "o"
    with LoopbackServer(faults="500@1,500@2") as server:  # the run's first two requests fail for good
        endpoint = _endpoint(server.openai_base_url, retries="0")
        first = cli(*BASE, "--endpoint", endpoint, "--no-preflight", "--out", str(out))
        assert first.returncode == 1 and "2 error rows" in first.stdout, first.stdout + first.stderr
        requests_before = server.stats()["requests"]
        again = cli(*BASE, "--endpoint", endpoint, "--no-preflight", "--out", str(out), "--resume", "--retry-errors")
        paid = server.stats()["requests"] - requests_before
    assert again.returncode == 0, again.stderr
    assert "0 error rows, 4 resumed, 2 retried" in again.stdout
    assert paid == 2  # only the two failed items were asked again
    rows = [json.loads(line) for line in (out / "bundle" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 6 == len({json.dumps(r["key"], sort_keys=True) for r in rows})


def test_retry_errors_needs_resume(cli, tmp_path):
    result = cli(*BASE, "--endpoint", "scripted:comply", "--retry-errors", "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "--retry-errors goes with --resume" in _one_error_line(result)


def test_a_second_run_in_the_same_out_is_refused_while_the_first_holds_it(cli, tmp_path):
    out = tmp_path / "o"
    (out / "state").mkdir(parents=True)
    fd = os.open(out / "state" / "lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242\n")
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a running `assay run` holds for its whole life
    try:
        result = cli(*BASE, "--endpoint", "scripted:comply", "--out", str(out), "--resume")
    finally:
        os.close(fd)
    line = _one_error_line(result)
    assert result.returncode == 2 and "in use by another assay run (pid 4242)" in line, line
    assert not (out / "state" / "rows.jsonl").exists()
    assert cli(*BASE, "--endpoint", "scripted:comply", "--out", str(out), "--resume").returncode == 0


def test_a_failed_usage_check_writes_nothing_and_the_corrected_command_runs(cli, tmp_path):
    out = tmp_path / "o"
    bad = cli(*BASE, "--endpoint", "openai:model=m,timeout=soon", "--out", str(out))
    assert bad.returncode == 2 and "timeout" in _one_error_line(bad)
    assert not out.exists()
    assert cli(*BASE, "--endpoint", "scripted:comply", "--out", str(out)).returncode == 0


@pytest.mark.parametrize(
    ("where", "why"),
    [("file/out", "Not a directory"), ("/proc/assay-out", "No such file"), ("/sys/assay-out", "not permitted")],
)
def test_an_impossible_out_is_one_line(cli, tmp_path, where, why):
    (tmp_path / "file").write_text("x")
    out = tmp_path / where if not where.startswith("/") else Path(where)
    result = cli(*BASE, "--endpoint", "scripted:comply", "--out", str(out))
    line = _one_error_line(result)
    assert result.returncode == 2 and str(out) in line and why in line, line


@pytest.mark.parametrize(
    ("option", "value"), [("--concurrency", "0"), ("--epochs", "0"), ("--max-tokens", "-1"), ("--limit", "0")]
)
def test_impossible_numbers_are_errors_never_replaced(cli, tmp_path, option, value):
    result = cli(*BASE, "--endpoint", "scripted:comply", option, value, "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and option in _one_error_line(result)
    assert not (tmp_path / "o").exists()


def test_an_impossible_number_in_a_run_file_is_an_error_too(cli, tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text(f"pack: example\nendpoints: ['scripted:comply']\nout: {tmp_path / 'o'}\nconcurrency: 0\n")
    result = cli("run", str(run_file), "--quiet")
    assert result.returncode == 2 and "concurrency 0" in _one_error_line(result)


def _wait_for_rows(log: Path, rows: int, run: subprocess.Popen[str]) -> None:
    """Wait until ``run`` has logged ``rows`` rows; fail if it ends first or hangs (a guard, not a measure of speed)."""
    deadline = time.monotonic() + 300
    while not log.exists() or log.read_bytes().count(b"\n") < rows:
        assert run.poll() is None, f"the run ended before it logged {rows} rows: {run.communicate()}"
        assert time.monotonic() < deadline, f"the run did not log {rows} rows in 300 s"
        time.sleep(0.02)


def test_ctrl_c_exits_130_with_the_exact_command_that_resumes_it(children, tmp_path):
    # The server answers the preflight and 19 items, then holds every request until it is released: the run is
    # still at work when Ctrl-C comes, however fast the machine is, and the resumed run is answered.
    proc, base_url = spawn_server(hold_after=20)
    out = tmp_path / "o"
    command = [
        "run", "--pack", "example", "--seeds", "0,1,2,3,4,5,6,7", "--stages", "semantic", "--quiet",
        "--endpoint", _endpoint(f"{base_url}/v1"), "--concurrency", "2", "--out", str(out),
    ]  # fmt: skip
    victim = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        log = out / "state" / "rows.jsonl"
        _wait_for_rows(log, 5, victim)
        victim.send_signal(signal.SIGINT)
        _, stderr = victim.communicate(timeout=300)
        assert victim.returncode == 130, stderr
        hint = stderr.strip().splitlines()[-1]
        assert "resume with: assay run " in hint and hint.endswith(" --resume"), stderr
        done = log.read_bytes().count(b"\n")
        assert 5 <= done < 48, done
        with urllib.request.urlopen(urllib.request.Request(f"{base_url}/release", method="POST"), timeout=300):
            pass
        resumed = subprocess.run(
            [sys.executable, "-m", *hint.split("resume with: ", 1)[1].replace("assay ", "assay.cli ", 1).split()],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        if victim.poll() is None:  # a failed check above: the run is still held
            victim.kill()
            victim.communicate()
        stop_server(proc)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done} resumed" in resumed.stdout
    rows = (out / "bundle" / "rows.jsonl").read_bytes().splitlines()
    assert len(rows) == 48 == len(set(rows))


def _on_a_terminal(*args: str) -> tuple[int, str]:
    """Run the command line with a pseudo-terminal as stdout and stderr; its exit status and all it wrote."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=300), b"".join(chunks).decode("utf-8", "replace")


def test_long_commands_show_progress_on_a_terminal(children, confinement, tmp_path):
    code, shown = _on_a_terminal("pack", "check", "example")
    assert code == 0 and "assay pack check example" in shown, shown
    run = subprocess.run(
        [sys.executable, "-m", "assay.cli", *BASE, "--endpoint", "scripted:comply", "--out", str(tmp_path / "o")],
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0
    code, shown = _on_a_terminal("validate", str(tmp_path / "o" / "bundle"))
    assert code == 0 and "assay validate: validating" in shown, shown


@pytest.mark.parametrize(
    "args",
    [
        ("pack", "check", "example", "--concurrency", "0"),  # a semaphore of 0 waited for ever
        ("review", "export", "no-bundle", "--out", "x", "--sample", "0"),
        ("review", "export", "no-bundle", "--out", "x", "--seed", "-1"),
    ],
)
def test_other_commands_refuse_impossible_numbers_too(cli, tmp_path, args):
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2 and "is not in the range" in _one_error_line(result)


def test_a_dead_judge_backend_stops_the_run_too(cli, tmp_path):
    judge = "llm:backend=openai,model=j,base_url=http://127.0.0.1:9/v1"
    result = cli(*BASE, "--endpoint", "scripted:comply", "--judge", judge, "--out", str(tmp_path / "o"))
    line = _one_error_line(result)
    assert result.returncode == 1 and "endpoint judge-openai failed its preflight request" in line, line
    assert not (tmp_path / "o").exists()
