"""The whole plugin contract of assay.

Every moving part of the engine is registered through one of the hooks
below. A plugin is a module (or object) with functions decorated with
:data:`hookimpl`; distributions expose it under the ``assay`` entry-point
group, and the built-ins in :mod:`assay.default_plugins` use exactly the same
hooks.

Each hook receives one argument, ``register``: a callable taking one
component. The host records which plugin registered each component, and a
second component of the same kind and name is an error that names both
plugins. Hooks grow only by new keyword arguments (pluggy lets an
implementation accept a subset), so no hook is ever renamed or loses an
argument.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

__all__ = ["hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("assay")
hookimpl = pluggy.HookimplMarker("assay")

Register = Callable[[object], None]


@hookspec
def register_packs(register: Register) -> None:
    """Register case packs.

    Called once when plugins are loaded. Call ``register(pack)`` with an
    :class:`assay.packs.Pack` for each pack the plugin publishes, usually
    ``Pack.from_directory(path)`` on a directory shipped as package data. The
    pack is read lazily, so registering is cheap.
    """


@hookspec
def register_case_kinds(register: Register) -> None:
    """Register kinds of case.

    Call ``register(kind)`` with an :class:`assay.components.CaseKind`. A
    family belongs to one registered kind; a stage says which kinds it runs on.
    """


@hookspec
def register_channels(register: Register) -> None:
    """Register injection channels.

    Call ``register(channel)`` with an :class:`assay.components.Channel`. A
    family's ``channels`` must all be registered.
    """


@hookspec
def register_stages(register: Register) -> None:
    """Register stages: kinds of evaluation the engine runs on a work item.

    Call ``register(stage)`` with an :class:`assay.components.Stage`: its
    name, the case kinds it runs on, the JSON Schema of its outcome, the
    coroutine that runs it over a :class:`assay.api.StageContext`, and the
    stages it needs. Families list the stages their cases support; when
    plugins are loaded, a family naming a stage, case kind or channel that no
    plugin registered is one error naming the plugin.
    """


@hookspec
def register_tools(register: Register) -> None:
    """Register the tools agents call in sandboxes.

    Call ``register(tool)`` with an :class:`assay.components.Tool`: its
    name, description, the JSON Schema of its arguments and the names of the
    sandboxes that implement it (each must be registered). The built-in local
    sandbox's tools are registered this way; a plugin that adds a tool to its
    sandbox registers it so that packs and the validator know of it.
    """


@hookspec
def register_families(register: Register) -> None:
    """Register attack families and task kinds.

    Call ``register(family)`` with an :class:`assay.components.Family`. A
    case names its family in ``family``; the validator rejects a case whose
    family is not registered. Families carry channel and label defaults.
    """


@hookspec
def register_backends(register: Register) -> None:
    """Register model backends (OpenAI-compatible, local, scripted, ...).

    Call ``register(backend)`` with an object satisfying
    :class:`assay.components.Backend`.
    """


@hookspec
def register_judges(register: Register) -> None:
    """Register judges that label stage outcomes (rule-based or model-based).

    Call ``register(judge)`` with an object satisfying
    :class:`assay.components.Judge`. Run manifests name judges; the
    validator checks that each named judge is registered.
    """


@hookspec
def register_oracles(register: Register) -> None:
    """Register deterministic oracles, checkers and verifiers.

    Call ``register(oracle)`` with an :class:`assay.components.Oracle`.
    Cases name oracles (``oracles[].plugin``, ``checker.plugin``,
    ``verifiers.*.plugin``); the validator checks that each exists and that
    the parameters the case gives satisfy the oracle's ``params_schema``.
    """


@hookspec
def register_metrics(register: Register) -> None:
    """Register metrics computed from result rows.

    Call ``register(metric)`` with an :class:`assay.components.Metric`.
    Reports and the validator compute every metric of a bundle's claimed
    summary by calling the plugin of that name on the rows.
    """


@hookspec
def register_sandboxes(register: Register) -> None:
    """Register sandboxes: the stores and code runners a work item acts on.

    Call ``register(sandbox)`` with an object satisfying
    :class:`assay.components.Sandbox`.
    """


@hookspec
def register_defenses(register: Register) -> None:
    """Register defense policies (prompt-level conditions such as D0).

    Call ``register(defense)`` with an :class:`assay.components.Defense`,
    whose ``document`` satisfies the defense policy schema.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors that run work items (local asyncio, Ray, ...).

    Call ``register(executor)`` with an object satisfying
    :class:`assay.components.Executor`.
    """


@hookspec
def register_outcomes(register: Register) -> None:
    """Register outcomes of result rows that ``assay compare`` pairs rows on.

    Call ``register(outcome)`` with an :class:`assay.components.Outcome`:
    a ``name`` (what ``assay compare --metric NAME`` selects), a ``description``,
    ``of(row)``, which gives True or False (a number for ``scale="score"``),
    or None where the outcome does not apply to the row. A new stage's plugin
    registers the outcomes its rows carry.
    """


@hookspec
def register_analyses(register: Register) -> None:
    """Register paired analyses that ``assay compare`` adds to its per-outcome tests.

    Call ``register(analysis)`` with an :class:`assay.components.Analysis`: a
    ``name``, a ``description``, ``applies(rows)``, ``run(rows, a, bs,
    context)``, ``document(results)`` and ``markdown(results, context)``.
    A design whose comparisons need more than one outcome at a time (decision
    gates over several measures, say) registers them this way.
    """


@hookspec
def register_report_sections(register: Register) -> None:
    """Register main tables of ``assay report``.

    Call ``register(section)`` with an :class:`assay.components.ReportSection`:
    a name, a description, ``build(panel)`` over an :class:`assay.api.ReportPanel`
    (the recomputed metric values by metric and group) returning the section's
    tables, and an ``order``. A design that adds a stage registers the tables
    its metrics make.
    """


@hookspec
def register_commands(register: Register) -> None:
    """Register CLI commands.

    Call ``register(command)`` with a :class:`click.Command`; it becomes
    ``assay <command.name>``. Built-in commands are registered this way too.
    """
