"""What a run gives a stage is declared on the Stage, never known by the engine: options, uses, prompts,
preflight, scripted answers and a pack check, each exercised through a stage a test plugin registers.

Everything here is the real engine, CLI parser and validator; the plugin is registered in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from conftest import EXAMPLE_PACK

import assay
import assay.api
from assay.bundle import RUN_FILE
from assay.components import CaseKind, Family, PackCheckResult, RunOption, Stage
from assay.engine.check import check_pack
from assay.engine.messages import ChatRequest
from assay.engine.run import RunSettings, execute_run
from assay.errors import AssayError, UsageError
from assay.packs import Pack, lock_manifest
from assay.plugins import load_plugins

STAGE = "x-probe.ask"
KIND = "x-probe.question"
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://probe.example/schemas/ask.schema.json",
    "type": "object",
    "required": ["produced_by", "answer", "tone", "second_opinion"],
    "additionalProperties": False,
    "properties": {
        "produced_by": {"$ref": "https://assay.dev/spec/v1/defs.schema.json#/$defs/producer"},
        "answer": {"type": ["string", "null"]},
        "tone": {"type": "string"},
        "second_opinion": {"type": ["string", "null"]},
    },
}


def scripted_probe(agent, request: ChatRequest):
    """How scripted agents answer the probe: their mode and the tone option, so the test sees both arrive."""
    from assay.backends.scripted import scripted_response

    return scripted_response(f"probe answer from {agent.mode} in a {request.context['tone']} tone", request)


async def run_probe(context) -> None:
    """Ask the endpoint once, and the second-opinion endpoint (an endpoint option) when the run gives one."""
    tone = context.options["x_probe_tone"]
    request_context = {**context.request_context(STAGE), "tone": tone}
    request = ChatRequest(({"role": "user", "content": "Why?"},), max_tokens=16, context=request_context)
    response = await context.endpoint.complete(request)
    context.add_usage(response)
    second = context.options.get("x_probe_second")
    other = None
    if second is not None:
        other = (await second.complete(request)).content
    context.row["final_output"] = response.content
    context.row["stages"][STAGE] = {
        "produced_by": {"kind": "rule", "name": "probe", "version": "1"},
        "answer": response.content,
        "tone": tone,
        "second_opinion": other,
    }


class Probe:
    """A design in one plugin whose stage declares everything a run may give it."""

    def __init__(self, pack_root: Path, refuse_host: bool = False) -> None:
        self.pack_root, self.refuse_host = pack_root, refuse_host
        self.preflights: list[dict] = []

    def preflight(self, check) -> None:
        self.preflights.append(dict(check.options))
        if self.refuse_host:
            raise AssayError("the probe needs a host this one is not (refused before anything ran)")

    def check(self, check) -> PackCheckResult:
        cases = check.pack.case_index()
        failures = [f"{case_id}: no question mark" for case_id in sorted(cases) if case_id.endswith("1")]
        return PackCheckResult(frozenset(cases), {"probe cases": len(cases)}, failures)

    @assay.hookimpl
    def register_case_kinds(self, register):
        register(CaseKind(KIND, "A question to answer."))

    @assay.hookimpl
    def register_stages(self, register):
        register(
            Stage(
                STAGE,
                "Ask once, in the run's tone.",
                kinds=(KIND,),
                outcome_schema=SCHEMA,
                run=run_probe,
                options=(
                    RunOption("x_probe_tone", "The tone to ask in.", default="calm", choices=("calm", "curt")),
                    RunOption("x_probe_second", "A second opinion's backend spec.", endpoint=True),
                ),
                prompts=lambda: [{"name": STAGE, "version": "probe-v1", "digest": "sha256:" + "1" * 64}],
                preflight=self.preflight,
                scripted=scripted_probe,
                check_pack=self.check,
            )
        )

    @assay.hookimpl
    def register_families(self, register):
        register(Family("PROBE", KIND, "Probe", "Questions.", stages=(STAGE,), scripted_rate=1.0))

    @assay.hookimpl
    def register_packs(self, register):
        register(Pack.from_directory(self.pack_root))


def write_pack(root: Path) -> Path:
    (root / "cases").mkdir(parents=True)
    for i in range(2):
        case = {"spec_version": "1.1", "id": f"probe.q.{i}", "kind": KIND, "family": "PROBE", "instruction": "Why?"}
        (root / "cases" / f"{case['id']}.json").write_text(json.dumps(case))
    manifest = {
        "spec_version": "1.1",
        "name": "probe",
        "version": "0.1.0",
        "description": "Two questions.",
        "license": "CC0-1.0",
        "families": ["PROBE"],
        "cases": [],
        "fixtures": [],
        "digest": "sha256:" + "0" * 64,
    }
    (root / "pack.json").write_text(json.dumps(manifest))
    lock_manifest(root)
    return root


@pytest.fixture
def probe(tmp_path):
    plugin = Probe(write_pack(tmp_path / "pack"))
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(plugin, "probe", distribution="assay-probe", version="0.1.0")
    return plugin, host


def _run(host, out: Path, **options: str):
    settings = RunSettings(pack="probe", endpoints=["scripted:comply"], out=out, progress=False, stage_options=options)
    return execute_run(settings, host=host)


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


def test_options_reach_the_stage_with_defaults_and_are_recorded(probe, tmp_path):
    plugin, host = probe
    outcome = _run(host, tmp_path / "default")
    assert outcome.report.ok
    (row, _) = _rows(outcome.bundle)
    # The default tone arrives, and the stage's scripted answer (not the backend's own) answered.
    assert row["stages"][STAGE]["tone"] == "calm" and row["stages"][STAGE]["second_opinion"] is None
    assert row["stages"][STAGE]["answer"] == "probe answer from comply in a calm tone"
    run = json.loads((outcome.bundle / RUN_FILE).read_text())
    assert run["stage_options"] == {"x_probe_tone": "calm"}
    assert run["prompts"] == [{"name": STAGE, "version": "probe-v1", "digest": "sha256:" + "1" * 64}]
    assert run["judges"] == [] and run["sandbox"] is None  # the stage uses neither
    assert plugin.preflights == [{"x_probe_tone": "calm", "x_probe_second": None}]


def test_an_endpoint_option_becomes_an_endpoint_the_stage_calls(probe, tmp_path):
    _, host = probe
    outcome = _run(host, tmp_path / "second", x_probe_tone="curt", x_probe_second="scripted:refuse")
    (row, _) = _rows(outcome.bundle)
    assert row["stages"][STAGE]["second_opinion"] == "probe answer from refuse in a curt tone"
    run = json.loads((outcome.bundle / RUN_FILE).read_text())
    second = run["stage_options"]["x_probe_second"]
    assert second["model"]["name"] == "scripted:refuse" and second["id"] == "x-probe-second"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"x_probe_tone": "shouting"}, "--x-probe-tone 'shouting': expected calm or curt"),
        ({"x_probe_second": "nowhere:x"}, "--x-probe-second 'nowhere:x': backend 'nowhere' is not a registered"),
        ({"x_nobody": "1"}, "--x-nobody: no registered stage has this option"),
    ],
)
def test_a_bad_option_value_is_a_usage_error_before_anything_is_written(probe, tmp_path, options, message):
    _, host = probe
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(host, tmp_path / "bad", **options)
    assert not (tmp_path / "bad" / "bundle").exists()


def test_a_preflight_refusal_stops_the_run_before_any_item(tmp_path):
    plugin = Probe(write_pack(tmp_path / "pack"), refuse_host=True)
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(plugin, "probe", distribution="assay-probe", version="0.1.0")
    with pytest.raises(AssayError, match="refused before anything ran"):
        _run(host, tmp_path / "refused")
    assert not (tmp_path / "refused" / "state" / "rows.jsonl").exists()


def test_assay_run_offers_every_registered_stage_option(probe):
    """The run command's options come from the registered stages (the host of the invocation)."""
    from assay.cli.run_cmd import run_command

    _, host = probe
    context = click.Context(run_command, obj={"host": host})
    names = {param.name: param for param in run_command.get_params(context)}
    assert "x_probe_tone" in names and list(names["x_probe_tone"].type.choices) == ["calm", "curt"]
    assert "x_probe_second" in names and "--help" in list(names.values())[-1].opts
    # The built-in designs' own options are there when their plugins are.
    builtin = click.Context(run_command, obj={"host": load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})})
    assert {"controller", "exec_agent"} <= {param.name for param in run_command.get_params(builtin)}


def test_pack_check_runs_each_stages_own_check(probe):
    _, host = probe
    result = check_pack(host.registry.get("packs", "probe"), host)
    assert result.counts == {"probe cases": 2} and result.unchecked == 0
    assert result.failures == ["probe.q.1: no question mark"] and not result.ok


def test_an_option_name_that_cannot_be_a_manifest_key_or_a_flag_is_refused():
    with pytest.raises(ValueError, match="lower-case words"):
        RunOption("x-probe.tone", "A tone.")


def test_a_stage_may_use_only_the_judge_or_the_sandbox():
    with pytest.raises(ValueError, match="uses 'network'"):
        Stage("x-probe.bad", "", kinds=(KIND,), outcome_schema=SCHEMA, run=run_probe, uses=frozenset({"network"}))


class PlainCondition:
    """A condition of the probe's own, its run's default."""

    @assay.hookimpl
    def register_defenses(self, register):
        from assay.components import Defense
        from assay.policies import policy_document

        document = policy_document(
            id="plain", title="Plain", text="", placement="none", role="no_defense", components=[]
        )
        register(Defense("plain", document, default=True))


def test_a_run_naming_no_condition_uses_the_registered_defaults(tmp_path):
    """The engine names no condition: without the built-in designs, a run needs a plugin's default condition."""
    from assay.plugins import DEFAULT_PLUGINS

    designs = ",".join(p for p in DEFAULT_PLUGINS if ".designs." in p)
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1", "ASSAY_BLOCK_PLUGINS": designs})
    host.register(Probe(write_pack(tmp_path / "pack")), "probe", distribution="assay-probe", version="0.1.0")
    with pytest.raises(UsageError, match="no registered condition is a default: name one with --condition"):
        _run(host, tmp_path / "none")
    host.register(PlainCondition(), "plain")
    outcome = _run(host, tmp_path / "plain")
    assert {row["key"]["condition"] for row in _rows(outcome.bundle)} == {"plain"} and outcome.report.ok
    # With the built-in designs loaded, the staged design's baseline is the default.
    assert load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"}).registry.get("defenses", "D0").default


class BareJudge:
    """A judge with no roles at all: fine for a stage that asks none, refused by the stages that ask for them."""

    name = "bare"
    description = "Labels nothing."
    version = "1"
    prompt_template = "labels nothing"
    prompt_sha256 = assay.api.template_digest("labels nothing")

    def instance(self, options, make_endpoint=None):
        class Instance:
            def describe(self, stage):
                return {"name": "bare", "stage": stage}

            def producer(self):
                return {"kind": "judge", "name": "bare", "version": "1"}

        return Instance()


class BareJudgePlugin:
    @assay.hookimpl
    def register_judges(self, register):
        register(BareJudge())


def test_a_judge_without_the_roles_a_stage_asks_for_stops_the_run_in_one_line(tmp_path):
    """The generic judge protocol asks no role; the staged design's stages ask for theirs and say what lacks."""
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(BareJudgePlugin(), "bare")
    settings = RunSettings(
        pack=str(EXAMPLE_PACK),
        endpoints=["scripted:comply"],
        out=tmp_path / "bare",
        stages=["semantic"],
        judge="bare",
        limit=1,
        progress=False,
    )
    with pytest.raises(
        UsageError, match=r"the semantic stage needs a judge with the role semantic .* the run's judge lacks it"
    ):
        execute_run(settings, host=host)


@pytest.mark.parametrize("member", ["run_id", "plugins", "budgets", "not_a_member"])
def test_an_option_cannot_overwrite_what_the_engine_records(tmp_path, member):
    """The attack: a plugin option claims a manifest member (its provenance, its budgets) as its own."""
    from assay.errors import PluginError

    class Overwriting(Probe):
        @assay.hookimpl
        def register_stages(self, register):
            register(
                Stage(
                    STAGE,
                    "Ask once.",
                    kinds=(KIND,),
                    outcome_schema=SCHEMA,
                    run=run_probe,
                    options=(
                        RunOption("x_probe_tone", "The tone.", default="calm"),
                        RunOption(member, "A claim on the manifest.", default="forged", spec_member=True),
                    ),
                )
            )

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(Overwriting(write_pack(tmp_path / "pack")), "probe", distribution="assay-probe", version="0.1.0")
    with pytest.raises(PluginError, match=f"run option '{member}' claims a run manifest member"):
        _run(host, tmp_path / "forged")
    assert not (tmp_path / "forged" / "bundle" / RUN_FILE).exists()


def test_no_stage_option_takes_the_name_of_one_of_assay_runs_own_settings():
    """A stage option named ``pack`` or ``out`` would be read as the run's own (or shadow it): refused."""
    from assay.cli.run_cmd import _FILE_KEYS, run_command
    from assay.components import RUN_SETTINGS

    own = {param.name for param in click.Command.get_params(run_command, click.Context(run_command))}
    assert own - {"_click_default_help"} | _FILE_KEYS <= RUN_SETTINGS  # the list covers every setting there is
    for name in ("pack", "out", "judge", "seeds"):
        with pytest.raises(ValueError, match="the name of one of assay run's own settings"):
            RunOption(name, "A shadow.")


def test_the_audit_has_its_own_judge_role(tmp_path):
    """``--audit-judge`` (a judge option of the audit stage) labels the fallback and is what the manifest names for
    the audit, while the semantic verdicts stay the run judge's (issue 14, item 2)."""
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    settings = RunSettings(
        pack=str(EXAMPLE_PACK),
        endpoints=["scripted:comply"],
        out=tmp_path / "audit",
        stages=["semantic", "audit"],
        stage_options={"audit_judge": "llm:backend=scripted,mode=refuse"},
        progress=False,
    )
    outcome = execute_run(settings, host=host)
    assert outcome.report.ok, [i.format() for i in outcome.report.ordered()[:5]]
    run = json.loads((outcome.bundle / RUN_FILE).read_text())
    assert {judge["stage"]: judge["name"] for judge in run["judges"]} == {"semantic": "calibrated", "audit": "llm"}
    assert "stage_options" not in run  # a judge option is recorded as the stage's judge, not as text
    with pytest.raises(UsageError, match="--audit-judge 'nobody': judge 'nobody' is not a registered plugin"):
        execute_run(
            RunSettings(
                pack=str(EXAMPLE_PACK),
                endpoints=["scripted:comply"],
                out=tmp_path / "bad",
                stages=["semantic", "audit"],
                stage_options={"audit_judge": "nobody"},
                progress=False,
            ),
            host=host,
        )
