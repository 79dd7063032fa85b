"""The Ray executor on a local Ray cluster gives the same rows as the local executor."""

from __future__ import annotations

import json

from assay.engine.run import RunSettings, execute_run


def test_ray_rows_match_local_rows(ray_cluster, tmp_path, host):
    common = dict(pack="example", endpoints=["scripted:mixed", "scripted:comply"], seeds=[0, 1], progress=False)
    local = execute_run(RunSettings(out=tmp_path / "local", **common), host=host)
    distributed = execute_run(RunSettings(out=tmp_path / "ray", executor="ray:num_cpus=2,batch=3", **common), host=host)
    assert distributed.report.ok, [i.format() for i in distributed.report.ordered()]
    assert (local.bundle / "rows.jsonl").read_bytes() == (distributed.bundle / "rows.jsonl").read_bytes()
    assert (local.bundle / "metrics.json").read_bytes() == (distributed.bundle / "metrics.json").read_bytes()
    run = json.loads((distributed.bundle / "run.json").read_text())
    assert run["executor"] == {"name": "ray", "concurrency": 16, "params": {"num_cpus": "2", "batch": "3"}}
