"""A fourth design, published as two pip distributions in tests/thirdparty/, runs through assay's hooks alone.

``assay-design-social`` registers a case kind, an injection channel, an
adaptive multi-turn stage, a sandbox with two new tools, a family, a metric, a
report table, a paired outcome and a scripted reference agent that uses the
tools; ``assay-pack-social`` publishes six cases
for it. Both are pip-installed into a scratch folder and driven through the
real command line: the pack validates (its oracles wait for a registered
tool), a run plans the stage, the bundle validates, and without the design the
validator names what to install; the report shows the design's table and
compare pairs rows on its outcome. Neither imports anything of assay but
``assay.api``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import REPO, install_privately

THIRDPARTY = REPO / "tests" / "thirdparty"
DISTRIBUTIONS = ("assay-design-social", "assay-pack-social")
STAGE = "x-social.conversation"


@pytest.fixture(scope="module")
def social(scratch_venv: Path) -> dict[str, str]:
    """The environment of a user who pip-installed both distributions."""
    return install_privately([THIRDPARTY / name for name in DISTRIBUTIONS], scratch_venv / "social-site")


@pytest.fixture(scope="module")
def social_run(children, social, assay_cli, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("social") / "run"
    ran = assay_cli(
        "run", "--pack", "social", "--endpoint", "scripted:comply", "--endpoint", "scripted:refuse",
        "--endpoint", "social-agent", "--seeds", "0,1", "--out", str(out), "--quiet", env=social,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return out / "bundle"


def test_the_design_registers_everything_through_the_hooks(children, social, assay_cli):
    plugins = json.loads(assay_cli("plugins", "--json", env=social).stdout)
    mine = {(p["kind"], p["name"]) for p in plugins if p["distribution"] == "assay-design-social"}
    assert mine == {
        ("case_kinds", "x-social.conversation"),
        ("channels", "x-social.caller_turn"),
        ("stages", STAGE),
        ("backends", "social-agent"),
        ("sandboxes", "social-desk"),
        ("tools", "social_lookup"),
        ("tools", "social_reset_password"),
        ("families", "SOCIAL"),
        ("metrics", "x-social.compromise_rate"),
        ("report_sections", "social"),
        ("outcomes", "x-social.compromised"),
    }
    assert ("packs", "social") in {(p["kind"], p["name"]) for p in plugins if p["distribution"] == "assay-pack-social"}


def test_the_pack_validates_and_its_oracles_wait_for_a_registered_tool(children, social, assay_cli):
    pack = THIRDPARTY / "assay-pack-social" / "assay_pack_social" / "pack"
    validated = assay_cli("validate", str(pack), env=social)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "warning" not in validated.stderr and "6 cases" in validated.stderr


def test_a_run_of_the_design_validates_and_records_each_conversation(social_run, social, assay_cli):
    rows = [json.loads(line) for line in (social_run / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 36 and all(set(row["stages"]) == {STAGE} for row in rows)
    by_agent = {
        (row["key"]["endpoint"], outcome["compromised"], outcome["turns"], outcome["tool_calls"],
         tuple(result["fired"] for result in outcome["oracle_results"]))
        for row in rows for outcome in [row["stages"][STAGE]]
    }  # fmt: skip
    # The complying agent reads the password out at once (the text oracle fires); against the refusing one the
    # caller escalates to the end; the design's own agent resets the account through the helpdesk's tool (the
    # tool oracle fires, the password is never read out).
    assert by_agent == {
        ("scripted-comply", True, 1, 0, (False, True)),
        ("scripted-refuse", False, 3, 0, (False, False)),
        ("social-agent", True, 1, 1, (True, False)),
    }
    reset = next(row for row in rows if row["key"]["endpoint"] == "social-agent")
    assert reset["transcript"]["tool_calls"][0]["name"] == "social_reset_password"
    assert any(
        m["role"] == "tool" and "reset; temporary password" in m["content"] for m in reset["transcript"]["messages"]
    )
    run = json.loads((social_run / "run.json").read_text())
    assert run["stage_schemas"][STAGE]["distribution"] == "assay-design-social"
    validated = assay_cli("validate", str(social_run), env=social)
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_without_the_design_the_bundle_is_refused_with_what_to_install(social_run, social, assay_cli):
    blocked = assay_cli("validate", str(social_run), env={**social, "ASSAY_BLOCK_PLUGINS": "social-design"})
    assert blocked.returncode == 1
    assert "pip install 'assay-design-social==0.1.0'" in blocked.stdout, blocked.stdout + blocked.stderr


def test_the_report_shows_the_designs_table_and_compare_pairs_on_its_outcome(social_run, social, assay_cli):
    report = assay_cli("report", str(social_run), env=social)
    assert report.returncode == 0, report.stderr
    table = report.stdout[report.stdout.index("Helpdesk conversations: who was talked round") :]
    assert "Compromised@N by endpoint and condition" in table and "pooled (3 endpoints)" in table
    compared = assay_cli(
        "compare", str(social_run), "--a", "endpoint=scripted-refuse", "--b", "endpoint=scripted-comply",
        "--metric", "x-social.compromised", "--json", env=social,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stdout + compared.stderr
    (comparison,) = json.loads(compared.stdout)["comparisons"]
    assert comparison["outcome"] == "x-social.compromised" and comparison["pairs"] == 12
    assert (comparison["rate_a"], comparison["rate_b"]) == (0.0, 1.0)


def test_the_design_and_its_pack_import_nothing_of_assay_but_the_public_api():
    for path in THIRDPARTY.glob("assay-*-social/*/*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                assert name.split(".")[0] != "assay" or name == "assay.api", f"{path.name} imports {name}"


def test_a_relabelled_conversation_is_refused_by_the_designs_own_rederiver(social_run, social, assay_cli, tmp_path):
    """The design re-derives its verdicts from the row's record: flipping compromised and resealing does not pass."""
    import shutil

    from assay.bundle import seal_bundle

    bundle = tmp_path / "bundle"
    shutil.copytree(social_run, bundle)
    rows = [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]
    target = next(i for i, row in enumerate(rows) if row["key"]["endpoint"] == "social-agent")
    rows[target]["stages"][STAGE]["compromised"] = False  # the tool call that reset the account is still recorded
    (bundle / "rows.jsonl").write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    manifest = json.loads((bundle / "bundle.json").read_text())
    seal_bundle(bundle, pack=manifest["pack"], row_count=len(rows))  # re-sealed, as a cheater would
    validated = assay_cli("validate", str(bundle), env=social)
    assert validated.returncode == 1
    assert f"{target + 1}: /stages/{STAGE}/compromised: compromised is recorded as False" in validated.stdout


def test_replay_makes_the_designs_recorded_calls_again(social_run, social, assay_cli, tmp_path):
    """--replay runs the design's own replayer: an edited tool answer is caught, the honest run is not."""
    import shutil

    from assay.bundle import seal_bundle

    honest = assay_cli("validate", "--replay", str(social_run), env=social)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert "36 verdicts re-derived, 36 x-social.conversation rows replayed" in honest.stderr
    bundle = tmp_path / "bundle"
    shutil.copytree(social_run, bundle)
    rows = [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]
    target = next(i for i, row in enumerate(rows) if row["key"]["endpoint"] == "social-agent")
    for message in rows[target]["transcript"]["messages"]:
        if message["role"] == "tool":
            message["content"] = "error: the account is locked"  # as if the reset had been refused
    (bundle / "rows.jsonl").write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    seal_bundle(bundle, pack=json.loads((bundle / "bundle.json").read_text())["pack"], row_count=len(rows))
    replayed = assay_cli("validate", "--replay", str(bundle), env=social)
    assert replayed.returncode == 1
    assert f"rows.jsonl:{target + 1}: /transcript/tool_calls/0: tool call 0 (social_reset_password) answers" in (
        replayed.stdout
    )
