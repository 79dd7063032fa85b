"""The secagent pack: valid, the right task counts, and every checker is tight (silent on the untouched
fixture, firing after the reference solution in replay.safe)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import assay.plugins
import assay.validate
from assay.packs import Pack
from assay.sandboxes.runner import run_confined

ROOT = Path(__file__).resolve().parents[1] / "plugins" / "assay-pack-secagent"
PACK_DIR = ROOT / "src" / "assay_pack_secagent" / "pack"
SECURITY_KINDS = [
    "sec.localization",
    "sec.reachability",
    "sec.proof_of_trigger",
    "sec.patch_verification",
    "sec.report_writing",
]
READ_TOOLS = {"list_files", "read_file", "search", "run_tests", "finish"}


@pytest.fixture(scope="module")
def registry():
    return assay.plugins.load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"}).registry


@pytest.fixture(scope="module")
def cases():
    return Pack.from_directory(PACK_DIR).cases()


def test_pack_validates(registry):
    report = assay.validate.validate_path(ROOT, registry)
    assert report.ok, report


def test_task_counts(cases):
    counts = Counter(case["family"] for case in cases.values())
    assert {kind: counts[kind] for kind in SECURITY_KINDS} == dict.fromkeys(SECURITY_KINDS, 6)
    assert counts["sec.sanity"] == 12 and counts["sec.coding"] == 8 and len(cases) == 50


def test_every_task_is_complete(cases):
    for case in cases.values():
        assert case["kind"] == "trajectory"
        assert (PACK_DIR / case["environment"]["fixture_tree"]).is_dir(), case["id"]
        assert case["environment"]["code"]["entry"]
        assert all(
            case["grounding"][key] for key in ("expected_files", "expected_symbols", "issue_terms", "evidence_terms")
        )
        assert case["budget"]["wall_time_s"] > 0 and case["budget"]["max_model_calls"] >= 1
        assert any(step["tool"] == "write_file" for step in case["replay"]["safe"]), case["id"]
        assert {step["tool"] for step in case["replay"]["safe"]} <= READ_TOOLS | {"write_file"}
        if case["family"] in SECURITY_KINDS:
            assert case["redaction"], case["id"]


def test_proof_of_trigger_evidence_is_redacted(cases):
    for case in cases.values():
        if case["family"] != "sec.proof_of_trigger":
            continue
        text = "".join(s["arguments"]["content"] for s in case["replay"]["safe"] if s["tool"] == "write_file")
        for rule in case["redaction"]:
            assert not re.search(rule["pattern"], text, re.M), (case["id"], rule["pattern"])


def _check(registry, case, tmp_path):
    ws = tmp_path / case["id"]
    shutil.copytree(PACK_DIR / case["environment"]["fixture_tree"], ws)
    oracle = registry.get("oracles", case["checker"]["plugin"])
    observation = {"workspace": str(ws), "run_confined": lambda argv, t: run_confined(ws, argv, timeout_s=t)}
    before = oracle.evaluate(observation, case["checker"]["params"])
    baseline = (
        run_confined(ws, ["python", "-m", "unittest", "-q"], timeout_s=300)[0]
        if case["family"] in ("sec.proof_of_trigger", "sec.patch_verification")
        else None
    )
    for step in case["replay"]["safe"]:
        if step["tool"] == "write_file":
            target = ws / step["arguments"]["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step["arguments"]["content"], encoding="utf-8")
    after = oracle.evaluate(observation, case["checker"]["params"])
    return case, before, after, baseline


def test_checkers_are_tight(confinement, registry, cases, box_path):
    tmp_path = box_path
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: _check(registry, c, tmp_path), cases.values()))
    problems = []
    for case, before, after, baseline in results:
        if before.fired:
            problems.append(f"{case['id']}: checker fires on the untouched fixture")
        if not after.fired:
            problems.append(f"{case['id']}: checker silent after the reference solution: {after}")
        if case["family"] == "sec.proof_of_trigger" and baseline == 0:
            problems.append(f"{case['id']}: the fixture's tests do not show the defect")
        if case["family"] == "sec.patch_verification":
            fixed = "candidate-correct" in case["tags"]
            if (baseline == 0) != fixed:
                problems.append(f"{case['id']}: test outcome {baseline} disagrees with the candidate verdict")
    assert not problems, "\n".join(problems)
