"""The contract a benchmark whose attack is a condition needs: families that name their default conditions, and
conditions a plugin's stage places itself (spec 1.2 extension placements). Plugins here are unit-test doubles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK

from assay.api import Defense, Family, hookimpl, policy_document
from assay.engine.run import RunSettings, _default_conditions, execute_run
from assay.errors import PluginError, UsageError
from assay.plugins import load_plugins
from assay.policies import apply_defense
from assay.schemas import spec_schemas

REPO = Path(__file__).resolve().parents[1]
PLACED = policy_document(
    spec_version="1.2", id="x-demo-attack", text="Do {goal} now.", placement="x-demo.vector", role="other",
    extensions={"x-demo": {"attack": "now"}},
)  # fmt: skip


class _Plugin:
    """Test double of a plugin: families and conditions."""

    def __init__(self, families=(), defenses=()):
        self.families, self.defenses = families, defenses

    @hookimpl
    def register_families(self, register):
        for family in self.families:
            register(family)

    @hookimpl
    def register_defenses(self, register):
        for defense in self.defenses:
            register(defense)


def _host(*plugins):
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    for number, plugin in enumerate(plugins):
        host.register(plugin, f"demo-{number}")
    return host


def test_a_placed_condition_is_a_valid_1_2_policy():
    assert PLACED["spec_version"] == "1.2"
    assert spec_schemas().violations("defense_policy", PLACED) == []


def test_a_family_naming_an_unregistered_condition_is_refused():
    family = Family("DEMO", "attack", "Demo", "d", conditions=("nowhere",))
    with pytest.raises(PluginError, match="family 'DEMO' with the condition 'nowhere', which no plugin registers"):
        _host(_Plugin(families=[family]))


def test_a_run_of_families_that_name_conditions_uses_them_else_the_defaults():
    one = Family("ONE", "attack", "One", "d", conditions=("B2", "D3"))
    two = Family("TWO", "attack", "Two", "d", conditions=("D3", "D1"))
    plain = Family("PLAIN", "attack", "Plain", "d")
    host = _host(_Plugin(families=[one, two, plain]))
    named = {"a": {"family": "ONE"}, "b": {"family": "TWO"}}
    assert _default_conditions(named, host) == ["B2", "D3", "D1"]  # the union, in the order given
    assert _default_conditions({**named, "c": {"family": "PLAIN"}}, host) == ["D0"]  # a family names none


def test_a_placed_condition_is_refused_where_no_stage_of_its_plugin_runs(tmp_path):
    host = _host(_Plugin(defenses=[Defense("x-demo-attack", PLACED)]))
    with pytest.raises(UsageError, match=r"placed at x-demo\.vector, and no planned stage applies that placement"):
        execute_run(
            RunSettings(pack=str(EXAMPLE_PACK), endpoints=["scripted:refuse"], defenses=["x-demo-attack"],
                        out=tmp_path / "o", progress=False),
            host=host,
        )  # fmt: skip
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_the_prompt_placement_refuses_a_placed_condition():
    with pytest.raises(UsageError, match="placed by the stages of its plugin"):
        apply_defense("system", [{"role": "user", "content": "hi"}], PLACED)


def test_nothing_agentdojo_specific_enters_core():
    """The AgentDojo plugin runs through the contract alone: core names no part of it."""
    hits = [
        str(path.relative_to(REPO))
        for path in (REPO / "core" / "assay").rglob("*.py")
        if re.search("agentdojo", path.read_text(encoding="utf-8"), re.IGNORECASE)
    ]
    assert hits == []
