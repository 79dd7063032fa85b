"""What a plugin author imports: the public, stable API of assay's plugin contract.

A distribution that publishes a backend, a judge, a metric, an oracle, a
sandbox or a case pack imports from here and nowhere else in assay; every name
below keeps its meaning within a major version (additions only). The pages
under ``docs/plugins/`` show each kind of plugin as a complete distribution.

* Hooks: :data:`hookimpl` marks a plugin's ``register_*`` functions (see
  :mod:`assay.hookspecs` for each hook and what it registers); ``Register`` is
  the type of the callable a hook receives.
* Protocols a component satisfies: :class:`Backend` (making :class:`Endpoint`
  objects), :class:`Judge` (making :class:`JudgeInstance` objects),
  :class:`Metric`, :class:`Oracle`, :class:`Sandbox` (making
  :class:`SandboxInstance` objects), :class:`Executor`.
* A new kind of evaluation: :class:`Stage` (its coroutine runs over a
  :class:`StageContext`, one work item in flight; what a run gives it is
  declared on it: its :class:`RunOption` s, a ``preflight`` over a
  :class:`RunCheck`, a ``check_pack`` over a :class:`PackCheck` returning a
  :class:`PackCheckResult`), and the :class:`CaseKind` and :class:`Channel`
  registrations its families name; :class:`Tool`, a tool a sandbox offers
  its agent.
* Values they exchange: :class:`ChatRequest` and :class:`ChatResponse` (one
  model call), :class:`MetricContext` and :class:`MetricValue` (and a
  metric's :class:`MetricAccumulator`, its state while the rows stream past),
  :class:`OracleResult`, and the :class:`Family`, :class:`Defense`,
  :class:`Outcome` (a paired outcome for ``assay compare``), :class:`Analysis`
  (a paired analysis of ``assay compare``, over a :class:`Selector` pair and
  an :class:`AnalysisContext`) and :class:`Pack` registrations.
* A report's main tables: :class:`ReportSection` (a registration), built
  over a :class:`ReportPanel` into :class:`MainSection` and :class:`Table`; a
  metric's own section of the detail, :class:`MetricSection`.
* Re-deriving a stage's recorded verdicts (``Stage.rederiver``):
  :class:`RederiveSetup`, :class:`Rederived`, :func:`run_deterministic` and
  :class:`NotDeterministic`; replaying its recorded actions
  (``Stage.replayer``): :class:`ReplaySetup`, :class:`Replayed` (see
  :mod:`assay.rederive`).
* Statistics a metric reports with: :func:`rate` and :func:`wilson_interval`
  (the helpers the built-in metrics use), :func:`mcnemar_exact` and
  :func:`holm_adjust` (paired tests between conditions).
* A condition's document: :func:`policy_document` (a defense policy with its
  digest filled in, for :class:`Defense`); placing the run's condition in a
  stage's prompt: :func:`apply_condition` (a stage that does lists the
  placements in its ``applies``).
* A pack a plugin writes itself (generated from another benchmark's data, say):
  :func:`lock_manifest` fills in its manifest's file lists and digest, as
  ``assay pack lock`` does.
* A judge's identity: :func:`template_digest`, the ``prompt_sha256`` a judge
  class declares for its ``prompt_template`` (see :mod:`assay.judging`).
* Errors: :class:`BackendError` (a model call failed for good),
  :class:`UsageError` (bad options, one line for the user), :class:`PluginError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .components import (
    FIRST_ENDPOINT,
    OWN_ENDPOINT,
    Analysis,
    AnalysisContext,
    Backend,
    CaseKind,
    Channel,
    Defense,
    Endpoint,
    Executor,
    Family,
    Judge,
    JudgeInstance,
    Metric,
    MetricAccumulator,
    MetricContext,
    MetricValue,
    Oracle,
    OracleResult,
    Outcome,
    PackCheck,
    PackCheckResult,
    ReportSection,
    RowProblem,
    RunCheck,
    RunOption,
    Sandbox,
    SandboxInstance,
    Stage,
    Tool,
)
from .engine.messages import ChatRequest, ChatResponse
from .engine.stages.context import StageContext
from .errors import BackendError, PluginError, UsageError
from .hookspecs import Register, hookimpl
from .judging import template_digest
from .packs import Pack, lock_manifest
from .rederive import NotDeterministic, Rederived, RederiveSetup, Replayed, ReplaySetup, run_deterministic
from .stats import holm_adjust, mcnemar_exact, rate, wilson_interval

if TYPE_CHECKING:
    from .policies import apply_condition, policy_document
    from .reports.compare import Selector
    from .reports.model import MainSection, MetricSection, Table
    from .reports.panel import ReportPanel

#: Names imported when first used: the report types pull in the report machinery, which loading a plugin (every
#: command does) need not.
_LAZY = {
    "MainSection": "reports.model",
    "MetricSection": "reports.model",
    "Table": "reports.model",
    "ReportPanel": "reports.panel",
    "Selector": "reports.compare",
    "policy_document": "policies",
    "apply_condition": "policies",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Analysis",
    "AnalysisContext",
    "Backend",
    "BackendError",
    "CaseKind",
    "Channel",
    "ChatRequest",
    "ChatResponse",
    "Defense",
    "Endpoint",
    "Executor",
    "FIRST_ENDPOINT",
    "Family",
    "Judge",
    "JudgeInstance",
    "MainSection",
    "Metric",
    "MetricAccumulator",
    "MetricContext",
    "MetricSection",
    "MetricValue",
    "NotDeterministic",
    "OWN_ENDPOINT",
    "Oracle",
    "OracleResult",
    "Outcome",
    "Pack",
    "PackCheck",
    "PackCheckResult",
    "PluginError",
    "RederiveSetup",
    "Rederived",
    "Register",
    "ReplaySetup",
    "Replayed",
    "ReportPanel",
    "ReportSection",
    "RowProblem",
    "RunCheck",
    "RunOption",
    "Sandbox",
    "SandboxInstance",
    "Selector",
    "Stage",
    "StageContext",
    "Table",
    "Tool",
    "UsageError",
    "apply_condition",
    "holm_adjust",
    "hookimpl",
    "lock_manifest",
    "mcnemar_exact",
    "policy_document",
    "rate",
    "run_deterministic",
    "template_digest",
    "wilson_interval",
]
