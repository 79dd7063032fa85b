"""The component types plugins register, one per hook.

Concrete, data-like components (families, defenses, metric values) are frozen
dataclasses. Behavioural extension points are :class:`typing.Protocol`
classes: a plugin satisfies them by shape and never inherits from assay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Backend",
    "Defense",
    "Executor",
    "Family",
    "Judge",
    "Metric",
    "MetricContext",
    "MetricValue",
    "Oracle",
    "OracleResult",
    "Sandbox",
]


@dataclass(frozen=True)
class Family:
    """An attack family or task kind that cases name in ``family``.

    ``kind`` is the case kind the family belongs to (``attack``, ``benign``,
    ``trajectory`` or ``permission``). ``channels`` are the injected channels
    the family's attacks arrive through (the first is the default);
    ``default_labels`` fill a case's multi-label metadata where it is silent.
    """

    name: str
    kind: str
    title: str
    description: str
    channels: tuple[str, ...] = ()
    default_labels: Mapping[str, Any] = field(default_factory=dict)
    stages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Defense:
    """A prompt-level defense condition; ``document`` is a defense policy document."""

    name: str
    document: Mapping[str, Any]

    @property
    def placement(self) -> str:
        """Where the policy text goes: none, system_prefix, system_suffix or sandwich."""
        return str(self.document["placement"])


@dataclass(frozen=True)
class OracleResult:
    """What an oracle decided for one work item."""

    fired: bool
    detail: str = ""


@runtime_checkable
class Oracle(Protocol):
    """A deterministic scorer named by cases.

    ``decides`` lists the outcomes the oracle may decide (e.g.
    ``observed_harm``, ``text_harm``, ``success``); ``params_schema`` is a
    JSON Schema the validator applies to the parameters a case gives it.
    """

    name: str
    description: str
    decides: frozenset[str]
    params_schema: Mapping[str, Any]

    def evaluate(self, observation: Mapping[str, Any], params: Mapping[str, Any]) -> OracleResult:
        """Decide one work item from its observation (final output, transcript, state diff, case)."""
        ...


@dataclass(frozen=True)
class MetricValue:
    """One number of a metrics summary: a metric over one group of rows."""

    metric: str
    group: Mapping[str, Any]
    value: float | None
    numerator: int | None = None
    denominator: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    detail: Mapping[str, Any] | None = None

    def to_document(self) -> dict[str, Any]:
        """The metrics-summary entry for this value, omitting absent fields."""
        doc: dict[str, Any] = {"metric": self.metric, "group": dict(self.group), "value": self.value}
        for name in ("numerator", "denominator", "ci_low", "ci_high", "detail"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = dict(value) if name == "detail" else value
        return doc


@dataclass(frozen=True)
class MetricContext:
    """What a metric may use besides the rows: the run's plan and the pack's cases.

    ``memo`` lets metrics share work (such as grouping the rows) within one
    computation of a summary; a context is made per summary, so nothing leaks
    between runs.
    """

    plan: Mapping[str, Any]
    cases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    _memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The value cached under ``key``, computing it on first use."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


@runtime_checkable
class Metric(Protocol):
    """A metric computed from result rows, per group (endpoint x condition by default)."""

    name: str
    description: str
    stage: str

    def compute(self, rows: Sequence[Mapping[str, Any]], context: MetricContext) -> list[MetricValue]:
        """Compute every value of this metric over the rows."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A model backend: makes endpoints from ``--endpoint NAME:key=value,...`` options.

    An endpoint has ``id``, ``scripted``, ``describe() -> dict`` (its run
    manifest entry: model metadata and generation settings), ``async
    complete(ChatRequest) -> ChatResponse`` (raising ``BackendError`` once its
    retry budget is spent) and ``async aclose()``.
    """

    name: str
    description: str

    def endpoint(self, endpoint_id: str, options: Mapping[str, str]) -> Any:
        """Make one endpoint."""
        ...


@runtime_checkable
class Judge(Protocol):
    """A judge that labels stage outcomes from a transcript.

    ``instance(options, make_endpoint)`` returns an object with ``describe(stage)``,
    ``producer()``, ``async semantic(case, final_output, prompt_texts)`` and
    ``async audit_fallback(case, final_output) -> (outcome, attempts)``;
    ``make_endpoint(backend, options)`` builds (cached) endpoints for judges
    that call a model.
    """

    name: str
    description: str

    def instance(self, options: Mapping[str, str], make_endpoint: Callable[[str, Mapping[str, str]], Any]) -> Any:
        """Configure the judge for one run."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Isolated stores and a code runner that exec-stage tool calls act on.

    ``create(case, *, pack_root, options)`` lays down a fresh sandbox for one
    work item, with ``tools()`` (OpenAI tool schemas), ``async call(name,
    arguments) -> str``, ``snapshot()``, ``diff(before, after) -> state diff
    entries`` and ``close()``. An optional ``check()`` refuses clearly when the
    machine cannot provide the isolation it promises.
    """

    name: str
    description: str

    def create(self, case: Mapping[str, Any], *, pack_root: Any, options: Mapping[str, str] | None = None) -> Any:
        """A fresh sandbox for one work item."""
        ...


@runtime_checkable
class Executor(Protocol):
    """Runs planned work items (local asyncio, Ray, ...).

    ``run(job, items, sink, *, concurrency, options)`` executes each item with
    a runtime rebuilt from the (picklable) job and calls ``sink(item, row)``
    as each row is finished.
    """

    name: str
    description: str

    def run(
        self,
        job: Any,
        items: Any,
        sink: Callable[[Any, dict], None],
        *,
        concurrency: int = 16,
        options: Mapping[str, str] | None = None,
    ) -> None:
        """Execute the items."""
        ...
