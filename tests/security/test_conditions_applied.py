"""A condition is applied, or the run is refused (issue 30, item 4; attacks written first).

Before this round nothing asked a stage to apply the run's condition: the stage
of the stage guide did not, and a D0-against-D3 run of it gave byte-identical
transcripts that validate, report and compare presented as a defense
comparison. Here:

* a stage that does not declare the condition's placement makes the run refuse
  the condition before anything runs;
* a stage that declares it and sends prompts without its text makes every such
  row an error row (``condition_not_applied``), never a result;
* a bundle whose rows say D3 while their recorded prompts lack D3's text (D0 rows
  relabelled, re-sealed) is refused by the validator (``condition-not-applied``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import assay
from assay.api import CaseKind, ChatRequest, Family, Stage, apply_condition
from assay.bundle import BUNDLE_MANIFEST, ROWS_FILE, RUN_FILE, seal_bundle
from assay.engine.run import RunSettings, execute_run
from assay.errors import UsageError
from assay.packs import Pack, lock_manifest
from assay.plugins import load_plugins
from assay.validate import validate_path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PACK = REPO / "plugins" / "assay-pack-example" / "src" / "assay_pack_example" / "pack"
KIND = "x-ask.question"
STAGE = "x-ask.answer"
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://ask.example/schemas/answer.schema.json",
    "type": "object",
    "required": ["answer", "produced_by"],
    "properties": {"answer": {"type": "string"}},
}


async def _ask(ctx, *, apply: bool) -> None:
    system, turns = "Answer the question.", [{"role": "user", "content": ctx.case["instruction"]}]
    if apply:
        system, turns = apply_condition(system, turns, ctx.policy)
    messages = [{"role": "system", "content": system}, *turns]
    response = await ctx.endpoint.complete(
        ChatRequest(tuple(messages), max_tokens=16, seed=ctx.item.seed, context=ctx.request_context(STAGE))
    )
    ctx.row["transcript"] = {"messages": [*messages, {"role": "assistant", "content": response.content}]}
    ctx.row["stages"][STAGE] = {"answer": response.content or "", "produced_by": {"kind": "checker", "name": "ask"}}


async def ignore_condition(ctx) -> None:
    """The stage guide's mistake: the run's condition never reaches the prompt."""
    await _ask(ctx, apply=False)


async def apply_it(ctx) -> None:
    await _ask(ctx, apply=True)


class _Plugin:
    def __init__(self, run, applies: tuple[str, ...], pack_root: Path) -> None:
        self.run, self.applies, self.pack_root = run, applies, pack_root

    @assay.hookimpl
    def register_case_kinds(self, register):
        register(CaseKind(KIND, "A question."))

    @assay.hookimpl
    def register_stages(self, register):
        register(Stage(STAGE, "Ask once.", kinds=(KIND,), outcome_schema=SCHEMA, run=self.run, applies=self.applies))

    @assay.hookimpl
    def register_families(self, register):
        register(Family("ASK", KIND, "Ask", "Questions.", stages=(STAGE,), scripted_rate=0.0))

    @assay.hookimpl
    def register_packs(self, register):
        register(Pack.from_directory(self.pack_root))


def _pack(root: Path) -> Path:
    (root / "cases").mkdir(parents=True)
    for i in range(3):
        case = {"spec_version": "1.1", "id": f"ask.q.{i}", "kind": KIND, "family": "ASK", "instruction": f"Why {i}?"}
        (root / "cases" / f"ask.q.{i}.json").write_text(json.dumps(case))
    manifest = {
        "spec_version": "1.1", "name": "ask", "version": "0.1.0", "description": "Three questions.",
        "license": "CC0-1.0", "families": ["ASK"], "cases": [], "fixtures": [], "digest": "sha256:" + "0" * 64,
    }  # fmt: skip
    (root / "pack.json").write_text(json.dumps(manifest))
    lock_manifest(root)
    return root


def _host(tmp_path: Path, run, applies: tuple[str, ...]):
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(_Plugin(run, applies, _pack(tmp_path / "pack")), "x-ask")
    return host


def _settings(tmp_path: Path, name: str, **extra) -> RunSettings:
    return RunSettings(
        pack=str(tmp_path / "pack"), endpoints=["scripted:refuse"], defenses=["D0", "D3"], out=tmp_path / name,
        progress=False, **extra,
    )  # fmt: skip


def test_a_stage_that_does_not_declare_the_placement_makes_the_run_refuse_the_condition(tmp_path):
    host = _host(tmp_path, ignore_condition, ())
    with pytest.raises(UsageError, match=r"condition 'D3' is placed at system_prefix, and no planned stage applies"):
        execute_run(_settings(tmp_path, "run"), host=host)
    assert not (tmp_path / "run" / "bundle").exists()


def test_a_stage_that_declares_the_placement_and_ignores_it_gives_error_rows(tmp_path):
    host = _host(tmp_path, ignore_condition, ("system_prefix",))
    outcome = execute_run(_settings(tmp_path, "run", max_error_rate=1.0), host=host)
    rows = [json.loads(line) for line in (outcome.bundle / ROWS_FILE).read_text().splitlines()]
    d3 = [row for row in rows if row["key"]["condition"] == "D3"]
    assert d3 and all(
        [error["type"] for error in row["errors"]] == ["condition_not_applied"] and STAGE in row["errors"][0]["message"]
        for row in d3
    )
    assert all(not row["errors"] for row in rows if row["key"]["condition"] == "D0")
    assert all(entry["condition_applied"] is False for row in d3 for entry in row["prompts_sent"])


def test_a_stage_that_applies_the_condition_records_every_prompt_it_sent(tmp_path):
    host = _host(tmp_path, apply_it, ("system_prefix", "system_suffix", "sandwich", "user_prefix", "user_suffix"))
    outcome = execute_run(_settings(tmp_path, "run"), host=host)
    rows = [json.loads(line) for line in (outcome.bundle / ROWS_FILE).read_text().splitlines()]
    assert rows and not any(row["errors"] for row in rows)
    for row in rows:
        (entry,) = row["prompts_sent"]
        assert entry["stage"] == STAGE and entry["sha256"].startswith("sha256:")
        assert entry.get("condition_applied", True) is True
    assert validate_path(outcome.bundle, host.registry, pack=tmp_path / "pack").ok


def test_d0_rows_relabelled_as_d3_are_refused(tmp_path, builtins_host):
    """Byte-identical transcripts under two conditions: the D3 rows are D0's, their keys rewritten, re-sealed."""
    settings = RunSettings(
        pack=str(EXAMPLE_PACK), endpoints=["scripted:refuse"], defenses=["D0", "D3"], out=tmp_path / "run",
        progress=False, stages=["semantic", "audit"], judge="rule",
    )  # fmt: skip
    bundle = execute_run(settings, host=builtins_host).bundle
    assert validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK).ok
    rows = [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]
    d0 = {json.dumps({**r["key"], "condition": None}, sort_keys=True): r for r in rows if r["key"]["condition"] == "D0"}
    forged = []
    for row in rows:
        if row["key"]["condition"] == "D3":
            twin = json.loads(json.dumps(d0[json.dumps({**row["key"], "condition": None}, sort_keys=True)]))
            twin["key"]["condition"] = "D3"
            twin.pop("prompts_sent", None)  # the engine's record would give it away at once
            row = twin
        forged.append(row)
    (bundle / ROWS_FILE).write_text("".join(json.dumps(row) + "\n" for row in forged))
    manifest = json.loads((bundle / BUNDLE_MANIFEST).read_text())
    seal_bundle(bundle, pack=manifest["pack"], row_count=len(forged))
    report = validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK)
    assert not report.ok
    assert "condition-not-applied" in {issue.code for issue in report.issues}


def test_the_run_manifest_is_unchanged_by_the_watch(tmp_path, builtins_host):
    """The engine's watch records prompts in rows; it adds nothing to the run manifest."""
    settings = RunSettings(
        pack=str(EXAMPLE_PACK), endpoints=["scripted:refuse"], defenses=["D3"], out=tmp_path / "run",
        progress=False, stages=["semantic"],
    )  # fmt: skip
    bundle = execute_run(settings, host=builtins_host).bundle
    run = json.loads((bundle / RUN_FILE).read_text())
    assert "prompts_sent" not in run
    shutil.rmtree(tmp_path / "run")
