"""AgentDojo on assay, through the public plugin hooks alone.

Registers, from the installed ``agentdojo``: a pack per suite
(``agentdojo-workspace``, ``-travel``, ``-banking``, ``-slack``), the case
kinds and families of its cases, the injection-vector channel, the suites'
tools and the in-memory ``agentdojo`` sandbox that runs them, the
``x-agentdojo.task`` stage (AgentDojo's agent loop against any endpoint), the
``agentdojo.utility`` and ``agentdojo.security`` oracles (AgentDojo's own
checks), the attacks and model-free defenses as conditions, and the metrics,
outcomes and report section of AgentDojo's headline numbers.

Loading the plugin never imports ``agentdojo`` once the packs are generated
(the first load after installing does, once).
"""

from __future__ import annotations

import functools

from assay.api import CaseKind, Channel, Family, Pack, Register, RunOption, Stage, Tool, hookimpl

from .conditions import DEFAULT_CONDITION, defenses
from .environment import AgentDojoSandbox
from .metrics import METRICS, OUTCOMES, SECTIONS
from .oracles import ORACLES
from .packs import CHANNEL, INJECTION_KIND, USER_KIND, family_name, generated_root, suite_tools
from .rederive import TaskRederiver
from .stage import NAME, OUTCOME_SCHEMA, preflight, prompt_entries, run_task, scripted_answer
from .suites import SUITES

__all__ = ["SANDBOX"]

SANDBOX = AgentDojoSandbox()

MODEL_NAME = RunOption(
    "agentdojo_model_name",
    "The model's name in AgentDojo's attack texts ({model}); default: AgentDojo's name for the endpoint's model, "
    "else 'the AI language model'.",
)


@functools.cache
def _packs() -> tuple[Pack, ...]:
    """The packs, made once per process: a pack reads its manifest (600 case entries for workspace) once, however
    often plugins are loaded."""
    root = generated_root()
    return tuple(Pack.from_directory(root / suite_name) for suite_name in SUITES)


@hookimpl
def register_packs(register: Register) -> None:
    """Register one pack per AgentDojo suite (generated from the installed agentdojo on first use)."""
    for pack in _packs():
        register(pack)


@hookimpl
def register_case_kinds(register: Register) -> None:
    """Register the two kinds of AgentDojo case."""
    register(CaseKind(USER_KIND, "An AgentDojo user task alone: its utility without an attack."))
    register(CaseKind(INJECTION_KIND, "An AgentDojo user task with an injection task's goal in its environment."))


@hookimpl
def register_channels(register: Register) -> None:
    """Register AgentDojo's injection vectors as a channel."""
    register(Channel(CHANNEL, "A placeholder in an AgentDojo environment's data, filled by the condition's attack."))


@hookimpl
def register_stages(register: Register) -> None:
    """Register the x-agentdojo.task stage."""
    register(
        Stage(
            NAME,
            "AgentDojo's agent loop on the suite's tools and environment; AgentDojo's checks decide utility and "
            "the attack's success.",
            kinds=(USER_KIND, INJECTION_KIND),
            outcome_schema=OUTCOME_SCHEMA,
            run=run_task,
            rederiver=TaskRederiver,
            options=(MODEL_NAME,),
            prompts=prompt_entries,
            preflight=preflight,
            scripted=scripted_answer,
        )
    )


@hookimpl
def register_families(register: Register) -> None:
    """Register each suite's two families (its user tasks alone, its user x injection task pairs)."""
    for suite_name in SUITES:
        register(
            Family(
                family_name(suite_name, USER_KIND), USER_KIND, f"AgentDojo {suite_name}: user tasks",
                f"The {suite_name} suite's user tasks with no injection.", stages=(NAME,),
                conditions=(DEFAULT_CONDITION,),
            )
        )  # fmt: skip
        register(
            Family(
                family_name(suite_name, INJECTION_KIND), INJECTION_KIND, f"AgentDojo {suite_name}: injection tasks",
                f"The {suite_name} suite's user tasks, each under each injection task.", channels=(CHANNEL,),
                stages=(NAME,), conditions=(DEFAULT_CONDITION,), scripted_rate=0.5,
            )
        )  # fmt: skip


@hookimpl
def register_sandboxes(register: Register) -> None:
    """Register the in-memory AgentDojo environments."""
    register(SANDBOX)


@hookimpl
def register_tools(register: Register) -> None:
    """Register every suite's tools (a tool two suites share once), implemented by the agentdojo sandbox."""
    for tool in _tools():
        register(tool)


@functools.cache
def _tools() -> tuple[Tool, ...]:
    seen: dict[str, Tool] = {}
    for schemas in suite_tools(generated_root()).values():
        for schema in schemas:
            function = schema["function"]
            if function["name"] not in seen:
                seen[function["name"]] = Tool(
                    function["name"], function["description"], function["parameters"], (SANDBOX.name,)
                )
    return tuple(seen.values())


@hookimpl
def register_oracles(register: Register) -> None:
    """Register AgentDojo's utility and security checks."""
    for oracle in ORACLES:
        register(oracle)


@hookimpl
def register_defenses(register: Register) -> None:
    """Register AgentDojo's attacks, alone and with each model-free defense, as conditions."""
    for defense in defenses():
        register(defense)


@hookimpl
def register_metrics(register: Register) -> None:
    """Register AgentDojo's headline rates, the staged endpoints and the paired tests."""
    for metric in METRICS:
        register(metric)


@hookimpl
def register_outcomes(register: Register) -> None:
    """Register the outcomes assay compare pairs rows on."""
    for outcome in OUTCOMES:
        register(outcome)


@hookimpl
def register_report_sections(register: Register) -> None:
    """Register the AgentDojo report section."""
    for section in SECTIONS:
        register(section)


@hookimpl
def register_commands(register: Register) -> None:
    """Register ``assay agentdojo-agreement``."""
    from .agreement import agreement_command

    register(agreement_command)
