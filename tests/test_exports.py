"""``assay export``: the exports read back by the other tools' own code (issue 15, item 4).

Inspect AI's log reader (``inspect_ai.log.read_eval_log``, what ``inspect view`` lists and opens) loads every
exported log, and Every Eval Ever's own validator (``every_eval_ever.validator.validate``) accepts every record
without a warning; the numbers in both are the bundle's recomputed metrics.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.testing.openai_server import LoopbackServer


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def staged_bundle(confinement, tmp_path_factory, host) -> Path:
    out = tmp_path_factory.mktemp("export")
    outcome = execute_run(
        RunSettings(
            pack="safeclaw",
            endpoints=["scripted:mixed", "scripted:refuse"],
            defenses=["D0", "D3"],
            sample="stratified:1",
            out=out / "run",
            progress=False,
        ),
        host=host,
    )
    return outcome.bundle


def test_inspects_own_reader_loads_every_log_with_the_bundles_numbers(cli, staged_bundle, tmp_path):
    from inspect_ai.log import list_eval_logs, read_eval_log

    result = cli("export", str(staged_bundle), "--format", "inspect", "--out", str(tmp_path / "logs"))
    assert result.returncode == 0 and "4 inspect files written" in result.stdout, result.stdout + result.stderr
    assert len(list_eval_logs(str(tmp_path / "logs"))) == 4  # what `inspect view` lists
    rows = _rows(staged_bundle)
    metrics = {
        (m["metric"], m["group"].get("endpoint"), m["group"].get("condition")): m["value"]
        for m in json.loads((staged_bundle / "metrics.json").read_text())["metrics"]
    }
    for path in sorted((tmp_path / "logs").glob("*.json")):
        log = read_eval_log(str(path))
        endpoint = log.eval.model.removeprefix("assay/")
        condition = log.eval.task.rsplit("-", 1)[1]
        mine = [r for r in rows if r["key"]["endpoint"] == endpoint and r["key"]["condition"] == condition]
        assert log.status == "success" and len(log.samples) == len(mine)
        means = {score.name: score.metrics["mean"].value for score in log.results.scores}
        # An outcome's mean over the samples it applies to is the metric's rate (attack outcomes skip companions).
        assert means["semantic.core_fail"] == pytest.approx(metrics["semantic.core_fail_rate", endpoint, condition])
        assert means["exec.observed_harm"] == pytest.approx(metrics["exec.observed_harm_rate", endpoint, condition])
        by_case = {r["key"]["case_id"]: r for r in mine}
        for sample in log.samples:
            row = by_case[sample.id]
            assert sample.output.completion == (row["final_output"] or "")
            assert any(m.role == "user" for m in sample.messages) and sample.metadata["assay_key"] == row["key"]


def test_every_eval_evers_own_validator_accepts_every_record(cli, staged_bundle, tmp_path):
    from every_eval_ever.validator.validate import main as eee_validate

    out = tmp_path / "eee"
    result = cli("export", str(staged_bundle), "--format", "eee", "--out", str(out))
    assert result.returncode == 0 and "4 eee files written" in result.stdout, result.stdout + result.stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.json"))
    assert len(files) == 4 and all(f.startswith("data/assay-safeclaw-") for f in files)
    printed = io.StringIO()
    cwd = Path.cwd()
    try:
        import os

        os.chdir(out)  # the validator checks each file's datastore path, relative to the repository root
        with redirect_stdout(printed):
            status = eee_validate([*files, "--format", "json"])
    finally:
        os.chdir(cwd)
    reports = json.loads(printed.getvalue())
    assert status == 0, reports
    assert all(r["valid"] and not r["errors"] and not r["warnings"] for r in reports), reports
    metrics = {
        (m["metric"], m["group"].get("endpoint"), m["group"].get("condition")): m
        for m in json.loads((staged_bundle / "metrics.json").read_text())["metrics"]
    }
    record = json.loads((out / files[0]).read_text())
    endpoint = record["model_info"]["additional_details"]["assay_endpoint"]
    condition = record["source_metadata"]["additional_details"]["condition"]
    for result_ in record["evaluation_results"]:
        claimed = metrics[result_["evaluation_name"], endpoint, condition]
        assert result_["score_details"]["score"] == pytest.approx(claimed["value"])
        assert result_["score_details"]["details"]["n"] == str(claimed["denominator"])
    core = next(r for r in record["evaluation_results"] if r["evaluation_name"] == "semantic.core_fail_rate")
    assert core["metric_config"]["lower_is_better"] is True


def test_the_same_bundle_exports_the_same_bytes(cli, staged_bundle, tmp_path):
    for fmt in ("inspect", "eee"):
        for copy in ("a", "b"):
            assert (
                cli("export", str(staged_bundle), "--format", fmt, "--out", str(tmp_path / fmt / copy)).returncode == 0
            )
        first = {p.relative_to(tmp_path / fmt / "a"): p.read_bytes() for p in (tmp_path / fmt / "a").rglob("*.json")}
        second = {p.relative_to(tmp_path / fmt / "b"): p.read_bytes() for p in (tmp_path / fmt / "b").rglob("*.json")}
        assert first == second and first


def test_an_error_row_is_an_inspect_sample_with_its_error(cli, tmp_path, host):
    from inspect_ai.log import read_eval_log

    with LoopbackServer(faults="500@1") as server:
        outcome = execute_run(
            RunSettings(
                pack="example",
                endpoints=[f"openai:model=echo,base_url={server.openai_base_url},id=echo,retries=0"],
                stages=["semantic"],
                out=tmp_path / "run",
                progress=False,
                preflight=False,
            ),
            host=host,
        )
    assert outcome.error_rows == 1
    assert cli("export", str(outcome.bundle), "--format", "inspect", "--out", str(tmp_path / "logs")).returncode == 0
    (path,) = (tmp_path / "logs").glob("*.json")
    log = read_eval_log(str(path))
    failed = [s for s in log.samples if s.error is not None]
    assert len(failed) == 1 and "HTTP 500" in failed[0].error.message
    assert log.results.completed_samples == len(log.samples) - 1


def test_export_refuses_an_out_that_is_a_file(cli, staged_bundle, tmp_path):
    (tmp_path / "file").write_text("x")
    result = cli("export", str(staged_bundle), "--format", "eee", "--out", str(tmp_path / "file"))
    assert result.returncode == 2 and "is a file" in result.stderr and result.stderr.count("\n") == 1
