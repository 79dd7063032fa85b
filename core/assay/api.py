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
  :class:`StageContext`, one work item in flight), and the :class:`CaseKind`
  and :class:`Channel` registrations its families name; :class:`Tool`, a
  tool a sandbox offers its agent.
* Values they exchange: :class:`ChatRequest` and :class:`ChatResponse` (one
  model call), :class:`MetricContext` and :class:`MetricValue`,
  :class:`OracleResult`, and the :class:`Family`, :class:`Defense`,
  :class:`Outcome` (a paired outcome for ``assay compare``) and :class:`Pack`
  registrations.
* Statistics a metric reports with: :func:`rate` and :func:`wilson_interval`
  (the helpers the built-in metrics use).
* Errors: :class:`BackendError` (a model call failed for good),
  :class:`UsageError` (bad options, one line for the user), :class:`PluginError`.
"""

from __future__ import annotations

from .components import (
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
    MetricContext,
    MetricValue,
    Oracle,
    OracleResult,
    Outcome,
    Sandbox,
    SandboxInstance,
    Stage,
    Tool,
)
from .engine.messages import ChatRequest, ChatResponse
from .engine.stages.context import StageContext
from .errors import BackendError, PluginError, UsageError
from .hookspecs import Register, hookimpl
from .packs import Pack
from .stats import rate, wilson_interval

__all__ = [
    "Backend",
    "BackendError",
    "CaseKind",
    "Channel",
    "ChatRequest",
    "ChatResponse",
    "Defense",
    "Endpoint",
    "Executor",
    "Family",
    "Judge",
    "JudgeInstance",
    "Metric",
    "MetricContext",
    "MetricValue",
    "Oracle",
    "OracleResult",
    "Outcome",
    "Pack",
    "PluginError",
    "Register",
    "Sandbox",
    "SandboxInstance",
    "Stage",
    "StageContext",
    "Tool",
    "UsageError",
    "hookimpl",
    "rate",
    "wilson_interval",
]
