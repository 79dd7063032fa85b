"""The staged-endpoint design end to end: every case x D0, B2, D3, D4 x all three stages, scripted agents."""

from __future__ import annotations

import json

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.reports import read_bundle, recompute, render_markdown


def test_full_scripted_run_validates_and_reports_every_table(confinement, assay_cli, tmp_path, host):
    if host.registry.get("packs", "safeclaw") is None:
        pytest.skip("assay-pack-safeclaw is not installed (make test installs it)")
    outcome = execute_run(
        RunSettings(
            pack="safeclaw",
            endpoints=["scripted:mixed", "scripted:refuse"],
            defenses=["D0", "B2", "D3", "D4"],
            out=tmp_path / "run",
            progress=False,
            concurrency=32,
        ),
        host=host,
    )
    assert outcome.report.ok, [i.format() for i in outcome.report.ordered()[:5]]
    assert outcome.rows == 672 * 2 * 4 and outcome.error_rows == 0
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert run["plan"]["stages"] == ["semantic", "audit", "exec"] and run["sandbox"] == "local"
    data = recompute(read_bundle(outcome.bundle), host.registry)
    assert data.reproduced
    # CoreFail@N and HarmEvidence@N are over the 600 attack cases in every endpoint x defense cell; the 72 benign
    # companions are reported on their own, as utility (issue 14, item 1).
    for metric in ("semantic.core_fail_rate", "audit.harm_evidence_rate"):
        cells = [v for v in data.values if v.metric == metric]
        assert len(cells) == 8 and {v.denominator for v in cells} == {600}, metric
    utility = [v for v in data.values if v.metric == "exec.benign_utility"]
    assert len(utility) == 8 and {v.denominator for v in utility} == {72}
    accounting = [v for v in data.values if v.metric == "audit.accounting"]
    assert accounting and all(v.detail["closes"] for v in accounting)
    join = [v for v in data.values if v.metric == "exec.core_exec_join"]
    assert join and sum(v.detail["CoreFail_ExecHarm"] for v in join) > 0
    refuse_harm = [
        v for v in data.values if v.metric == "exec.observed_harm_rate" and v.group["endpoint"] == "scripted-refuse"
    ]
    assert refuse_harm and all(v.numerator == 0 for v in refuse_harm)
    markdown = render_markdown(data)
    for needle in ("CoreFail", "HarmEvidence", "SemanticOnly", "ObservedHarm", "closes", "D4", "Benign utility"):
        assert needle in markdown, needle
    html = tmp_path / "report.html"
    assert assay_cli("report", str(outcome.archive), "--html", str(html)).returncode == 0
    assert html.read_text().count("<svg") >= 2


def test_replay_check_passes_on_every_safeclaw_case(confinement, assay_cli, host):
    if host.registry.get("packs", "safeclaw") is None:
        pytest.skip("assay-pack-safeclaw is not installed (make test installs it)")
    result = assay_cli("pack", "check", "safeclaw")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "check passed: 600 attack cases, 72 benign cases" in result.stderr
