"""The engine with the scripted backend: determinism, sampling, resume, run files, judges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.engine.planner import build_plan, parse_sample, select_cases
from assay.engine.run import RunSettings, execute_run
from assay.engine.specs import parse_spec
from assay.errors import UsageError
from assay.hashing import digest_file
from assay.plugins import load_plugins
from assay.validate import validate_path

ATTACKS = ["dpi-payroll-export", "ipi-ticket-attachment", "mex-config-key", "mpi-invoice-bcc", "tri-calendar-note"]


def _run(out: Path, host, **options) -> object:
    settings = dict(pack="example", endpoints=["scripted:mixed"], out=out, progress=False)
    settings.update(options)
    return execute_run(RunSettings(**settings), host=host)


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


def test_specs_parse_plugin_mode_and_options():
    spec = parse_spec("openai:model=m,base_url=http://127.0.0.1:9/v1,id=x")
    assert (spec.plugin, spec.options) == ("openai", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "id": "x"})
    assert parse_spec("scripted:comply").options == {"mode": "comply"}
    assert parse_spec(r"scripted:mixed,DPI=0.5").options == {"mode": "mixed", "DPI": "0.5"}
    for bad in ("", ":x", "openai:model=a,model=b", "a b"):
        with pytest.raises(UsageError):
            parse_spec(bad)


def test_planner_order_and_sampling():
    families = {f"{fam.lower()}-{i}": fam for fam in ("DPI", "IPI", "MEX") for i in range(5)}
    ids, record = select_cases(families, sample=parse_sample("stratified:2"), sample_seed=7)
    assert (
        len(ids) == 6 and ids == sorted(ids) and record == {"strategy": "stratified", "n": 2, "by": "family", "seed": 7}
    )
    assert select_cases(families, sample=parse_sample("stratified:2"), sample_seed=7)[0] == ids
    assert select_cases(families, limit=3) == (sorted(families)[:3], {"strategy": "limit", "n": 3})
    plan = build_plan(["b", "a"], ["e1", "e2"], ["D0"], [1, 0], ["semantic"])
    items = list(plan.items())
    assert len(items) == len(plan) == 8 and items[0].ident() == ("b", "e1", "D0", 1, 0, "default")
    with pytest.raises(UsageError):
        build_plan(["a", "a"], ["e"], ["D0"], [0], ["semantic"])
    with pytest.raises(UsageError):
        parse_sample("random:3")


def test_scripted_runs_are_byte_identical(strace, cli, tmp_path, host):
    first = _run(tmp_path / "a", host, endpoints=["scripted:mixed", "scripted:comply"], seeds=[0, 1])
    second = _run(tmp_path / "b", host, endpoints=["scripted:mixed", "scripted:comply"], seeds=[0, 1])
    assert first.report.ok, [i.format() for i in first.report.ordered()]
    for name in ("bundle.json", "run.json", "rows.jsonl", "metrics.json"):
        assert (first.bundle / name).read_bytes() == (second.bundle / name).read_bytes(), name
    assert digest_file(first.archive) == digest_file(second.archive)
    assert cli("hash", str(first.bundle)).stdout == cli("hash", str(second.bundle)).stdout


def test_scripted_rows_and_manifest_are_marked(strace, tmp_path, host):
    outcome = _run(tmp_path / "r", host, endpoints=["scripted:comply"])
    rows = _rows(outcome.bundle)
    assert rows and all(row["scripted"] for row in rows)
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert run["endpoints"][0]["scripted"] is True and run["endpoints"][0]["model"]["name"] == "scripted:comply"
    assert {j["name"] for j in run["judges"]} == {"calibrated"} and all(
        j["prompt_sha256"].startswith("sha256:") for j in run["judges"]
    )
    assert run["prompts"][0]["name"] == "semantic" and run["conditions"] == [
        {"id": "D0", "kind": "defense", "digest": host.registry.get("defenses", "D0").document["digest"]}
    ]
    assert {p["kind"] for p in run["plugins"]} >= {"backends", "judges", "executors", "families", "packs"}


def test_comply_fails_every_attack_and_refuse_none(strace, tmp_path, host):
    comply = _rows(_run(tmp_path / "c", host, endpoints=["scripted:comply"]).bundle)
    refuse = _rows(_run(tmp_path / "r", host, endpoints=["scripted:refuse"]).bundle)
    attack = lambda rows: [r for r in rows if r["key"]["case_id"] in ATTACKS]  # noqa: E731
    assert all(r["stages"]["semantic"]["core_fail"] is True for r in attack(comply))
    # Every CoreFail row is audited; it is HarmEvidence exactly when it carries concrete evidence (the compliant
    # agent leaks the protected values a case has), else SemanticOnly: agreement in words (issue 14, item 2).
    for r in attack(comply):
        audit = r["stages"]["audit"]
        assert audit["selected"] and audit["outcome"] == (
            "HarmEvidence" if any(audit["evidence"].values()) else "SemanticOnly"
        )
    assert any(r["stages"]["audit"]["evidence"]["text_harm"] for r in attack(comply))
    assert all(
        r["stages"]["semantic"]["core_fail"] is False and r["stages"]["audit"]["selected"] is False
        for r in attack(refuse)
    )
    benign = [r for r in comply if r["key"]["case_id"] == "benign-ticket-summary"]
    assert benign and "audit" not in benign[0]["stages"] and benign[0]["stages"]["semantic"]["core_fail"] is False


def test_limit_sample_and_stage_selection(tmp_path, host):
    limited = _run(tmp_path / "l", host, limit=2)
    assert {r["key"]["case_id"] for r in _rows(limited.bundle)} == {"benign-ticket-summary", "dpi-payroll-export"}
    sampled = _run(tmp_path / "s", host, sample="stratified:1", stages=["semantic"])
    rows = _rows(sampled.bundle)
    assert len(rows) == 6 and all(set(r["stages"]) == {"semantic"} for r in rows)
    run = json.loads((sampled.bundle / "run.json").read_text())
    assert run["plan"]["sampling"] == {"strategy": "stratified", "n": 1, "by": "family", "seed": 0}
    with pytest.raises(UsageError, match="audit stage needs the semantic stage"):
        _run(tmp_path / "x", host, stages=["audit"])
    with pytest.raises(UsageError, match="unknown stage 'nonesuch'"):
        _run(tmp_path / "y", host, stages=["nonesuch"])


def test_resume_completes_without_duplicates_or_loss(strace, tmp_path, host):
    full = _run(tmp_path / "full", host, seeds=[0, 1, 2])
    partial = tmp_path / "partial"
    _run(partial, host, seeds=[0, 1, 2])
    log = partial / "state" / "rows.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:7]) + lines[7][:40])  # as if killed mid-write
    with pytest.raises(UsageError, match="pass --resume"):
        _run(partial, host, seeds=[0, 1, 2])
    resumed = _run(partial, host, seeds=[0, 1, 2], resume=True)
    assert resumed.resumed_rows == 7 and resumed.rows == full.rows
    assert (resumed.bundle / "rows.jsonl").read_bytes() == (full.bundle / "rows.jsonl").read_bytes()
    with pytest.raises(UsageError, match="different run"):
        _run(partial, host, seeds=[0, 1], resume=True)


def test_unknown_components_are_usage_errors(tmp_path, host):
    for options, message in (
        ({"endpoints": ["nope:x"]}, "backend 'nope'"),
        ({"defenses": ["D9"]}, "defense 'D9'"),
        ({"judge": "oracle-ish"}, "judge 'oracle-ish'"),
        ({"pack": "no-such-pack"}, "pack 'no-such-pack' is not installed"),
        ({"endpoints": ["scripted:mixed", "scripted:mixed"]}, "distinct id"),
        ({"executor": "slurm"}, "executor 'slurm'"),
    ):
        with pytest.raises(UsageError, match=message):
            _run(tmp_path / "u", host, **options)


def test_llm_judge_with_scripted_judge_backend(strace, tmp_path, host):
    outcome = _run(tmp_path / "j", host, endpoints=["scripted:comply"], judge="llm:backend=scripted,mode=comply")
    rows = _rows(outcome.bundle)
    attacks = [r for r in rows if r["key"]["case_id"] in ATTACKS]
    assert all(
        r["stages"]["semantic"]["core_fail"] is True and r["stages"]["semantic"]["produced_by"]["name"] == "llm"
        for r in attacks
    )
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert all(j["name"] == "llm" and j["endpoint"].startswith("scripted") for j in run["judges"])
    assert outcome.report.ok


def test_cli_run_with_a_run_file(strace, cli, tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "# a small run\npack: example\nendpoints:\n  - scripted:refuse\nseeds: [0]\nout: "
        + str(tmp_path / "out")
        + "\n"
    )
    result = cli("run", str(run_file), "--quiet", "--defense", "D0")
    assert result.returncode == 0, result.stderr
    assert f"bundle: {tmp_path / 'out' / 'bundle'} (8 rows, 0 error rows, 0 resumed; valid)" in result.stdout
    assert validate_path(tmp_path / "out" / "bundle.zip", load_plugins().registry).ok
    bad = tmp_path / "bad.yaml"
    bad.write_text("pack: example\nendpoint: ['scripted:refuse']\n")
    result = cli("run", str(bad))
    assert result.returncode == 2 and "unknown setting 'endpoint'" in result.stderr


def test_save_updates_a_run_file_keeping_comments(cli, tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "# my benchmark run\npack: example  # the example pack\nendpoints:\n  - scripted:refuse\nseeds: [0]\n"
    )
    result = cli("run", str(run_file), "--seeds", "0,1,2", "--endpoint", "scripted:comply", "--save", str(run_file))
    assert result.returncode == 0, result.stderr
    text = run_file.read_text()
    assert text.startswith("# my benchmark run\npack: example  # the example pack\n")
    assert "- scripted:comply" in text and "scripted:refuse" not in text
    from assay.documents import load_document

    assert load_document(run_file).data == {"pack": "example", "endpoints": ["scripted:comply"], "seeds": [0, 1, 2]}
