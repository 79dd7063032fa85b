"""When a run started and finished (issue 15, item 4): recorded in the run manifest, kept by a resume, and fixed by
SOURCE_DATE_EPOCH so that the same scripted inputs still give byte-identical bundles."""

from __future__ import annotations

import datetime
import json

from assay.engine.run import RunSettings, execute_run


def _settings(out, **more) -> RunSettings:
    return RunSettings(
        pack="example", endpoints=["scripted:comply"], stages=["semantic"], out=out, progress=False, **more
    )


def _run_manifest(bundle) -> dict:
    return json.loads((bundle / "run.json").read_text())


def test_the_manifest_records_the_clock_when_no_build_time_is_set(tmp_path, host, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    manifest = _run_manifest(execute_run(_settings(tmp_path / "o"), host=host).bundle)
    after = datetime.datetime.now(datetime.UTC)

    def parsed(text: str) -> datetime.datetime:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)

    assert before <= parsed(manifest["started_at"]) <= parsed(manifest["finished_at"]) <= after


def test_a_build_time_fixes_both_and_two_runs_are_byte_identical(tmp_path, host, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    first = execute_run(_settings(tmp_path / "a"), host=host).bundle
    second = execute_run(_settings(tmp_path / "b"), host=host).bundle
    manifest = _run_manifest(first)
    assert manifest["started_at"] == manifest["finished_at"] == "2025-12-01T00:00:00Z"
    for name in ("run.json", "rows.jsonl", "metrics.json", "bundle.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_a_resumed_run_keeps_when_it_started(tmp_path, host, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    execute_run(_settings(tmp_path / "o"), host=host)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764550800")  # an hour later
    manifest = _run_manifest(execute_run(_settings(tmp_path / "o", resume=True), host=host).bundle)
    assert manifest["started_at"] == "2025-12-01T00:00:00Z" and manifest["finished_at"] == "2025-12-01T01:00:00Z"


def test_a_malformed_build_time_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    result = cli("run", "--pack", "example", "--endpoint", "scripted:comply", "--out", str(tmp_path / "o"), "--quiet")
    assert result.returncode == 2 and "SOURCE_DATE_EPOCH='yesterday'" in result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "o").exists()
