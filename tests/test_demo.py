"""`make demo`'s job, run in process."""

from __future__ import annotations

from assay.demo import main
from assay.validate import validate_path


def test_demo_writes_a_valid_bundle_and_a_report(tmp_path, host, capsys):
    assert main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"bundle archive: {tmp_path / 'bundle.zip'}" in out and f"report: {tmp_path / 'report.md'}" in out
    assert validate_path(tmp_path / "bundle.zip", host.registry).ok
    report = (tmp_path / "report.md").read_text()
    assert "## semantic.core_fail_rate" in report and "synthetic scripted rows (no model)" in report
