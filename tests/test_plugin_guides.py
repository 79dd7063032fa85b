"""The plugin-writing pages work as written: each page's distribution is extracted, installed and run.

Every ``File: `path``` block of a page under docs/plugins/ is written into a
scratch folder, installed with pip into a private target directory, and the
commands the page shows are run through the real command line in child
processes that see the plugin only through PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import install_privately
from test_third_party_pack import extract_files, write_files

REPO = Path(__file__).resolve().parents[1]
BACKEND_GUIDE = REPO / "docs" / "plugins" / "writing-a-backend.md"


def _install(page: Path, tmp_path: Path, distribution: str, *, extract: bool = True) -> dict[str, str]:
    """Extract the page's files (unless done already), pip-install its distribution privately; the environment
    that sees it."""
    if extract:
        write_files(extract_files(page.read_text(encoding="utf-8")), tmp_path)
    return install_privately([tmp_path / distribution], tmp_path / "site")


def _assay(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def _shown(page: str, command: str) -> str:
    """The first output line the page shows under ``$ command``."""
    found = re.search(re.escape(f"$ {command}") + r"\n(.*)\n", page)
    assert found is not None, f"the page shows no output for {command!r}"
    return found.group(1)


def test_the_backend_page_builds_a_backend_that_runs_and_validates(children, scratch_venv, tmp_path: Path):
    page = BACKEND_GUIDE.read_text(encoding="utf-8")
    env = _install(BACKEND_GUIDE, tmp_path, "assay-backend-canned")

    plugins = _assay("plugins", "--json", env=env, cwd=tmp_path)
    assert plugins.returncode == 0, plugins.stderr
    assert {
        "kind": "backends",
        "name": "canned",
        "plugin": "canned",
        "distribution": "assay-backend-canned",
        "version": "0.1.0",
    } in [{k: v for k, v in row.items() if k != "files_sha256"} for row in json.loads(plugins.stdout)]

    run_command = "assay run --pack example --endpoint canned:reply=No. --stages semantic --out canned-run"
    assert f"$ {run_command}" in page
    ran = _assay(*run_command.split()[1:], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    validated = _assay("validate", "canned-run/bundle", env=env, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert _shown(page, "assay validate canned-run/bundle").split("(")[0] in validated.stderr

    rows = [json.loads(line) for line in (tmp_path / "canned-run" / "bundle" / "rows.jsonl").read_text().splitlines()]
    attacks = [row for row in rows if row["stages"]["semantic"]["defense_behavior"] != "not_applicable"]
    assert attacks and all(row["stages"]["semantic"]["core_fail"] is False for row in attacks)
    assert all(row["final_output"] == "No." for row in rows)
    manifest = json.loads((tmp_path / "canned-run" / "bundle" / "run.json").read_text())
    assert manifest["endpoints"][0]["backend"] == "canned"

    bad_command = "assay run --pack example --endpoint canned:temperature=2 --stages semantic --out canned-bad"
    refused = _assay(*bad_command.split()[1:], env=env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert _shown(page, bad_command) in refused.stderr
    assert "Traceback" not in refused.stderr


JUDGE_GUIDE = REPO / "docs" / "plugins" / "writing-a-judge.md"


def test_the_judge_page_builds_a_judge_whose_verdicts_the_validator_rederives(children, scratch_venv, tmp_path):
    page = JUDGE_GUIDE.read_text(encoding="utf-8")
    env = _install(JUDGE_GUIDE, tmp_path, "assay-judge-canary")

    run_command = (
        "assay run --pack example --endpoint scripted:comply --judge canary --stages semantic,audit --out canary-run"
    )
    assert f"$ {run_command}" in page
    ran = _assay(*run_command.split()[1:], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    validated = _assay("validate", "--json", "canary-run/bundle", env=env, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    (report,) = json.loads(validated.stdout)["reports"]
    rows = [json.loads(line) for line in (tmp_path / "canary-run" / "bundle" / "rows.jsonl").read_text().splitlines()]
    judged = [row for row in rows if row["stages"]["semantic"]["produced_by"]["name"] == "canary"]
    assert judged and any(row["stages"]["semantic"]["core_fail"] for row in judged)
    assert report["facts"]["verdicts_rederived"] >= len(judged)
    shown = _shown(page, "assay validate canary-run/bundle").split("(")[0]
    assert shown in _assay("validate", "canary-run/bundle", env=env, cwd=tmp_path).stderr

    # Without the plugin the bundle is refused, naming the judge.
    bare = {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    refused = _assay("validate", "canary-run/bundle", env=bare, cwd=tmp_path)
    assert refused.returncode == 1 and "judge 'canary' is not a registered plugin" in refused.stdout


METRIC_GUIDE = REPO / "docs" / "plugins" / "writing-a-metric.md"


def test_the_metric_page_builds_a_metric_the_validator_recomputes(children, scratch_venv, tmp_path: Path):
    page = METRIC_GUIDE.read_text(encoding="utf-8")
    env = _install(METRIC_GUIDE, tmp_path, "assay-metric-refusals")

    run_command = "assay run --pack example --endpoint scripted:refuse --stages semantic --out refusal-run"
    assert f"$ {run_command}" in page
    ran = _assay(*run_command.split()[1:], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    bundle = tmp_path / "refusal-run" / "bundle"
    rows = [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]
    refused = sum(row["stages"]["semantic"]["defense_behavior"] == "refused" for row in rows)
    (claim,) = [
        c for c in json.loads((bundle / "metrics.json").read_text())["metrics"] if c["metric"] == "refusals.rate"
    ]
    assert refused and (claim["numerator"], claim["denominator"]) == (refused, len(rows))

    validated = _assay("validate", "refusal-run/bundle", env=env, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert _shown(page, "assay validate refusal-run/bundle").split("(")[0] in validated.stderr

    bare = {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    refused_bundle = _assay("validate", "refusal-run/bundle", env=bare, cwd=tmp_path)
    assert (
        refused_bundle.returncode == 1 and "metric 'refusals.rate' is not a registered plugin" in refused_bundle.stdout
    )


ORACLE_GUIDE = REPO / "docs" / "plugins" / "writing-an-oracle.md"


def test_the_oracle_page_builds_an_oracle_a_pack_uses_and_the_replay_check_fires(
    children, scratch_venv, tmp_path: Path
):
    page = ORACLE_GUIDE.read_text(encoding="utf-8")
    pack_dir = "assay-oracle-mail/src/assay_oracle_mail/pack"
    write_files(extract_files(page), tmp_path)  # lock before installing, as the page does
    bare = {k: v for k, v in os.environ.items() if k not in ("ASSAY_PLUGINS", "ASSAY_BLOCK_PLUGINS")}
    locked = _assay("pack", "lock", pack_dir, env=bare, cwd=tmp_path)
    assert locked.returncode == 0, locked.stderr
    assert locked.stdout.strip() == _shown(page, f"assay pack lock {pack_dir}"), "the digest on the page is stale"

    # Without the plugin, the validator names the oracle it cannot find.
    unknown = _assay("validate", pack_dir, env=bare, cwd=tmp_path)
    assert unknown.returncode == 1 and "oracle 'mail.outside' is not a registered plugin" in unknown.stdout

    env = _install(ORACLE_GUIDE, tmp_path, "assay-oracle-mail", extract=False)
    valid = _assay("validate", pack_dir, env=env, cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert _shown(page, f"assay validate {pack_dir}").split("(")[0] in valid.stderr

    checked = _assay("pack", "check", "mail-demo", env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _shown(page, "assay pack check mail-demo") in checked.stderr

    # A case whose params break the oracle's schema is refused with its line and pointer.
    case = tmp_path / pack_dir / "cases" / "ipi-newsletter-forward.yaml"
    case.write_text(case.read_text().replace("allowed_domains: [example-corp.example]", "allowed_domains: []"))
    assert _assay("pack", "lock", pack_dir, env=env, cwd=tmp_path).returncode == 0
    broken = _assay("validate", pack_dir, env=env, cwd=tmp_path)
    assert broken.returncode == 1 and "ipi-newsletter-forward.yaml:" in broken.stdout
    assert "/oracles/0/params" in broken.stdout


SANDBOX_GUIDE = REPO / "docs" / "plugins" / "writing-a-sandbox.md"


def test_the_sandbox_page_builds_a_sandbox_a_pack_runs_in(children, scratch_venv, tmp_path: Path):
    page = SANDBOX_GUIDE.read_text(encoding="utf-8")
    pack_dir = "assay-sandbox-kv/src/assay_sandbox_kv/pack"
    write_files(extract_files(page), tmp_path)
    bare = {k: v for k, v in os.environ.items() if k not in ("ASSAY_PLUGINS", "ASSAY_BLOCK_PLUGINS")}
    locked = _assay("pack", "lock", pack_dir, env=bare, cwd=tmp_path)
    assert locked.returncode == 0, locked.stderr
    assert locked.stdout.strip() == _shown(page, f"assay pack lock {pack_dir}"), "the digest on the page is stale"

    env = _install(SANDBOX_GUIDE, tmp_path, "assay-sandbox-kv", extract=False)
    checked = _assay("pack", "check", "kv-demo", "--sandbox", "kv", env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _shown(page, "assay pack check kv-demo --sandbox kv") in checked.stderr

    run_command = "assay run --pack kv-demo --endpoint scripted:comply --sandbox kv --stages exec --out kv-run"
    assert f"$ {run_command}" in page
    ran = _assay(*run_command.split()[1:], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "kv-run" / "bundle" / "rows.jsonl").read_text().splitlines()]
    assert row["stages"]["exec"]["observed_harm"] is True
    assert row["stages"]["exec"]["state_diff"] == [
        {"store": "memory", "op": "modified", "target": "profile.payout_account"}
    ]
    validated = _assay("validate", "kv-run/bundle", env=env, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert _shown(page, "assay validate kv-run/bundle").split("(")[0] in validated.stderr

    # The same sandbox returning a diff entry the spec does not allow: the item becomes an error row naming where,
    # the run still seals a bundle that validates, and it exits 1 because every row is an error row.
    module = tmp_path / "site" / "assay_sandbox_kv" / "__init__.py"
    module.write_text(
        module.read_text().replace(
            '{"store": "memory", "op": "modified", "target": key}',
            '{"store": "memory", "op": "modified", "target": key, "value": after[key]}',
        )
    )
    broken = _assay(*run_command.replace("kv-run", "kv-broken").split()[1:], env=env, cwd=tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "Traceback" not in broken.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "kv-broken" / "bundle" / "rows.jsonl").read_text().splitlines()]
    assert "exec" not in row["stages"]
    (error,) = row["errors"]
    assert error["type"] == "invalid_outcome" and error["stage"] == "exec", error
    assert "/stages/exec/state_diff/0" in error["message"] and "'value' was unexpected" in error["message"]
    assert "invalid_outcome" not in broken.stderr or "first error" in broken.stderr
    assert _assay("validate", "kv-broken/bundle", env=env, cwd=tmp_path).returncode == 0


STAGE_GUIDE = REPO / "docs" / "plugins" / "writing-a-stage.md"


def test_the_stage_page_builds_a_new_kind_of_evaluation_that_runs_validates_and_names_its_install(
    children, scratch_venv, tmp_path: Path
):
    page = STAGE_GUIDE.read_text(encoding="utf-8")
    write_files(extract_files(page), tmp_path)
    locked = _assay("pack", "lock", "assay-dialogue/src/assay_dialogue/pack", env=dict(os.environ), cwd=tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    env = _install(STAGE_GUIDE, tmp_path, "assay-dialogue", extract=False)

    plugins = json.loads(_assay("plugins", "--json", env=env, cwd=tmp_path).stdout)
    registered = {(p["kind"], p["name"]) for p in plugins if p["distribution"] == "assay-dialogue"}
    assert registered == {
        ("case_kinds", "x-dialogue.conversation"),
        ("channels", "x-dialogue.attacker_turn"),
        ("stages", "x-dialogue.conversation"),
        ("families", "DIALOGUE"),
        ("packs", "dialogue"),
    }

    run_command = "assay run --pack dialogue --endpoint scripted:comply --endpoint scripted:refuse --out dialogue-run"
    assert f"$ {run_command}" in page
    ran = _assay(*run_command.split()[1:], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    bundle = tmp_path / "dialogue-run" / "bundle"
    rows = [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]
    outcomes = [row["stages"]["x-dialogue.conversation"] for row in rows]
    by_agent = {(row["key"]["endpoint"], o["gave_in"], o["turns"]) for row, o in zip(rows, outcomes, strict=True)}
    # The complying agent gives in at the first turn; against the refusing one the attacker uses every turn.
    assert by_agent == {("scripted-comply", True, 1), ("scripted-refuse", False, 2), ("scripted-refuse", False, 3)}
    helped = _assay("run", "--help", env=env, cwd=tmp_path)
    assert "--dialogue-max-turns [1|2|3]" in helped.stdout
    capped = _assay(*run_command.split()[1:-1], "capped-run", "--dialogue-max-turns", "1", env=env, cwd=tmp_path)
    assert capped.returncode == 0, capped.stdout + capped.stderr
    capped_rows = [
        json.loads(line) for line in (tmp_path / "capped-run" / "bundle" / "rows.jsonl").read_text().splitlines()
    ]
    assert {row["stages"]["x-dialogue.conversation"]["turns"] for row in capped_rows} == {1}
    capped_run = json.loads((tmp_path / "capped-run" / "bundle" / "run.json").read_text())
    assert capped_run["stage_options"] == {"dialogue_max_turns": "1"}
    # Issue 30, item 4: the guide's stage applies the run's condition, so D0 and D3 prompts differ and every
    # prompt it sent is recorded; a condition it does not apply (B2, a sandwich) is refused before anything runs.
    defended = _assay(*run_command.split()[1:-1], "defended-run", "--defense", "D0", "--defense", "D3", env=env,
                      cwd=tmp_path)  # fmt: skip
    assert defended.returncode == 0, defended.stdout + defended.stderr
    defended_rows = [
        json.loads(line) for line in (tmp_path / "defended-run" / "bundle" / "rows.jsonl").read_text().splitlines()
    ]
    digests = {
        condition: {e["sha256"] for row in defended_rows if row["key"]["condition"] == condition
                    for e in row["prompts_sent"]}
        for condition in ("D0", "D3")
    }  # fmt: skip
    assert digests["D0"] and digests["D3"] and not digests["D0"] & digests["D3"]
    assert all(
        e["condition_applied"] for row in defended_rows if row["key"]["condition"] == "D3" for e in row["prompts_sent"]
    )
    sandwich = _assay(*run_command.split()[1:-1], "b2-run", "--defense", "B2", env=env, cwd=tmp_path)
    assert sandwich.returncode == 2 and "no planned stage applies that placement" in sandwich.stderr
    entry = json.loads((bundle / "run.json").read_text())["stage_schemas"]["x-dialogue.conversation"]
    assert (entry["distribution"], entry["version"]) == ("assay-dialogue", "0.1.0")
    assert f'"id": "{entry["id"]}"' in page

    validated = _assay("validate", "dialogue-run/bundle", env=env, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert _shown(page, "assay validate dialogue-run/bundle").split("(")[0] in validated.stderr

    blocked = _assay("validate", "dialogue-run/bundle", env={**env, "ASSAY_BLOCK_PLUGINS": "dialogue"}, cwd=tmp_path)
    shown = _shown(page, "ASSAY_BLOCK_PLUGINS=dialogue assay validate dialogue-run/bundle")
    assert blocked.returncode == 1 and shown.split("...: ", 1)[1] in blocked.stdout, blocked.stdout + blocked.stderr
