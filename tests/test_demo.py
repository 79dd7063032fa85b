"""`make demo`'s job, run in process (scripted here; the real model in tests/test_local_model.py)."""

from __future__ import annotations

from assay.demo import main
from assay.validate import validate_path


def test_demo_writes_a_valid_bundle_and_reports(strace, tmp_path, host, capsys):
    assert main(["--out", str(tmp_path), "--endpoint", "scripted:mixed", "--pack", "example", "--defense", "D0"]) == 0
    out = capsys.readouterr().out
    assert f"bundle archive: {tmp_path / 'bundle.zip'}" in out
    assert f"report: {tmp_path / 'report.html'} (HTML), {tmp_path / 'report.md'} (Markdown)" in out
    assert validate_path(tmp_path / "bundle.zip", host.registry).ok
    assert "<svg" in (tmp_path / "report.html").read_text()
    assert "semantic.core_fail_rate" in (tmp_path / "report.md").read_text()
