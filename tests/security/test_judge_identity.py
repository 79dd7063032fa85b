"""Who judged is the host's word, not the judge's (issue 30, attacks written first).

A judge plugin describes itself; before this round the run manifest and the
rows recorded that description, so a look-alike registered under another name
could say it was the built-in ``llm`` judge and its verdicts (which no
validator re-derives, since they come from a model) were taken as that judge's.
Judge version, prompt digest and model could be rewritten after the run and
the bundle re-sealed. Each attack here is built with assay's own library and
must be refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay import hookimpl
from assay.bundle import BUNDLE_MANIFEST, ROWS_FILE, RUN_FILE, seal_bundle
from assay.designs.staged.judges.llm import LLMJudge
from assay.engine.run import RunSettings, execute_run
from assay.plugins import load_plugins
from assay.validate import validate_path

EXAMPLE_PACK = Path(__file__).resolve().parents[2] / "plugins/assay-pack-example/src/assay_pack_example/pack"


def _run(out: Path, host, judge: str) -> Path:
    settings = RunSettings(
        pack=str(EXAMPLE_PACK),
        endpoints=["scripted:comply"],
        out=out,
        progress=False,
        stages=["semantic", "audit"],
        judge=judge,
        defenses=["D0"],
    )
    return execute_run(settings, host=host).bundle


def _codes(report) -> set[str]:
    return {issue.code for issue in report.issues}


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]


def _write_rows(bundle: Path, rows: list[dict]) -> None:
    (bundle / ROWS_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows))


def _reseal(bundle: Path) -> None:
    manifest = json.loads((bundle / BUNDLE_MANIFEST).read_text())
    seal_bundle(bundle, pack=manifest["pack"], row_count=len(_rows(bundle)))


class _LookAlikeInstance:
    """Says it is the built-in llm judge, and finds every response safe without asking anyone."""

    def __init__(self, genuine) -> None:
        self._genuine = genuine

    def describe(self, stage):
        return self._genuine.describe(stage)

    def producer(self):
        return self._genuine.producer()

    async def semantic(self, case, final_output, prompt_texts):
        return {
            "core_fail": False,
            "safety_score": 5,
            "harm_type": None,
            "defense_behavior": "refused",
            "explanation": "fine",
            "produced_by": self.producer(),
        }

    async def audit_fallback(self, case, final_output):
        return "OtherNoHarm", 1


class _LookAlike:
    """A third party's judge under its own name, built to pass as ``llm`` (a test double, labelled)."""

    name = "sneakyllm"
    description = "a look-alike"
    version = LLMJudge.version
    prompt_template = LLMJudge.prompt_template
    prompt_sha256 = LLMJudge.prompt_sha256

    def instance(self, options, make_endpoint):
        genuine = LLMJudge().instance({"backend": "scripted", "mode": "refuse"}, make_endpoint)
        return _LookAlikeInstance(genuine)


class _LookAlikePlugin:
    @hookimpl
    def register_judges(self, register):
        register(_LookAlike())


@pytest.fixture
def sneaky_host():
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(_LookAlikePlugin(), "sneakyllm", distribution="assay-sneakyllm", version="1.0")
    return host


def test_a_look_alike_judge_is_recorded_under_its_own_name(tmp_path, sneaky_host):
    bundle = _run(tmp_path / "run", sneaky_host, "sneakyllm")
    run = json.loads((bundle / RUN_FILE).read_text())
    assert {judge["name"] for judge in run["judges"]} == {"sneakyllm"}
    assert all(judge["registration"]["distribution"] == "assay-sneakyllm" for judge in run["judges"])
    semantic = [row["stages"]["semantic"] for row in _rows(bundle) if "semantic" in row["stages"]]
    assert semantic and all(outcome["produced_by"]["name"] == "sneakyllm" for outcome in semantic)


def test_a_look_alike_judges_bundle_does_not_validate_where_only_the_genuine_judge_is(
    tmp_path, sneaky_host, builtins_host
):
    bundle = _run(tmp_path / "run", sneaky_host, "sneakyllm")
    report = validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK)
    assert not report.ok
    assert "unknown-judge" in _codes(report)


def test_a_look_alike_relabelled_as_the_genuine_judge_after_the_run_is_refused(tmp_path, sneaky_host, builtins_host):
    """The cheater rewrites the host's record: the judge's name in the manifest, its plugins entry and every row."""
    bundle = _run(tmp_path / "run", sneaky_host, "sneakyllm")
    run = json.loads((bundle / RUN_FILE).read_text())
    for judge in run["judges"]:
        judge["name"] = "llm"
        judge["registration"] = {**judge["registration"], "plugin": "sneakyllm"}
    for entry in run["plugins"]:
        if entry["kind"] == "judges" and entry["name"] == "sneakyllm":
            entry["name"] = "llm"
    (bundle / RUN_FILE).write_text(json.dumps(run))
    rows = _rows(bundle)
    for row in rows:
        for outcome in row["stages"].values():
            if isinstance(outcome, dict) and outcome.get("produced_by", {}).get("name") == "sneakyllm":
                outcome["produced_by"]["name"] = "llm"
    _write_rows(bundle, rows)
    _reseal(bundle)
    report = validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK)
    assert not report.ok
    assert "judge-mismatch" in _codes(report)
    assert any("sneakyllm" in issue.message and "install" in issue.message for issue in report.issues)


@pytest.mark.parametrize(
    ("field", "forged", "where"),
    [
        ("version", "llm-judge-v9", "both"),
        ("prompt_sha256", "sha256:" + "ab" * 32, "both"),
        ("model", "gpt-4o", "manifest"),
        ("model", "gpt-4o", "rows"),
    ],
)
def test_a_rewritten_judge_version_prompt_digest_or_model_is_refused(tmp_path, builtins_host, field, forged, where):
    """The genuine llm judge's bundle, its recorded identity rewritten, re-sealed.

    Version and prompt digest are checked against the installed judge, so rewriting them everywhere is refused.
    A model named consistently everywhere is a claim no file can check: the leaderboard re-judges a sample
    for that (tests/test_leaderboard_judges.py); here it is rewritten in one place and the other contradicts it.
    """
    bundle = _run(tmp_path / "run", builtins_host, "llm:backend=scripted,mode=refuse")
    assert validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK).ok
    if where in ("both", "manifest"):
        run = json.loads((bundle / RUN_FILE).read_text())
        for judge in run["judges"]:
            judge[field] = forged
        (bundle / RUN_FILE).write_text(json.dumps(run))
    if where in ("both", "rows"):
        rows = _rows(bundle)
        for row in rows:
            for outcome in row["stages"].values():
                if isinstance(outcome, dict) and outcome.get("produced_by", {}).get("kind") == "judge":
                    outcome["produced_by"][field] = forged
        _write_rows(bundle, rows)
    _reseal(bundle)
    report = validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK)
    assert not report.ok, field
    assert "judge-mismatch" in _codes(report)


def test_rows_that_name_another_judge_than_the_manifest_are_refused(tmp_path, builtins_host):
    """Rule-judged rows relabelled as a model judge's, so that no validator re-derives them."""
    bundle = _run(tmp_path / "run", builtins_host, "rule")
    rows = _rows(bundle)
    for row in rows:
        semantic = row["stages"].get("semantic")
        if semantic:
            semantic.update(core_fail=False, safety_score=5, defense_behavior="refused")
            semantic["produced_by"] = {
                "kind": "judge",
                "name": "llm",
                "version": LLMJudge.version,
                "prompt_sha256": LLMJudge.prompt_sha256,
            }
    _write_rows(bundle, rows)
    _reseal(bundle)
    report = validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK)
    assert not report.ok
    assert {"judge-mismatch", "unlisted-judge"} & _codes(report)


def test_the_host_records_each_judges_registration_with_a_digest_of_its_files(tmp_path, builtins_host):
    bundle = _run(tmp_path / "run", builtins_host, "rule")
    run = json.loads((bundle / RUN_FILE).read_text())
    (judge,) = {json.dumps(j["registration"], sort_keys=True) for j in run["judges"]}
    registration = json.loads(judge)
    assert registration["plugin"] == "assay.default_plugins.judges" or registration["distribution"] == "assay"
    assert registration["files_sha256"].startswith("sha256:")
    listed = [e for e in run["plugins"] if e["kind"] == "judges" and e["name"] == "rule"]
    assert listed and listed[0]["files_sha256"] == registration["files_sha256"]
