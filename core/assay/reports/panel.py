"""The main tables of a report: the registered report sections, built over one panel of recomputed values.

A design registers its sections (``register_report_sections``); each builds
zero or more :class:`~assay.reports.model.MainSection` from a
:class:`ReportPanel`. The report shows them in the sections' order, before
the per-metric sections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..components import MetricValue
from ..errors import AssayError
from ..stats import rate, wilson_interval
from ._load import ReportData
from .model import FigurePoint, MainSection, Table, endpoint_label, percent_cell

__all__ = ["ReportPanel", "main_sections"]


def _order(planned: Iterable[Any], seen: Iterable[Any]) -> list[Any]:
    """The plan's order for what it names, then anything else seen, sorted."""
    present = set(seen)
    first = [item for item in dict.fromkeys(planned) if item in present]
    return first + sorted(present - set(first), key=str)


def _sum_rate(metric: str, condition: Any, values: Sequence[MetricValue]) -> MetricValue | None:
    """A pooled rate from the counts of per-endpoint values (the same rows the pooled metrics group)."""
    if not values:
        return None
    k, n = sum(v.numerator or 0 for v in values), sum(v.denominator or 0 for v in values)
    low, high = wilson_interval(k, n)
    return MetricValue(metric, {"condition": condition}, rate(k, n), k, n, low, high)


class ReportPanel:
    """What a report section builds its tables from: the bundle's recomputed metric values, indexed by metric and
    group, with the plan's endpoint and condition orders (public as ``assay.api.ReportPanel``).

    ``by_metric`` maps each metric name to its values; ``stages`` are the
    stages the bundle's rows carry; ``endpoints`` and ``conditions`` are in
    the plan's order; ``run`` is the bundle's run manifest, for the provenance
    a section states beside its tables (which agent executed, say). A section
    shows numbers the metrics give, never its own computation over rows, so
    its tables agree with the per-metric sections.
    """

    def __init__(
        self, data: ReportData, by_metric: Mapping[str, Sequence[MetricValue]], scripted: frozenset[str]
    ) -> None:
        self.by_metric = by_metric
        self.scripted = scripted
        self.stages = {stage for row in data.bundle.rows for stage in row.get("stages", {})}
        self.run: Mapping[str, Any] = data.bundle.run
        plan = data.bundle.run.get("plan", {})
        cells = [v.group for values in by_metric.values() for v in values]
        self.endpoints = _order(plan.get("endpoints", []), (g["endpoint"] for g in cells if "endpoint" in g))
        self.conditions = _order(plan.get("conditions", []), (g["condition"] for g in cells if "condition" in g))

    def cells(self, metric: str) -> dict[tuple[Any, Any], MetricValue]:
        """(endpoint, condition) -> value, for a metric grouped by endpoint x condition only."""
        return {
            (v.group["endpoint"], v.group["condition"]): v
            for v in self.by_metric.get(metric, ())
            if set(v.group) == {"endpoint", "condition"}
        }

    def by_condition(self, metric: str) -> dict[Any, MetricValue]:
        """condition -> value, for a metric grouped by condition alone."""
        return {v.group["condition"]: v for v in self.by_metric.get(metric, ()) if set(v.group) == {"condition"}}

    def label(self, endpoint: Any) -> str:
        """How an endpoint is shown (scripted ones are marked)."""
        return endpoint_label(endpoint, self.scripted)

    def pooled(self, metric: str, pooled_metric: str | None, condition: Any) -> MetricValue | None:
        """The pooled metric's value of a condition, or the sum of the per-endpoint counts without one."""
        if pooled_metric is not None and pooled_metric in self.by_metric:
            return self.by_condition(pooled_metric).get(condition)
        cells = self.cells(metric)
        return _sum_rate(metric, condition, [cells[e, condition] for e in self.endpoints if (e, condition) in cells])

    def matrix(self, metric: str, pooled_metric: str | None, caption: str) -> Table:
        """Endpoints down, conditions across, percent cells, and a pooled row per condition."""
        cells = self.cells(metric)
        rows = [
            (self.label(e), *(percent_cell(cells.get((e, c))) for c in self.conditions))
            for e in self.endpoints
            if any((e, c) in cells for c in self.conditions)
        ]
        pooled = [self.pooled(metric, pooled_metric, c) for c in self.conditions]
        rows.append((f"pooled ({len(rows)} endpoints)", *(percent_cell(v) for v in pooled)))
        return Table(("endpoint", *map(str, self.conditions)), tuple(rows), caption=caption, numeric_from=1)

    def points(self, metric: str) -> tuple[FigurePoint, ...]:
        """One point per endpoint and condition, conditions major, for the line and spread figures."""
        cells = self.cells(metric)
        points = []
        for condition in self.conditions:
            for endpoint in self.endpoints:
                value = cells.get((endpoint, condition))
                if value is not None:
                    label = f"{self.label(endpoint)} / {condition}"
                    points.append(
                        FigurePoint(
                            label,
                            self.label(endpoint),
                            value.value,
                            value.ci_low,
                            value.ci_high,
                            value.numerator,
                            value.denominator,
                            str(condition),
                            self.label(endpoint),
                        )
                    )
        return tuple(points)


def main_sections(
    data: ReportData, by_metric: Mapping[str, Sequence[MetricValue]], scripted: frozenset[str]
) -> tuple[MainSection, ...]:
    """Every registered section's tables for this bundle, in the sections' order (then by name)."""
    panel = ReportPanel(data, by_metric, scripted)
    built: list[MainSection] = []
    for section in sorted(data.sections.values(), key=lambda s: (s.order, s.name)):
        try:
            made = section.build(panel)
        except AssayError:
            raise
        except Exception as exc:  # a plugin's section failing on odd values is named, not a traceback
            raise AssayError(
                f"{data.bundle.label}: report section {section.name} cannot be built: {type(exc).__name__}: {exc}"
            ) from exc
        built.extend(_sections(made))
    return tuple(built)


def _sections(made: MainSection | Iterable[MainSection] | None) -> list[MainSection]:
    if made is None:
        return []
    if isinstance(made, MainSection):
        return [made]
    return list(made)
