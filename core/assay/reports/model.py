"""The format-neutral content of a report: facts, tables and figure data, built once.

The Markdown and HTML renderers draw the same :class:`ReportModel`, so the
two formats can never disagree about a number. Cells are plain text here;
each renderer escapes them for its own format, because everything taken from
a bundle is untrusted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..components import MetricValue
from ..health import endpoint_health, health_warnings
from ..judging import judge_text
from ..schemas import STAGES
from ._load import ReportData

__all__ = [
    "FigurePoint",
    "MainSection",
    "MetricSection",
    "ReportModel",
    "StageSection",
    "Table",
    "build_model",
    "endpoint_label",
    "format_ci",
    "format_number",
    "format_rate",
    "group_cells",
    "metric_table",
    "percent_cell",
    "plural",
    "rate_points",
]

#: The order stages run in; any other stage (a third-party metric's) follows, sorted.
STAGE_ORDER = STAGES
#: Up to this many detail members that every group shares get a column each; more become one "counts" column.
_MAX_DETAIL_COLUMNS = 4


def format_number(value: Any) -> str:
    """A number as reports print it: three decimals for floats, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def percent_cell(value: MetricValue | None) -> str:
    """``28.0 [24.5, 31.8] (168/600)``: percent, 95% Wilson interval, k/n."""
    if value is None:
        return ""
    if value.value is None:
        return f"n/a (0/{value.denominator})"
    text = f"{100 * value.value:.1f}"
    if value.ci_low is not None and value.ci_high is not None:
        text += f" [{100 * value.ci_low:.1f}, {100 * value.ci_high:.1f}]"
    return text + f" ({value.numerator}/{value.denominator})"


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, with an ``s`` unless the count is one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def format_ci(low: float | None, high: float | None) -> str:
    """A rate's confidence interval as ``[low, high]`` in percent (the reports' one format for rates), or empty."""
    if low is None or high is None:
        return ""
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def format_rate(value: float | None) -> str:
    """A rate as reports print it: percent with one decimal (``16.7``), ``n/a`` for None."""
    return "n/a" if value is None else f"{100 * value:.1f}"


@dataclass(frozen=True)
class Table:
    """Plain-text cells under a header; columns from ``numeric_from`` on hold numbers."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    numeric_from: int | None = None


@dataclass(frozen=True)
class FigurePoint:
    """One estimate to draw: a label, the series it belongs to, the rate and its interval."""

    label: str
    series: str
    value: float | None
    low: float | None
    high: float | None
    numerator: int | None
    denominator: int | None
    category: str = ""
    #: The endpoint the point belongs to (as the report labels it): its colour is the endpoint's in every chart.
    endpoint: str = ""


@dataclass(frozen=True)
class MetricSection:
    """One metric: its description, tables, notes and (for rates) the points to draw.

    ``figure`` is ``rate`` (dot and whisker per group), ``family`` (bars per
    family) or empty.
    """

    metric: str
    description: str
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    figure: str = ""
    points: tuple[FigurePoint, ...] = ()


@dataclass(frozen=True)
class MainSection:
    """One of the design's main tables, built from several metrics: tables, notes and an optional figure.

    ``key`` is a stable identifier (an HTML anchor); ``figure`` is
    ``lines`` (a line per endpoint across conditions), ``spread`` (a bar
    per condition with each endpoint's value as a dot) or empty.
    """

    key: str
    title: str
    description: str
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    figure: str = ""
    points: tuple[FigurePoint, ...] = ()


@dataclass(frozen=True)
class StageSection:
    """The metrics of one stage, in name order."""

    stage: str
    metrics: tuple[MetricSection, ...]


@dataclass(frozen=True)
class ReportModel:
    """Everything a report shows, as plain text and numbers."""

    title: str
    facts: Table
    endpoints: Table
    conditions: Table
    warnings: tuple[str, ...]
    differences: tuple[str, ...]
    stages: tuple[StageSection, ...]
    scripted: frozenset[str] = field(default_factory=frozenset)
    main: tuple[MainSection, ...] = ()
    #: The summary screen: the headline rates (harm, then utility beside it) per endpoint and condition.
    summary: Table | None = None
    #: The same as one line per endpoint and condition (what ``make demo`` prints last).
    headline: tuple[str, ...] = ()
    #: One colour per endpoint (as the report labels it), the same in every chart.
    colours: Mapping[str, str] = field(default_factory=dict)
    #: The case browser's entries (see :mod:`assay.reports.cases`): made as they are walked, so walk them once.
    cases: Sequence[Mapping[str, Any]] = ()


def _join(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def _scripted(data: ReportData) -> frozenset[str]:
    endpoints = {e["id"] for e in data.bundle.run.get("endpoints", []) if e.get("scripted")}
    endpoints |= {row["key"]["endpoint"] for row in data.bundle.rows if row.get("scripted")}
    return frozenset(endpoints)


def _facts(data: ReportData, scripted: frozenset[str]) -> Table:
    bundle, run = data.bundle, data.bundle.run
    plan = run.get("plan", {})
    pack = bundle.pack
    # One walk, counting: a large bundle's rows are never held (see assay.reports.rowfile).
    rows = failed = errors = scripted_rows = 0
    by_stage: Counter[str] = Counter()
    for row in bundle.rows:
        rows += 1
        scripted_rows += bool(row.get("scripted"))
        if row.get("errors"):
            failed += 1
            errors += len(row["errors"])
            by_stage.update(str(error.get("stage", "unstaged")) for error in row["errors"])
    error_text = f"{failed} rows with errors, {errors} errors in all"
    if by_stage:
        error_text += " (" + ", ".join(f"{stage}: {count}" for stage, count in sorted(by_stage.items())) + ")"
    endpoints = [f"{e} (scripted)" if e in scripted else e for e in plan.get("endpoints", [])]
    claimed = len(bundle.claims)
    claims = (
        f"all {claimed} claimed numbers reproduce from the rows"
        if data.reproduced
        else f"{plural(len(data.differences), 'difference')} between metrics.json and the rows (see Claims)"
    )
    engine = run.get("engine", {})
    pairs = [
        ("Pack", f"{pack.get('name')} {pack.get('version')} ({pack.get('digest')})"),
        ("Run", str(run.get("run_id"))),
        ("Engine", f"{engine.get('name')} {engine.get('version')}"),
        ("Spec version", str(run.get("spec_version"))),
        ("Endpoints", _join(endpoints)),
        ("Conditions", _join(plan.get("conditions", []))),
        ("Seeds", _join(plan.get("seeds", []))),
        ("Generation seeds", _join(run.get("seeds", []))),
        ("Epochs", str(plan.get("epochs"))),
        ("Protocols", _join(plan.get("protocols", []))),
        ("Stages", _join(plan.get("stages", []))),
        ("Judges", "; ".join(judge_text(j) for j in run.get("judges", []) if isinstance(j, dict)) or "none"),
        ("Cases", str(len(plan.get("cases", [])))),
        ("Rows", str(rows)),
        ("Scripted rows", f"{scripted_rows} of {rows}"),
        ("Errors", error_text),
        ("Case families", data.families),
        ("Claims", claims),
    ]
    return Table(("Field", "Value"), tuple(pairs))


def _endpoints(data: ReportData, scripted: frozenset[str]) -> Table:
    rows = []
    for endpoint in data.bundle.run.get("endpoints", []):
        model = endpoint.get("model", {})
        flag = "SCRIPTED (replays fixed outputs; measures no model)" if endpoint["id"] in scripted else "no"
        rows.append(
            (
                endpoint["id"],
                str(endpoint.get("backend", "")),
                str(model.get("name", "")),
                str(model.get("revision") or ""),
                flag,
            )
        )
    return Table(("endpoint", "backend", "model", "revision", "scripted"), tuple(rows))


def _conditions(data: ReportData) -> Table:
    rows = [
        (c["id"], str(c.get("kind", "")), str(c.get("category", "")), str(c.get("digest", "")))
        for c in data.bundle.run.get("conditions", [])
    ]
    return Table(("condition", "kind", "category", "digest"), tuple(rows))


def endpoint_label(endpoint: Any, scripted: frozenset[str]) -> str:
    """An endpoint as a report names it: scripted ones marked so."""
    return f"{endpoint} (scripted)" if endpoint in scripted else str(endpoint)


def _extra_keys(values: Sequence[MetricValue]) -> list[str]:
    return sorted({key for value in values for key in value.group} - {"endpoint", "condition"})


def _pooled(values: Sequence[MetricValue]) -> bool:
    # Pooled metrics group by condition alone: every endpoint's rows are in one group.
    return bool(values) and not any("endpoint" in value.group for value in values)


def group_cells(value: MetricValue, extra: Sequence[str], scripted: frozenset[str]) -> list[str]:
    """The leading cells of a value's table row: its endpoint (if grouped by one), condition and ``extra`` keys."""
    group = value.group
    endpoint = [] if "endpoint" not in group else [endpoint_label(group.get("endpoint"), scripted)]
    return [*endpoint, str(group.get("condition")), *(str(group.get(k, "")) for k in extra)]


def _detail_columns(values: Sequence[MetricValue]) -> tuple[list[str], bool]:
    """Detail members shown as columns, and whether the rest go in one ``counts`` column."""
    details = [value.detail for value in values]
    if not any(details):
        return [], False
    keys = [tuple(detail) if detail else () for detail in details]
    if all(k == keys[0] for k in keys) and 0 < len(keys[0]) <= _MAX_DETAIL_COLUMNS:
        return list(keys[0]), False
    return [], True


def metric_table(values: Sequence[MetricValue], scripted: frozenset[str], *, details: bool = True) -> Table:
    """A metric's values as one table: group, value, k and n, the interval of a rate, and (``details``) its detail."""
    extra = _extra_keys(values)
    is_rate = any(value.ci_low is not None for value in values)
    has_k = any(value.numerator is not None for value in values)
    detail_keys, counts = _detail_columns(values) if details else ([], False)
    pooled = _pooled(values)
    columns = [
        *([] if pooled else ["endpoint"]),
        "condition",
        *extra,
        "rate (%)" if is_rate else "value",
        *(["k"] if has_k else []),
        "n",
        *(["95% Wilson CI (%)"] if is_rate else []),
    ]
    columns += [key.replace("_", " ") for key in detail_keys] + (["counts"] if counts else [])
    rows = []
    for value in values:
        shown = format_rate(value.value) if is_rate else format_number(value.value)
        cells = [*group_cells(value, extra, scripted), shown]
        if has_k:
            cells.append(format_number(value.numerator))
        cells.append(format_number(value.denominator))
        if is_rate:
            cells.append(format_ci(value.ci_low, value.ci_high))
        detail = value.detail or {}
        cells += [format_number(detail.get(key)) for key in detail_keys]
        if counts:
            cells.append(", ".join(f"{k}: {format_number(v)}" for k, v in detail.items()) or "none")
        rows.append(tuple(cells))
    return Table(tuple(columns), tuple(rows), numeric_from=(1 if pooled else 2) + len(extra))


def rate_points(values: Sequence[MetricValue], scripted: frozenset[str], by: str | None) -> tuple[FigurePoint, ...]:
    """A metric's values as points to draw (``by``: the group key that makes the figure's categories)."""
    extra = [k for k in _extra_keys(values) if k != by]
    points = []
    for value in values:
        group = value.group
        endpoint = [endpoint_label(group.get("endpoint"), scripted)] if "endpoint" in group else ["pooled"]
        parts = [*endpoint, str(group.get("condition")), *(f"{k}={group.get(k)}" for k in extra)]
        points.append(
            FigurePoint(
                label=" / ".join(parts),
                series=f"{endpoint[0]} / {group.get('condition')}",
                value=value.value,
                low=value.ci_low,
                high=value.ci_high,
                numerator=value.numerator,
                denominator=value.denominator,
                category=str(group.get(by, "")) if by else "",
                endpoint=endpoint[0],
            )
        )
    return tuple(points)


def _section(name: str, metric: Any, values: Sequence[MetricValue], scripted: frozenset[str]) -> MetricSection:
    description = str(getattr(metric, "description", ""))
    is_rate = any(value.ci_low is not None for value in values)
    custom = getattr(metric, "report_section", None)
    if custom is not None:  # a metric whose numbers read best in tables of its own (see the Metric protocol)
        section: MetricSection = custom(values, scripted)
        return section
    table = metric_table(values, scripted)
    if is_rate and "family" in _extra_keys(values):
        return MetricSection(name, description, (table,), (), "family", rate_points(values, scripted, "family"))
    if is_rate:
        return MetricSection(name, description, (table,), (), "rate", rate_points(values, scripted, None))
    return MetricSection(name, description, (table,))


def _stage_key(stage: str) -> tuple[int, str]:
    return (STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER), stage)


def _headline(
    data: ReportData, by_metric: Mapping[str, Sequence[MetricValue]], scripted: frozenset[str]
) -> tuple[Table | None, tuple[str, ...]]:
    """The summary table and lines: every headline rate (a metric's ``headline``: harm first, utility beside it)
    per endpoint and condition, in plan order."""
    roles = {name: str(getattr(metric, "headline", "") or "") for name, metric in data.metrics.items()}
    # In the order the stages run (CoreFail before the audit before exec: a metric is named after its stage).
    ordered = sorted(roles, key=lambda n: (_stage_key(n.split(".", 1)[0]), n))
    names = [n for n in ordered if roles[n] == "harm" and by_metric.get(n)]
    names += [n for n in ordered if roles[n] == "utility" and by_metric.get(n)]
    cells: dict[tuple[str, str], dict[str, MetricValue]] = {}
    for name in names:
        for value in by_metric[name]:
            if set(value.group) == {"endpoint", "condition"}:
                cells.setdefault((str(value.group["endpoint"]), str(value.group["condition"])), {})[name] = value
    if not cells:
        return None, ()
    plan = data.bundle.run.get("plan", {})
    endpoints = [str(e) for e in plan.get("endpoints", [])]
    conditions = [str(c) for c in plan.get("conditions", [])]
    order = sorted(
        cells,
        key=lambda k: (
            endpoints.index(k[0]) if k[0] in endpoints else len(endpoints),
            conditions.index(k[1]) if k[1] in conditions else len(conditions),
            k,
        ),
    )
    shown = [name for name in names if any(name in cells[key] for key in order)]
    rows, lines = [], []
    for endpoint, condition in order:
        values = cells[endpoint, condition]
        label = endpoint_label(endpoint, scripted)
        rows.append((label, condition, *(percent_cell(values.get(name)) or "-" for name in shown)))
        parts = [f"{name} {percent_cell(values[name])}" for name in shown if name in values]
        lines.append(f"{label} / {condition}: {'; '.join(parts)}")
    table = Table(
        ("endpoint", "condition", *shown),
        tuple(rows),
        caption="Headline rates: percent [95% Wilson interval] (k/n); harm first, utility beside it",
        numeric_from=2,
    )
    return table, tuple(lines)


def build_model(data: ReportData, title: str | None = None) -> ReportModel:
    """The report of a recomputed bundle: header facts, then one section per stage and metric."""
    scripted = _scripted(data)
    by_metric: dict[str, list[MetricValue]] = {}
    for value in data.values:
        by_metric.setdefault(value.metric, []).append(value)
    by_stage: dict[str, list[MetricSection]] = {}
    for name in sorted(by_metric):
        metric = data.metrics.get(name)
        stage = str(getattr(metric, "stage", "other"))
        by_stage.setdefault(stage, []).append(_section(name, metric, by_metric[name], scripted))
    stages = tuple(StageSection(stage, tuple(by_stage[stage])) for stage in sorted(by_stage, key=_stage_key))
    # Imported here: the main tables build on this module's types, so a top-level import would be circular.
    from .panel import main_sections

    main = main_sections(data, by_metric, scripted)
    pack = data.bundle.pack
    warnings = []
    if scripted:
        warnings.append(
            f"Scripted endpoints ({', '.join(sorted(scripted))}) replay fixed or synthetic outputs: "
            "their numbers measure no model."
        )
    if not data.reproduced:
        warnings.append(
            f"metrics.json does not reproduce: {plural(len(data.differences), 'difference')} "
            "from the numbers recomputed here (listed under Claims)."
        )
    # Error rows and degenerate answers: a bundle can be valid and still have measured nothing.
    warnings += [
        f"{warning[0].upper()}{warning[1:]}."
        for warning in health_warnings(endpoint_health(data.bundle.rows, data.outcomes))
    ]
    from .cases import case_entries
    from .svg import endpoint_colours

    summary, headline = _headline(data, by_metric, scripted)
    plan_endpoints = [endpoint_label(e, scripted) for e in data.bundle.run.get("plan", {}).get("endpoints", [])]
    return ReportModel(
        title=title or f"assay report: {pack.get('name')} {pack.get('version')}, run {data.bundle.run.get('run_id')}",
        facts=_facts(data, scripted),
        endpoints=_endpoints(data, scripted),
        conditions=_conditions(data),
        warnings=tuple(warnings),
        differences=tuple(data.differences),
        stages=stages,
        scripted=scripted,
        summary=summary,
        headline=headline,
        colours=endpoint_colours([*plan_endpoints, "pooled"]),
        cases=case_entries(data, scripted),
        main=main,
    )
