"""Metrics summaries: computing them from rows, and comparing claims with them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .components import MetricAccumulator, MetricContext, MetricValue
from .errors import AssayError, PluginError, UsageError
from .metrics import summary_pass
from .plugins import Registry
from .schemas import CURRENT_SPEC_VERSION

__all__ = [
    "MetricFailure",
    "MetricMismatch",
    "SummaryPass",
    "compare_claims",
    "compute_metrics",
    "members_read",
    "summary_document",
]

_NUMBER_FIELDS = ("value", "numerator", "denominator", "ci_low", "ci_high")
_REL_TOL = 1e-9
_ABS_TOL = 1e-12


def compute_metrics(
    rows: Iterable[Mapping[str, Any]],
    context: MetricContext,
    registry: Registry,
    names: Iterable[str] | None = None,
) -> list[MetricValue]:
    """Compute the named metrics (default: every registered one) in name order, in one pass over ``rows``."""
    summary = SummaryPass(context, registry, names)
    for row in rows:
        summary.add(row)
    return summary.values()


class MetricFailure(PluginError):
    """A metric plugin raised on the rows of a summary; ``metric`` names it and ``__cause__`` is what it raised.

    One walk computes every metric, so without this a reader could not say
    which plugin failed on a bundle's odd rows. An :class:`AssayError` a
    plugin raises passes through unwrapped: it already says what to do.
    """

    def __init__(self, metric: str, error: BaseException) -> None:
        super().__init__(f"metric {metric} failed: {type(error).__name__}: {error}")
        self.metric = metric


class SummaryPass:
    """The metrics of one summary, computed as the rows go past once (see :class:`assay.api.MetricAccumulator`).

    A metric that accumulates keeps its counts; a metric that does not is
    given the rows at the end, held until then (only the members its ``reads``
    names, when it says): the one thing here whose memory grows with the rows.
    """

    def __init__(self, context: MetricContext, registry: Registry, names: Iterable[str] | None = None) -> None:
        wanted = registry.names("metrics") if names is None else sorted(set(names))
        if not context.family_kinds:  # what a metric over one kind of case needs (see MetricContext)
            kinds = {name: family.kind for name, family in registry.items("families").items()}
            context = replace(context, family_kinds=kinds)
        context = summary_pass(context)
        self._context = context
        self._metrics: list[tuple[Any, MetricAccumulator | None]] = []
        self._names: list[str] = []  # each metric's name, as _metrics; for MetricFailure
        holding: list[Any] = []
        for name in wanted:
            metric = registry.get("metrics", name)
            if metric is None:
                raise UsageError(f"unknown metric {name!r}")
            accumulate = getattr(metric, "accumulate", None)
            try:
                accumulator = accumulate(context) if callable(accumulate) else None
            except AssayError:
                raise
            except Exception as exc:
                raise MetricFailure(name, exc) from exc
            self._metrics.append((metric, accumulator))
            self._names.append(name)
            if accumulator is None:
                holding.append(metric)
        self._accumulators = [accumulator for _, accumulator in self._metrics if accumulator is not None]
        self._accumulator_names = [
            name for name, (_, a) in zip(self._names, self._metrics, strict=True) if a is not None
        ]
        # The held rows keep only what those metrics read, when each says (see members_read).
        reads = [getattr(metric, "reads", None) for metric in holding]
        self._members: list[str] | None = None
        if reads and all(isinstance(r, (set, frozenset)) for r in reads):
            self._members = sorted({member for read in reads if read for member in read})
        self._held: list[Mapping[str, Any]] | None = [] if holding else None

    def add(self, row: Mapping[str, Any]) -> None:
        """Pass one row to every metric; raises :class:`MetricFailure` when one fails on it."""
        accumulator = None
        try:
            for accumulator in self._accumulators:
                accumulator.add(row)
        except AssayError:
            raise
        except Exception as exc:
            name = self._accumulator_names[[id(a) for a in self._accumulators].index(id(accumulator))]
            raise MetricFailure(name, exc) from exc
        if self._held is not None:
            members = self._members
            self._held.append(row if members is None else {m: row[m] for m in members if m in row})

    def values(self) -> list[MetricValue]:
        """Every metric's values, in metric name order; raises :class:`MetricFailure` when one fails."""
        values: list[MetricValue] = []
        for name, (metric, accumulator) in zip(self._names, self._metrics, strict=True):
            try:
                values.extend(
                    accumulator.values() if accumulator is not None else metric.compute(self._held, self._context)
                )
            except AssayError:
                raise
            except Exception as exc:
                raise MetricFailure(name, exc) from exc
        return values


def members_read(registry: Registry, names: Iterable[str] | None = None) -> frozenset[str] | None:
    """The row members the named metrics (default: every registered one) read, by their ``reads`` attributes.

    None when one of them does not say (it may read the whole row). What a
    validation of a large bundle holds of each row while the metrics are
    computed.
    """
    wanted = registry.names("metrics") if names is None else sorted(set(names))
    members: set[str] = set()
    for name in wanted:
        reads = getattr(registry.get("metrics", name), "reads", None)
        if not isinstance(reads, (set, frozenset)) or not all(isinstance(member, str) for member in reads):
            return None
        members.update(reads)
    return frozenset(members)


def summary_document(values: Iterable[MetricValue]) -> dict[str, Any]:
    """A metrics-summary document, keeping only metrics that produced a value."""
    return {"spec_version": CURRENT_SPEC_VERSION, "metrics": [value.to_document() for value in values]}


def _group_id(metric: str, group: Mapping[str, Any]) -> tuple[str, str]:
    # Types matter: {"seed": 1} and {"seed": "1"} are different groups.
    return (metric, json.dumps(group, sort_keys=True))


def _same(claimed: Any, actual: Any) -> bool:
    if isinstance(claimed, bool) or isinstance(actual, bool):
        return claimed is actual
    if isinstance(claimed, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(claimed, actual, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
    if isinstance(claimed, Mapping) and isinstance(actual, Mapping):
        return claimed.keys() == actual.keys() and all(_same(claimed[k], actual[k]) for k in claimed)
    return bool(claimed == actual)


@dataclass(frozen=True)
class MetricMismatch:
    """One claimed number that the rows do not reproduce; ``index`` is its position in the claims."""

    index: int
    field: str
    message: str


def compare_claims(claims: Sequence[Mapping[str, Any]], recomputed: Sequence[MetricValue]) -> list[MetricMismatch]:
    """Every claimed entry whose numbers differ from the recomputed ones, or that cannot be recomputed."""
    actual = {_group_id(value.metric, value.group): value.to_document() for value in recomputed}
    seen: dict[tuple[str, str], int] = {}
    problems: list[MetricMismatch] = []
    for index, claim in enumerate(claims):
        ident = _group_id(claim["metric"], claim["group"])
        if ident in seen:
            problems.append(
                MetricMismatch(
                    index,
                    "group",
                    f"{claim['metric']} {claim['group']} is claimed twice (first at index {seen[ident]})",
                )
            )
            continue
        seen[ident] = index
        truth = actual.get(ident)
        if truth is None:
            problems.append(MetricMismatch(index, "group", f"{claim['metric']} has no rows for group {claim['group']}"))
            continue
        for name in (*_NUMBER_FIELDS, "detail"):
            if name not in claim and name not in truth:
                continue
            if not _same(claim.get(name), truth.get(name)):
                problems.append(
                    MetricMismatch(
                        index,
                        name,
                        f"{claim['metric']} {name} claimed {claim.get(name)!r}, recomputed {truth.get(name)!r}",
                    )
                )
    return problems
