"""Metrics summaries: computing them from rows, and comparing claims with them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .components import MetricContext, MetricValue
from .errors import UsageError
from .plugins import Registry
from .schemas import CURRENT_SPEC_VERSION

__all__ = ["MetricMismatch", "compare_claims", "compute_metrics", "members_read", "summary_document"]

_NUMBER_FIELDS = ("value", "numerator", "denominator", "ci_low", "ci_high")
_REL_TOL = 1e-9
_ABS_TOL = 1e-12


def compute_metrics(
    rows: Sequence[Mapping[str, Any]],
    context: MetricContext,
    registry: Registry,
    names: Iterable[str] | None = None,
) -> list[MetricValue]:
    """Compute the named metrics (default: every registered one) in name order."""
    wanted = registry.names("metrics") if names is None else sorted(set(names))
    if not context.family_kinds:  # what a metric over one kind of case needs (see MetricContext)
        kinds = {name: family.kind for name, family in registry.items("families").items()}
        context = replace(context, family_kinds=kinds)
    values: list[MetricValue] = []
    for name in wanted:
        metric = registry.get("metrics", name)
        if metric is None:
            raise UsageError(f"unknown metric {name!r}")
        values.extend(metric.compute(rows, context))
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
