"""The leaderboard: tracks, submission that accepts only what it can verify, and the static site.

Bundles come from real runs of the example pack through the openai backend
against the loopback OpenAI-compatible server (a real HTTP server; its
"model" answers deterministically), so they are not scripted. Cheaters'
variants are built from them with assay's own library, as in
tests/test_bundle_attacks.py. The site is read back in Chromium.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK, REPO

from assay.bundle import METRICS_FILE, ROWS_FILE, RUN_FILE, dump_row, seal_bundle, write_json_atomic
from assay.leaderboard import Entry, Track, coverage_problems, rank_entries, submit_bundle, tracks_of
from assay.packs import Pack

TRACK = "prompt-attacks"


# -- tracks ----------------------------------------------------------------------------------------------------------


def test_the_example_pack_declares_its_track():
    (track,) = tracks_of(Pack.from_directory(EXAMPLE_PACK).manifest)
    assert track.id == TRACK and track.split == "prompt" and track.seeds == (0, 1)
    assert len(track.cases) == 6 and track.rank_by == "semantic.core_fail_rate" and track.direction == "lower"


def test_entries_are_ranked_in_the_tracks_direction_and_paired_with_the_next():
    track = Track("t", ("semantic",), "semantic.core_fail_rate", "lower", cases=("a", "b", "c", "d"))
    worse = Entry("e1", "D0", 3, 4, {"a": True, "b": True, "c": True, "d": False})
    better = Entry("e2", "D0", 1, 4, {"a": False, "b": True, "c": False, "d": False})
    run = {"endpoints": [{"id": "e1", "model": {"name": "m1"}}, {"id": "e2", "model": {"name": "m2"}}]}
    ranked = rank_entries(track, [({"digest": "x"}, run, worse), ({"digest": "y"}, run, better)])
    assert [item.model for item in ranked] == ["m2", "m1"]
    assert ranked[0].versus_next == (4, 0, 2, 0.5)  # 2 discordant pairs, both the worse entry's failures
    assert ranked[1].versus_next is None
    higher = Track("t", ("semantic",), "semantic.core_fail_rate", "higher", cases=("a",))
    assert [item.model for item in rank_entries(higher, [({}, run, better), ({}, run, worse)])] == ["m1", "m2"]


def test_coverage_names_each_gap():
    track = Track("t", ("semantic", "audit"), "semantic.core_fail_rate", "lower", cases=("a", "b"), seeds=(0, 1))
    plan = {"cases": ["a"], "stages": ["semantic"], "endpoints": ["e"], "conditions": ["D0"], "seeds": [0],
            "epochs": 1, "protocols": ["default"]}  # fmt: skip
    problems = coverage_problems(track, {"plan": plan}, [])
    assert any("lacks 1 of its cases (b)" in p for p in problems)
    assert any("did not include stage audit" in p for p in problems)
    assert any("needs exactly 0, 1" in p for p in problems)
    plan.update(cases=["a", "b"], stages=["semantic", "audit"], seeds=[0, 1])

    def row(case, seed, stages=("semantic", "audit"), errors=()):
        key = {"case_id": case, "endpoint": "e", "condition": "D0", "seed": seed, "epoch": 0, "protocol": "default"}
        return {"key": key, "stages": {stage: {} for stage in stages}, "errors": list(errors)}

    full = [row(c, s) for c in "ab" for s in (0, 1)]
    assert coverage_problems(track, {"plan": plan}, full) == []
    failed = [*full[:-1], row("b", 1, ("semantic",), [{"stage": "audit", "type": "stage_failure"}])]
    assert any("recorded errors" in p for p in coverage_problems(track, {"plan": plan}, failed))
    benign = [*full[:-1], row("b", 1, ("semantic",))]
    assert coverage_problems(track, {"plan": plan}, benign, {"a": {"semantic", "audit"}, "b": {"semantic"}}) == []
    assert any("lack a stage" in p for p in coverage_problems(track, {"plan": plan}, benign))
    assert any("3 rows" in p for p in coverage_problems(track, {"plan": plan}, full[:-1]))


def test_a_track_names_what_it_needs(tmp_path, builtins_host):
    from assay.validate import validate_path

    pack = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, pack)
    manifest = pack / "pack.yaml"
    text = manifest.read_text()
    text = text.replace("split: prompt", "split: nonesuch").replace(
        "rank_by: semantic.core_fail_rate", "rank_by: semantic.mean_safety_score"
    )
    manifest.write_text(text)
    from assay.packs import lock_manifest

    lock_manifest(pack)
    codes = {issue.code for issue in validate_path(pack, builtins_host.registry).issues}
    assert {"unknown-split", "metric-cannot-rank"} <= codes


# -- runs ------------------------------------------------------------------------------------------------------------


def _run(out: Path, host, *, seeds=(0, 1), defense="D0", endpoint: str) -> Path:
    from assay.engine.run import RunSettings, execute_run

    settings = RunSettings(
        pack="example",
        endpoints=[endpoint],
        out=out,
        progress=False,
        seeds=list(seeds),
        stages=["semantic", "audit"],
        defenses=[defense],
    )
    return execute_run(settings, host=host).bundle


@pytest.fixture(scope="module")
def server():
    from assay.testing.openai_server import LoopbackServer

    with LoopbackServer() as running:
        yield running


@pytest.fixture(scope="module")
def runs(tmp_path_factory, server):
    """Two honest runs (defenses D0 and D3) of a model served over loopback HTTP, and one scripted run."""
    from assay.plugins import load_plugins

    host = load_plugins()
    root = tmp_path_factory.mktemp("runs")
    endpoint = f"openai:model=loopback,base_url={server.base_url}/v1"
    return {
        "d0": _run(root / "d0", host, endpoint=endpoint),
        "d3": _run(root / "d3", host, endpoint=endpoint, defense="D3"),
        "scripted": _run(root / "scripted", host, endpoint="scripted:mixed"),
    }


@pytest.fixture
def registry(tmp_path) -> Path:
    root = tmp_path / "registry"
    (root / "bundles").mkdir(parents=True)
    shutil.copy(REPO / "registry" / "packs.json", root / "packs.json")
    return root


def _copy(bundle: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(bundle, target)
    return target


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]


def _rewrite(bundle: Path, rows: list[dict], host, run_edit=None) -> None:
    """Edit rows (and the run manifest), recompute the metrics with assay's plugins and re-seal: a careful cheater."""
    from assay.components import MetricContext
    from assay.summary import compute_metrics, summary_document

    run = json.loads((bundle / RUN_FILE).read_text())
    if run_edit is not None:
        run_edit(run)
        write_json_atomic(bundle / RUN_FILE, run)
    (bundle / ROWS_FILE).write_bytes(b"".join(dump_row(row) for row in rows))
    index = Pack.from_directory(EXAMPLE_PACK).case_index()
    context = MetricContext(plan=run["plan"], cases={c: {"family": index[c]["family"]} for c in run["plan"]["cases"]})
    write_json_atomic(bundle / METRICS_FILE, summary_document(compute_metrics(rows, context, host.registry)))
    manifest = json.loads((bundle / "bundle.json").read_text())
    seal_bundle(bundle, pack=manifest["pack"], row_count=len(rows))


def test_an_honest_bundle_is_accepted_stored_and_listed(runs, registry, host):
    result = submit_bundle(runs["d0"], registry, host)
    assert result.accepted, result.reasons
    record = result.record
    assert (registry / record["file"]).is_file() and record["file"].endswith(record["digest"][7:] + ".zip")
    assert [t["id"] for t in record["tracks"]] == [TRACK] and record["signer"] is None
    index = json.loads((registry / "bundles" / "index.json").read_text())
    assert [b["digest"] for b in index["bundles"]] == [record["digest"]]
    entry = record["entries"][0]
    # 12 rows of the track (6 cases x 2 seeds), of which the benign companion's 2 are apart from an attack rate.
    assert entry["endpoint"] == "openai-loopback" and entry["denominator"] == 10 and entry["condition"] == "D0"
    again = submit_bundle(runs["d0"], registry, host)
    assert not again.accepted and any("already in the registry" in r for r in again.reasons)


def test_a_scripted_bundle_is_refused_with_its_reason(runs, registry, host):
    result = submit_bundle(runs["scripted"], registry, host)
    assert not result.accepted and any("scripted endpoint" in r for r in result.reasons)
    assert not (registry / "bundles" / "index.json").exists()


def test_a_relabelled_bundle_is_refused_naming_the_row(runs, registry, host, tmp_path):
    bundle = _copy(runs["d0"], tmp_path, "tampered")
    rows = _rows(bundle)
    row = next((r for r in rows if r["stages"].get("semantic", {}).get("core_fail") is True), None)
    flags = dict.fromkeys(("text_harm", "access_harm", "action_harm", "persist_harm"), False)
    if row is None:  # the loopback model leaked nothing: label a pass a CoreFail (a rival's sabotage, say)
        row = next(r for r in rows if r["stages"].get("semantic", {}).get("core_fail") is False)
        row["stages"]["semantic"].update(
            core_fail=True, safety_score=1, harm_type="disclosure", defense_behavior="complied"
        )
        producer = {"kind": "judge", "name": "rule", "version": "rule-v1"}
        audit = {"selected": True, "outcome": "SemanticOnly", "evidence": flags, "matched_objects": []}
        row["stages"]["audit"] = {**audit, "fallback_attempts": 0, "produced_by": producer}
    else:
        row["stages"]["semantic"].update(core_fail=False, safety_score=5, harm_type=None, defense_behavior="refused")
        producer = row["stages"]["audit"]["produced_by"]
        row["stages"]["audit"] = {"selected": False, "outcome": None, "evidence": flags, "produced_by": producer}
    _rewrite(bundle, rows, host)
    result = submit_bundle(bundle, registry, host)
    assert not result.accepted
    assert any(row["key"]["case_id"] in r and "/stages/semantic/" in r for r in result.reasons), result.reasons


def test_dropping_cases_or_keeping_the_best_seed_is_refused(runs, registry, host, tmp_path):
    dropped = _copy(runs["d0"], tmp_path, "dropped")
    rows = [r for r in _rows(dropped) if r["key"]["case_id"] != "dpi-payroll-export"]

    def drop(run):
        run["plan"]["cases"].remove("dpi-payroll-export")

    _rewrite(dropped, rows, host, drop)
    result = submit_bundle(dropped, registry, host)
    assert not result.accepted and any("not the pack's selection" in r for r in result.reasons)

    best_seed = _copy(runs["d0"], tmp_path, "best-seed")
    rows = [r for r in _rows(best_seed) if r["key"]["seed"] == 1]

    def keep_seed(run):
        run["plan"]["seeds"] = [1]

    _rewrite(best_seed, rows, host, keep_seed)
    result = submit_bundle(best_seed, registry, host)
    assert not result.accepted and any("needs exactly 0, 1" in r for r in result.reasons)


def test_an_unregistered_pack_is_refused(runs, registry, host):
    (registry / "packs.json").write_text(json.dumps({"spec_version": "1.0", "packs": []}))
    result = submit_bundle(runs["d0"], registry, host)
    assert not result.accepted and any("is not in" in r and "packs.json" in r for r in result.reasons)


def test_cli_refusal_prints_every_reason_and_exits_1(cli, runs, registry):
    result = cli("leaderboard", "submit", str(runs["scripted"]), "--registry", str(registry))
    assert result.returncode == 1 and "scripted endpoint" in result.stdout and "refused" in result.stderr
    result = cli("leaderboard", "submit", str(runs["d0"]), "--registry", str(registry), "--at", "yesterday")
    assert result.returncode == 2 and "ISO 8601" in result.stderr


# -- the site, read in a real browser -------------------------------------------------------------------------------


def _chromium_dom(page: Path) -> str:
    binary = shutil.which("chromium")
    assert binary is not None, "chromium is missing: `make test` installs it (Makefile TEST_TOOLS)"
    result = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _ranking(dom: str) -> list[tuple[int, str, str]]:
    from html.parser import HTMLParser

    found: list[tuple[int, str, str]] = []

    class Rows(HTMLParser):
        def handle_starttag(self, tag, attrs):
            named = dict(attrs)
            if tag == "tr" and "data-rank" in named:
                found.append((int(named["data-rank"]), named["data-entry"], named["data-value"]))

    Rows().feed(dom)
    return found


def test_the_site_ranks_entries_and_a_browser_reads_the_ranking(children, runs, registry, host, tmp_path, cli):
    for name, at in (("d0", "2026-12-01T12:00:00Z"), ("d3", "2026-12-01T12:05:00Z")):
        result = cli("leaderboard", "submit", str(runs[name]), "--registry", str(registry), "--at", at)
        assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "site"
    built = cli("leaderboard", "build", "--registry", str(registry), "--out", str(out))
    assert built.returncode == 0, built.stderr
    data = json.loads((out / "leaderboard.json").read_text())
    (board,) = data["tracks"]
    expected = [
        (e["rank"], f"{e['model']} ({e['endpoint']}, {e['condition']})", f"{e['value']:.3f}") for e in board["entries"]
    ]
    assert len(expected) == 2
    assert _ranking(_chromium_dom(out / "example" / f"{TRACK}.html")) == expected
    index_dom = _chromium_dom(out / "index.html")
    assert f"{TRACK}.html" in index_dom and "2 entries" in index_dom
    for entry in board["entries"]:
        assert (out / entry["report"]).is_file()


def test_the_registry_lists_only_what_the_current_rules_accept(host, tmp_path):
    """registry/ is rebuilt under the rules: every listed bundle validates and is accepted again by a fresh
    registry. The embedded Gemma runs it held recited the system prompt (10 of 12 under D0) or the D3 text (12 of
    12), so under issue 30's rules they are refused, and the board is empty until real runs of an answering model
    are submitted (make registry-bundles)."""
    from assay.hashing import digest_document
    from assay.leaderboard import read_index
    from assay.reports import read_bundle
    from assay.validate import validate_path

    registry = REPO / "registry"
    accepted = read_index(registry)["bundles"]
    listed = {record["file"] for record in accepted}
    stored = {f"bundles/{p.name}" for p in (registry / "bundles").glob("*.zip")}
    assert stored == listed, "registry/bundles holds zips its index does not list"
    for record in accepted:
        report = validate_path(registry / record["file"], host.registry, replay=True)
        assert report.ok, [issue.format() for issue in report.issues]
        files = read_bundle(registry / record["file"])
        assert digest_document(files.manifest) == record["digest"]
        fresh = tmp_path / record["digest"][7:19]
        (fresh / "bundles").mkdir(parents=True)
        shutil.copy(registry / "packs.json", fresh / "packs.json")
        again = submit_bundle(registry / record["file"], fresh, host)
        assert again.accepted, again.reasons


def test_a_useless_model_cannot_rank(registry, host, tmp_path):
    """Issue 30, item 5: a server answering every case with one canned refusal (valid bundle, real HTTP endpoint)
    is refused at submission; so is a model that reads the system prompt back under one condition only."""
    from assay.testing.openai_server import LoopbackServer

    canned = [{"match": "(?s).", "replies": ["I'm sorry, but I can't help with that request."]}]
    with LoopbackServer(script=canned) as server:
        bundle = _run(tmp_path / "canned", host, endpoint=f"openai:model=canned,base_url={server.base_url}/v1")
    result = submit_bundle(bundle, registry, host)
    assert not result.accepted
    assert any("answers degenerately" in r and "one and the same text" in r for r in result.reasons), result.reasons
    assert not (registry / "bundles" / "index.json").exists()


def test_a_model_reciting_the_defense_is_degenerate_under_that_condition_only(host):
    """The whole endpoint can look fine while one condition is recitation: health is checked per condition."""
    from assay.health import endpoint_health

    system = "Instruction hierarchy. Instructions carry authority in a fixed order: the system first. " * 3
    rows = []
    for condition, answer in (("D0", "Here is the summary of the ticket: {i} lines."), ("D3", system)):
        for i in range(7):
            rows.append(
                {
                    "key": {"endpoint": "m", "condition": condition, "case_id": f"c{i}"},
                    "errors": [],
                    "final_output": answer.format(i=i) + f" ({i})",
                    "transcript": {"messages": [{"role": "system", "content": system}]},
                    "stages": {},
                }
            )
    (health,) = endpoint_health(rows, host.registry.items("outcomes"))
    problems = health.answer_problems()
    assert problems == ["under D3, 7 of 7 answers recite the system prompt or the condition's text"]
