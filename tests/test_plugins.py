"""The plugin host: built-ins, entry points, duplicates, switches, provenance."""

from __future__ import annotations

import importlib.metadata as metadata
import inspect
import re
import types
from dataclasses import replace
from unittest import mock

import pytest

import assay
import assay.api
from assay import hookspecs
from assay.components import Family
from assay.errors import DuplicateNameError, PluginError
from assay.plugins import DEFAULT_PLUGINS, KINDS, PluginHost, load_plugins

SIX_FAMILIES = {"DPI", "IPI", "TRI", "MPI", "MEX", "ADI"}


def test_hookimpl_is_reexported_from_the_package_root():
    assert assay.hookimpl is hookspecs.hookimpl


def test_every_kind_has_a_documented_hook():
    for kind in KINDS:
        hook = getattr(hookspecs, f"register_{kind}")
        assert inspect.getdoc(hook), f"register_{kind} has no docstring"
        assert list(inspect.signature(hook).parameters) == ["register"]


def test_builtins_register_through_the_hooks(builtins_host):
    registry = builtins_host.registry
    assert set(registry.names("families")) >= SIX_FAMILIES
    assert {
        "sec.localization",
        "sec.reachability",
        "sec.proof_of_trigger",
        "sec.patch_verification",
        "sec.report_writing",
        "perm.standard",
        "perm.sensitive",
    } <= set(registry.names("families"))
    assert set(registry.names("defenses")) == {
        "D0",
        "B1",
        "B2",
        "B3",
        "B4",
        "D1",
        "D2",
        "D3",
        "D4",
        "D3_LM",
        "standard",
        "authorized",
        "authorized_owner",
        "authorized_scope",
        "authorized_facts",
        "stress",
        "unrestricted",
        "curated",
    }
    assert "semantic.core_fail_rate" in registry.names("metrics")
    assert {"validate", "plugins", "packs", "hash", "schema", "registry"} <= set(registry.names("commands"))
    plugins = {r.plugin for r in registry.registrations()}
    assert plugins == set(DEFAULT_PLUGINS)


def test_family_defaults_carry_channels_and_labels(builtins_host):
    ipi = builtins_host.registry.get("families", "IPI")
    assert ipi.channels == ("document", "web_page")
    assert builtins_host.registry.get("families", "TRI").default_labels["source_channel"] == "tool_return"
    assert builtins_host.registry.get("families", "MPI").default_labels["lifecycle_stage"] == "memory_write"


def test_describe_gives_provenance(builtins_host):
    rows = builtins_host.describe()
    assert {"kind", "name", "plugin", "distribution", "version", "files_sha256"} == set(rows[0])
    assert all(row["distribution"] == "assay" and row["version"] == assay.__version__ for row in rows)
    # Which code it was: one digest of the engine's installed files, the same for every built-in.
    assert len({row["files_sha256"] for row in rows}) == 1 and rows[0]["files_sha256"].startswith("sha256:")


class _ThrowawayFamilies:
    """A test double plugin registering one family (unit test only)."""

    def __init__(self, name: str):
        self.name = name

    @assay.hookimpl
    def register_families(self, register):
        register(Family(name=self.name, kind="attack", title="t", description="d"))


def test_duplicate_name_names_both_plugins():
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(DuplicateNameError) as info:
        host.register(_ThrowawayFamilies("DPI"), "third-party-dpi")
    message = str(info.value)
    assert "assay.designs.staged.plugin" in message and "third-party-dpi" in message and "'DPI'" in message


def test_component_of_the_wrong_type_or_without_name_is_rejected():
    class WrongType:
        @assay.hookimpl
        def register_oracles(self, register):
            register(object())

    with pytest.raises(PluginError, match=r"plugin 'wrong' registered .* as a oracle, but it is not a Oracle"):
        PluginHost().register(WrongType(), "wrong")

    class Nameless:
        @assay.hookimpl
        def register_families(self, register):
            register(Family(name="", kind="attack", title="t", description="d"))

    with pytest.raises(PluginError, match="plugin 'nameless' registered a family without a non-empty string 'name'"):
        PluginHost().register(Nameless(), "nameless")


def test_a_component_that_falls_short_of_its_protocol_is_told_what_it_lacks():
    """A judge written from the docs with only a name and a description: the error names what is missing."""

    class HalfAJudge:
        name = "half"
        description = "A judge without an instance method."

    class Plugin:
        @assay.hookimpl
        def register_judges(self, register):
            register(HalfAJudge())

    with pytest.raises(PluginError) as info:
        PluginHost().register(Plugin(), "half-judge")
    message = str(info.value)
    lacks = "it is not a Judge: it has no 'version', 'prompt_template', 'prompt_sha256', 'instance'"
    assert lacks in message and "'name'" not in message.split("it has no")[1]


def test_a_judge_whose_prompt_digest_is_not_its_templates_is_refused_at_registration():
    """A judge declares who it is on the class; a digest that does not cover its template is a plugin error."""

    class Liar:
        name = "liar"
        description = "Claims another judge's prompt."
        version = "1"
        prompt_template = "my own prompt"
        prompt_sha256 = assay.api.template_digest("someone else's prompt")

        def instance(self, options, make_endpoint):
            raise AssertionError("never built")

    class Plugin:
        @assay.hookimpl
        def register_judges(self, register):
            register(Liar())

    with pytest.raises(PluginError, match=r"registered judge 'liar', but its prompt_sha256 .* is not the digest"):
        PluginHost().register(Plugin(), "liar-judge")


def test_misspelled_hook_is_a_plugin_error_naming_the_plugin():
    class Misspelled:
        @assay.hookimpl
        def register_pack(self, register):
            pass

    host = PluginHost()
    with pytest.raises(PluginError, match="plugin 'typo' does not fit the assay hooks"):
        host.register(Misspelled(), "typo")
    assert host.plugin_names() == []


def test_autoload_switch_reads_false_words_as_off():
    eps = [_fake_entry_point("one", _ThrowawayFamilies("ONE"))]
    for value in ("False", "no", "0", "OFF", ""):
        assert "ONE" in load_plugins(
            environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": value}, entry_points=lambda: eps
        ).registry.names("families")


def test_a_broken_pack_does_not_stop_the_host(tmp_path):
    from assay.packs import Pack

    class BrokenPack:
        @assay.hookimpl
        def register_packs(self, register):
            register(Pack.from_directory(tmp_path))  # no pack.yaml here

    host = PluginHost()
    host.register(BrokenPack(), "broken-pack")
    assert host.registry.names("packs") == [f"unreadable:{tmp_path}"]


def _fake_entry_point(name: str, plugin: object, dist: str = "assay-fake", version: str = "9.9"):
    """A stand-in for importlib.metadata.EntryPoint (unit test double)."""
    return types.SimpleNamespace(
        name=name, value=f"{name}:plugin", load=lambda: plugin, dist=types.SimpleNamespace(name=dist, version=version)
    )


def test_entry_points_are_discovered_with_distribution_and_version():
    eps = [_fake_entry_point("weird", _ThrowawayFamilies("ZZZ"))]
    host = load_plugins(environ={}, entry_points=lambda: eps)
    registration = next(r for r in host.registry.registrations() if r.name == "ZZZ")
    assert (registration.plugin, registration.distribution, registration.version) == ("weird", "assay-fake", "9.9")


def test_allow_list_and_block_switches():
    eps = [_fake_entry_point("one", _ThrowawayFamilies("ONE")), _fake_entry_point("two", _ThrowawayFamilies("TWO"))]
    only_one = load_plugins(environ={"ASSAY_PLUGINS": "one"}, entry_points=lambda: eps)
    assert "ONE" in only_one.registry.names("families") and "TWO" not in only_one.registry.names("families")
    blocked = load_plugins(
        environ={"ASSAY_BLOCK_PLUGINS": ",".join(["one", "two", *(p for p in DEFAULT_PLUGINS if ".designs." in p)])},
        entry_points=lambda: eps,
    )
    assert blocked.registry.names("families") == [] and blocked.registry.names("stages") == []
    assert blocked.registry.names("defenses") == []
    off = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"}, entry_points=lambda: eps)
    assert not {"ONE", "TWO"} & set(off.registry.names("families"))


def test_broken_entry_point_is_named():
    def boom():
        raise ImportError("no module named nowhere")

    ep = types.SimpleNamespace(name="broken", value="nowhere:plugin", load=boom, dist=None)
    with pytest.raises(PluginError, match=r"'broken'.*failed to load"):
        load_plugins(environ={}, entry_points=lambda: [ep])


def test_trace_switch_prints_hook_calls(capsys):
    load_plugins(environ={"ASSAY_TRACE_HOOKS": "1", "ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    err = capsys.readouterr().err
    assert "register_families -> plugin assay.designs.staged.plugin" in err
    assert "registered family DPI" in err


def test_installed_example_pack_is_found_through_its_entry_point(host):
    assert "example" in host.registry.names("packs")
    registration = next(r for r in host.registry.registrations() if r.kind == "packs" and r.name == "example")
    assert registration.distribution == "assay-pack-example"
    entry_points = {ep.name for ep in metadata.entry_points(group="assay")}
    assert "example" in entry_points


def test_loading_has_no_import_time_side_effects():
    import importlib

    import assay.plugins as plugins_module

    importlib.reload(plugins_module)
    # Two loads give two independent registries: no class-level or global state.
    a = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    b = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    a.register(_ThrowawayFamilies("ONLY-IN-A"), "only-a")
    assert "ONLY-IN-A" not in b.registry.names("families")


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [("stages", ("semantic", "conversation"), "stage 'conversation'"), ("kind", "dialogue", "case kind 'dialogue'"),
     ("channels", ("carrier_pigeon",), "channel 'carrier_pigeon'")],
)  # fmt: skip
def test_a_family_naming_a_stage_kind_or_channel_nobody_defines_is_refused_naming_the_plugin(field, value, what):
    from dataclasses import replace

    family = replace(
        Family(name="CONV", kind="attack", title="t", description="d", stages=("semantic",)), **{field: value}
    )

    class Plugin:
        @assay.hookimpl
        def register_families(self, register):
            register(family)

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(PluginError) as info:
        host.register(Plugin(), "conversations")
    assert f"plugin 'conversations' registered family 'CONV' with the {what}, which no plugin registers" in str(
        info.value
    )


def _stage(name, kinds=("attack",), needs=()):
    from assay.components import Stage

    async def run(context):
        context.row["stages"][name] = {"produced_by": {"kind": "rule", "name": name, "version": "1"}}

    schema = {"$id": f"https://plugins.example/{name}.schema.json", "type": "object"}
    return Stage(name, f"The {name} stage.", kinds=kinds, outcome_schema=schema, run=run, needs=needs)


class _StagePlugin:
    """A throwaway plugin adding case kinds, channels, stages and families (unit-test double of a design)."""

    def __init__(self, stages=(), families=(), kinds=(), channels=()):
        self.stages, self.families, self.kinds, self.channels = stages, families, kinds, channels

    @assay.hookimpl
    def register_case_kinds(self, register):
        for kind in self.kinds:
            register(kind)

    @assay.hookimpl
    def register_channels(self, register):
        for channel in self.channels:
            register(channel)

    @assay.hookimpl
    def register_stages(self, register):
        for stage in self.stages:
            register(stage)

    @assay.hookimpl
    def register_families(self, register):
        for family in self.families:
            register(family)


def test_a_family_may_come_before_the_plugin_that_registers_its_stage_kind_and_channel():
    """Plugins load in name order: references are checked once all are in, not one plugin at a time."""
    from assay.components import CaseKind, Channel

    family = Family(
        name="CONV", kind="x-conv.dialogue", title="t", description="d", channels=("x-conv.pigeon",),
        stages=("x-conv.conversation",),
    )  # fmt: skip
    plugins = {
        "a-family": _StagePlugin(families=[family]),
        "b-stage": _StagePlugin(
            stages=[_stage("x-conv.conversation", kinds=("x-conv.dialogue",))],
            kinds=[CaseKind("x-conv.dialogue", "A conversation.")],
            channels=[Channel("x-conv.pigeon", "By pigeon.")],
        ),
    }
    points = [metadata.EntryPoint(name, f"tests:{name}", "assay") for name in plugins]
    with mock.patch.object(metadata.EntryPoint, "load", lambda self: plugins[self.name]):
        host = load_plugins(environ={}, entry_points=lambda: points)
    assert host.registry.get("families", "CONV") is family
    assert "x-conv.conversation" in host.registry.names("stages")


def test_a_stage_for_another_kind_of_case_is_refused_for_a_family():
    family = Family(name="CONV", kind="attack", title="t", description="d", stages=("trajectory",))
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(PluginError, match="family 'CONV' of kind 'attack' with the stage 'trajectory', which runs on"):
        host.register(_StagePlugin(families=[family]), "conversations")


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([_stage("x-a.one", needs=("x-a.missing",))], "stage 'x-a.one' naming the stage 'x-a.missing'"),
        ([_stage("x-a.one", kinds=("dialogue",))], "stage 'x-a.one' naming the case kind 'dialogue'"),
        ([_stage("x-a.one", needs=("x-a.two",)), _stage("x-a.two", needs=("x-a.one",))], "need each other"),
    ],
)
def test_a_stage_naming_what_nobody_registers_or_needing_in_a_circle_is_refused(stages, message):
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(PluginError, match=message):
        host.register(_StagePlugin(stages=stages), "stages-plugin")


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (_stage("conversation"), "the stage 'conversation': a name the spec does not define must be an extension"),
        (replace(_stage("x-a.one"), outcome_schema={"type": "object"}), "cannot be used: it has no \\$id"),
    ],
)
def test_a_plugin_stage_needs_an_extension_name_and_a_usable_outcome_schema(stage, message):
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(PluginError, match=message):
        host.register(_StagePlugin(stages=[stage]), "stages-plugin")


def test_an_outcome_schema_that_is_no_json_schema_is_refused_before_a_run_uses_it():
    """Loading checks the schema's shape only (compiling it needs libraries a light command never imports); a run
    planning the stage compiles it first and refuses it in one line naming the plugin."""
    from assay.extensions import usable_outcome_schemas

    broken = replace(_stage("x-a.one"), outcome_schema={"$id": "https://x.example/s", "type": "nonesuch"})
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(_StagePlugin(stages=[broken]), "stages-plugin")
    usable_outcome_schemas(host.registry, ["semantic"])  # the spec's own stages need no compiling
    expected = "plugin 'stages-plugin' registered stage 'x-a.one' whose outcome schema cannot be used: not a valid"
    with pytest.raises(PluginError, match=re.escape(expected)):
        usable_outcome_schemas(host.registry, ["semantic", "x-a.one"])


def test_stages_run_in_the_spec_order_then_by_name_each_after_what_it_needs():
    from assay.stage_order import stage_order

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(
        _StagePlugin(stages=[_stage("x-a.first", needs=("x-z.last",)), _stage("x-z.last", needs=("semantic",))]),
        "ordered",
    )
    assert stage_order(host.registry.items("stages")) == [
        "semantic", "audit", "exec", "trajectory", "permission", "x-z.last", "x-a.first",
    ]  # fmt: skip


def test_a_plugin_outcome_is_paired_by_compare_and_cannot_take_a_builtin_name():
    """register_outcomes: a new stage's plugin gives assay compare the binary outcomes its rows carry."""
    from assay.components import Outcome
    from assay.reports.compare import Selector, compare_rows

    refused = Outcome(
        "x-demo.refused",
        "the response refused",
        lambda row: (
            None if "semantic" not in row["stages"] else row["stages"]["semantic"]["defense_behavior"] == "refused"
        ),
    )

    class Plugin:
        @assay.hookimpl
        def register_outcomes(self, register):
            register(refused)

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(Plugin(), "demo-outcomes")
    available = list(host.registry.items("outcomes").values())
    assert "x-demo.refused" in {outcome.name for outcome in available} and "exec.tool_call" in {
        o.name for o in available
    }

    def row(endpoint, seed, behavior):
        key = {"case_id": "c", "endpoint": endpoint, "condition": "D0", "seed": seed, "epoch": 0, "protocol": "default"}
        return {"key": key, "stages": {"semantic": {"core_fail": False, "defense_behavior": behavior}}}

    rows = [row("a", seed, "refused" if seed % 2 else "ignored_injection") for seed in range(6)]
    rows += [row("b", seed, "refused") for seed in range(6)]
    result = compare_rows(
        rows, Selector.parse("endpoint=a"), [Selector.parse("endpoint=b")], outcomes=["x-demo.refused"],
        resamples=100, available=available,
    )  # fmt: skip
    (comparison,) = result.comparisons
    assert comparison.outcome == "x-demo.refused" and comparison.pairs == 6
    assert (comparison.rate_a, comparison.rate_b, comparison.mcnemar_c) == (0.5, 1.0, 3)

    class Clash:
        @assay.hookimpl
        def register_outcomes(self, register):
            register(Outcome("exec.tool_call", "a second meaning", lambda row: None))

    with pytest.raises(DuplicateNameError):
        load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"}).register(Clash(), "clash")


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (("files.delete", ("local",)), "the tool 'files.delete': a tool's name is what a model calls"),
        (("kv_get", ("kv",)), "the tool 'kv_get' implemented by the sandbox 'kv', which no plugin registers"),
    ],
)
def test_a_tool_needs_a_callable_name_and_a_registered_sandbox(tool, message):
    from assay.components import Tool

    name, sandboxes = tool

    class Plugin:
        @assay.hookimpl
        def register_tools(self, register):
            register(Tool(name, "A tool.", {"type": "object"}, sandboxes=sandboxes))

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    with pytest.raises(PluginError, match=message):
        host.register(Plugin(), "tools-plugin")


def test_the_local_sandboxs_tools_are_registrations():
    from assay.designs.staged.sandbox import TOOL_SCHEMAS

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    tools = host.registry.items("tools")
    assert [tools[schema["function"]["name"]].schema() for schema in TOOL_SCHEMAS] == list(TOOL_SCHEMAS)
    assert {tool.sandboxes for tool in tools.values()} == {("local",)}
