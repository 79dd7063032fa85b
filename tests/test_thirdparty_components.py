"""A third-party judge and a third-party sandbox, each its own pip distribution, replace the built-ins.

Both live in tests/thirdparty/; they are installed with pip into a scratch
folder and found through their ``assay`` entry points, with no change to assay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

THIRDPARTY = REPO / "tests" / "thirdparty"


def test_thirdparty_judge_and_sandbox_replace_the_builtins(scratch_venv, assay_cli, tmp_path):
    site = tmp_path / "site"
    for name in ("assay-judge-keyword", "assay-sandbox-dict"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(site),
                str(THIRDPARTY / name),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    plugins = json.loads(assay_cli("plugins", "--json", env=env).stdout)
    assert {
        "kind": "judges",
        "name": "keyword",
        "plugin": "keyword-judge",
        "distribution": "assay-judge-keyword",
        "version": "0.1.0",
    } in [{k: v for k, v in row.items() if k != "files_sha256"} for row in plugins]
    assert any(
        p["kind"] == "sandboxes" and p["name"] == "dict" and p["distribution"] == "assay-sandbox-dict" for p in plugins
    )
    result = assay_cli(
        "run",
        "--pack",
        "example",
        "--endpoint",
        "scripted:comply",
        "--judge",
        "keyword",
        "--sandbox",
        "dict",
        "--stages",
        "semantic,audit,exec",
        "--out",
        str(tmp_path / "out"),
        "--quiet",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "bundle" / "rows.jsonl").read_text().splitlines()]
    attacks = [r for r in rows if r["key"]["case_id"] != "benign-ticket-summary"]
    assert all(
        r["stages"]["semantic"]["produced_by"]["name"] == "keyword" and r["stages"]["semantic"]["core_fail"]
        for r in attacks
    )
    assert all(
        r["stages"]["exec"]["observed_harm"]
        for r in attacks
        if r["key"]["case_id"] in ("dpi-payroll-export", "mpi-invoice-bcc", "tri-calendar-note")
    )
    run = json.loads((tmp_path / "out" / "bundle" / "run.json").read_text())
    assert run["sandbox"] == "dict" and {j["name"] for j in run["judges"]} == {"keyword"}
    # The bundle names a third-party judge, so validating it needs that plugin too, and then it passes.
    assert assay_cli("validate", str(tmp_path / "out" / "bundle.zip"), env=env).returncode == 0
