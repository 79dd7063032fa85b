"""The engine guide's run on an existing Ray cluster, run as the page gives it: a cluster started with
``ray start``, joined with ``--executor ray:address=auto``; the rows are those of a local run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from assay.engine.run import RunSettings, execute_run

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "engine.md"


def _commands() -> list[list[str]]:
    section = GUIDE.read_text(encoding="utf-8").split("### On an existing Ray cluster", 1)[1]
    block = re.search(r"```console\n(.*?)```", section, re.S)
    assert block is not None, "the guide's section has no console example"
    return [shlex.split(line[2:]) for line in block.group(1).splitlines() if line.startswith("$ ")]


def test_a_run_joins_an_existing_cluster_as_the_guide_says(ray_cluster, children, tmp_path, host):
    start, run = _commands()
    assert start[:3] == ["ray", "start", "--head"] and run[:2] == ["assay", "run"]
    bin_dir = Path(sys.executable).parent
    started = subprocess.run(
        [str(bin_dir / "ray"), *start[1:], "--disable-usage-stats", "--include-dashboard=false"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        done = subprocess.run(
            [str(bin_dir / "assay"), *run[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        subprocess.run([str(bin_dir / "ray"), "stop", "--force"], capture_output=True, timeout=300)
    out = run[run.index("--out") + 1]
    local = execute_run(
        RunSettings(pack="example", endpoints=["scripted:mixed"], out=tmp_path / "local", progress=False), host=host
    )
    assert (tmp_path / out / "bundle" / "rows.jsonl").read_bytes() == (local.bundle / "rows.jsonl").read_bytes()
    assert '"name": "ray"' in (tmp_path / out / "bundle" / "run.json").read_text()
