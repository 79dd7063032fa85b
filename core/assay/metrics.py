"""Metric building blocks: rates, means, distributions and paired tests over result rows, grouped deterministically.

A design (or any plugin) declares its metrics with these: a :class:`RateMetric`
names its stage and its hit (and optionally its denominator, its nulls and
its grouping), a :class:`McNemarVsBaseline` pairs each condition's rows with
its baseline condition's rows of the same work item. Every metric groups rows
by endpoint and condition (some also by a case field) in a deterministic
order, so the same rows always give the same summary, which is what lets the
validator recompute a bundle's claims. Rates carry Wilson 95% intervals.

Metrics that count the same stage share one read of its rows: a module that
declares metrics passes them to :func:`register_tests`, and their predicates
are then tested row by row in a single pass (see :class:`StageTable`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any, ClassVar

from .components import Metric, MetricContext, MetricValue
from .stats import holm_adjust, mcnemar_exact, rate, wilson_interval

__all__ = [
    "DistributionMetric",
    "ENDPOINT_CONDITION",
    "GroupKey",
    "McNemarVsBaseline",
    "MeanMetric",
    "PAIR_FIELDS",
    "ROW_MEMBERS",
    "RateMetric",
    "Row",
    "carried",
    "case_kind",
    "grouped_rows",
    "in_kinds",
    "of_kinds",
    "rate_value",
    "register_tests",
    "stage_outcome",
]

Row = Mapping[str, Any]


GroupKey = tuple[tuple[str, Any], ...]


#: The row key fields a metric groups by unless it says otherwise.
ENDPOINT_CONDITION = ("endpoint", "condition")


#: The row members every built-in metric reads (its ``reads``): a validation holds no more of each row.
ROW_MEMBERS = frozenset({"key", "stages"})


#: Row key fields that identify one work item across conditions (everything but the condition).
PAIR_FIELDS = ("case_id", "endpoint", "seed", "epoch", "protocol")


def _pair_ident(key: Mapping[str, Any]) -> str:
    # A string, not a tuple: strings are not tracked by the cyclic garbage collector, so pairing the
    # rows of a large bundle does not set off full collections over every parsed row. Identifiers
    # cannot hold a space, so the joined key is unique.
    return f"{key['case_id']} {key['endpoint']} {key['seed']} {key['epoch']} {key['protocol']}"  # PAIR_FIELDS


_NO_STAGES: Mapping[str, Any] = {}


def stage_outcome(row: Row, stage: str) -> Mapping[str, Any] | None:
    """The outcome a row records for ``stage``, or None when it has none."""
    outcome: Mapping[str, Any] | None = row.get("stages", {}).get(stage)
    return outcome


def carried(row: Row, stage: str) -> Mapping[str, Any]:
    """The outcome of ``stage`` in a row known to carry it (a metric reads the rows grouped by its stage)."""
    outcome: Mapping[str, Any] = row["stages"][stage]
    return outcome


def grouped_rows(
    rows: Sequence[Row], context: MetricContext, by: Sequence[str], stage: str, keys: Sequence[str] = ENDPOINT_CONDITION
) -> dict[GroupKey, list[Row]]:
    """Rows that carry ``stage``, grouped by the row ``keys`` then ``by`` and sorted.

    Shared by every metric of one summary (memoised in the context).
    """

    def compute() -> dict[GroupKey, list[Row]]:
        table = _stage_table(rows, context, stage) if tuple(keys) == ENDPOINT_CONDITION else None
        if table is not None and tuple(by) in ((), ("family",)):
            return table.grouped(with_family=bool(by))
        # Rows are gathered under their raw key values (one C-level pick per row, the case's fields looked up
        # once per case); the named group keys are built once per group, not once per row.
        pick = itemgetter(*keys) if keys else (lambda key: ())
        single = len(keys) == 1
        case_parts: dict[Any, GroupKey] = {}
        raw_groups: dict[tuple[Any, GroupKey], list[Row]] = {}
        for row in rows:
            if stage in row.get("stages", _NO_STAGES):
                key = row["key"]
                case_id = key["case_id"]
                parts = case_parts.get(case_id)
                if parts is None:
                    case = context.cases.get(case_id, {})
                    parts = case_parts[case_id] = tuple((name, case.get(name, "unknown")) for name in by)
                raw = (pick(key), parts)
                members = raw_groups.get(raw)
                if members is None:
                    members = raw_groups[raw] = []
                members.append(row)
        groups: dict[GroupKey, list[Row]] = {}
        for (values, parts), members in raw_groups.items():
            named = tuple(zip(keys, (values,) if single else values, strict=True)) + parts
            groups.setdefault(named, []).extend(members)
        return {key: groups[key] for key in sorted(groups, key=lambda k: [str(v) for _, v in k])}

    return context.memo(("grouped", id(rows), stage, tuple(by), tuple(keys)), compute)


def case_kind(context: MetricContext, case_id: str) -> str:
    """The kind of a case, from its family (``"unknown"`` when the pack or the family is not at hand)."""
    family = context.cases.get(case_id, {}).get("family", "unknown")
    return context.family_kinds.get(family, "unknown")


def in_kinds(kind: str, kinds: tuple[str, ...]) -> bool:
    """Whether a case of ``kind`` is within ``kinds`` (empty: every kind). A case whose kind is unknown (its pack
    is not at hand) is within: only a case known to be of another kind is left out, so a report without the pack
    still shows the rates, over every row (and says the families are unknown)."""
    return not kinds or kind == "unknown" or kind in kinds


def of_kinds(rows: Sequence[Row], context: MetricContext, kinds: tuple[str, ...]) -> list[Row]:
    """The rows whose case is within ``kinds`` (see :func:`in_kinds`)."""
    if not kinds:
        return list(rows)
    return [row for row in rows if in_kinds(case_kind(context, row["key"]["case_id"]), kinds)]


def rate_value(name: str, group: GroupKey, hits: int, n: int, detail: Mapping[str, Any] | None = None) -> MetricValue:
    """A rate's value for one group: hits over n with its Wilson 95% interval (and ``detail``)."""
    low, high = wilson_interval(hits, n)
    return MetricValue(name, dict(group), rate(hits, n), hits, n, low, high, detail)


@dataclass(frozen=True)
class RateMetric:
    """Share of rows (that carry ``stage``) for which ``hit`` is true, per group.

    Groups are the row key fields ``keys`` (endpoint x condition, or condition
    alone for a pooled rate) then the case fields ``by``. With ``requires``, a
    group is reported only when at least one of its rows carries that stage
    too, so a run that did not plan that stage claims no rate of zero for it.
    """

    reads: ClassVar[frozenset[str]] = ROW_MEMBERS

    name: str
    description: str
    stage: str
    hit: Callable[[Row], bool] = field(repr=False)
    applies: Callable[[Row], bool] | None = field(default=None, repr=False)  # narrows the denominator
    by: tuple[str, ...] = ()
    nulls: Callable[[Row], bool] | None = field(default=None, repr=False)
    keys: tuple[str, ...] = ENDPOINT_CONDITION
    requires: str | None = None
    #: The case kinds the rate is over (empty: every case), e.g. an attack rate leaves the benign companions out.
    kinds: tuple[str, ...] = ()
    #: Which families' cases the rate is over (None: every family), e.g. security tasks without their controls.
    family_in: Callable[[str], bool] | None = field(default=None, repr=False)
    #: On the report's summary screen: ``harm`` or ``utility`` (its column group; utility sits beside harm).
    headline: str = ""

    def outcome(self, row: Row) -> bool | None:
        """This rate's outcome for one row: None when the row is outside its denominator.

        What a leaderboard pairs entries on (McNemar over the same work items).
        """
        if self.stage not in row.get("stages", {}) or (self.applies is not None and not self.applies(row)):
            return None
        return bool(self.hit(row))

    def compute(self, rows: Sequence[Row], context: MetricContext) -> list[MetricValue]:
        """One rate per group, with its Wilson 95% interval."""
        # Counts are taken once per (stage, hit, applies) on the finest grouping (every key field and the
        # family) and summed up to this metric's groups, so a rate, its per-family and its pooled
        # variants cost one pass over the rows between them.
        fine_keys = tuple(dict.fromkeys((*ENDPOINT_CONDITION, *self.keys)))
        fine_by = tuple(dict.fromkeys((*self.by, "family")))
        grouped = grouped_rows(rows, context, fine_by, self.stage, fine_keys)
        cells = _rate_cells(rows, context, grouped, (self.stage, fine_by, fine_keys), self.hit, self.applies)
        nulls = (
            None
            if self.nulls is None
            else _count_cells(rows, context, grouped, (self.stage, fine_by, fine_keys), self.nulls, self.applies)
        )
        present = (
            None
            if self.requires is None
            else _stage_cells(rows, context, grouped, (self.stage, fine_by, fine_keys), self.requires)
        )
        totals: dict[GroupKey, list[int]] = {}
        for fine, (hits, n) in cells.items():
            named_keys, named_by = dict(fine[: len(fine_keys)]), dict(fine[len(fine_keys) :])
            if not in_kinds(context.family_kinds.get(named_by["family"], "unknown"), self.kinds):
                continue  # a group of another kind of case (the fine groups hold one family each)
            if self.family_in is not None and not self.family_in(str(named_by["family"])):
                continue
            group = tuple((k, named_keys[k]) for k in self.keys) + tuple((b, named_by[b]) for b in self.by)
            total = totals.setdefault(group, [0, 0, 0, 0])
            total[0] += hits
            total[1] += n
            total[2] += 0 if nulls is None else nulls[fine]
            total[3] += 0 if present is None else present[fine]
        values = []
        for group in sorted(totals, key=lambda k: [str(v) for _, v in k]):
            hits, n, null_count, required = totals[group]
            if n == 0 or (self.requires is not None and not required):
                continue
            detail = None if self.nulls is None else {"null_verdicts": null_count}
            values.append(rate_value(self.name, group, hits, n, detail))
        return values


def _rate_cells(
    rows: Sequence[Row],
    context: MetricContext,
    grouped: Mapping[GroupKey, list[Row]],
    grouping: Hashable,
    hit: Callable[[Row], bool],
    applies: Callable[[Row], bool] | None,
) -> dict[GroupKey, tuple[int, int]]:
    """(hits, denominator) per group of ``grouped``, memoised per grouping, hit and applies."""

    def compute() -> dict[GroupKey, tuple[int, int]]:
        table = _table_for(rows, context, grouping)
        if table is not None and table.knows(hit, applies):
            hits, sizes = table.count(hit, applies), table.count(None, applies)
            return {group: (hits.get(group, 0), sizes.get(group, 0)) for group in grouped}
        applied = _applied(rows, context, grouped, grouping, applies)
        return {group: (len(list(filter(hit, members))), len(members)) for group, members in applied.items()}

    return context.memo(("rate-cells", id(rows), grouping, hit, applies), compute)


def _applied(
    rows: Sequence[Row],
    context: MetricContext,
    grouped: Mapping[GroupKey, list[Row]],
    grouping: Hashable,
    applies: Callable[[Row], bool] | None,
) -> Mapping[GroupKey, list[Row]]:
    """The members of each group of ``grouped`` within ``applies`` (memoised: rates over one denominator share it)."""
    if applies is None:
        return grouped
    return context.memo(
        ("applied", id(rows), grouping, applies),
        lambda: {group: list(filter(applies, members)) for group, members in grouped.items()},
    )


def _count_cells(
    rows: Sequence[Row],
    context: MetricContext,
    grouped: Mapping[GroupKey, list[Row]],
    grouping: Hashable,
    predicate: Callable[[Row], bool],
    applies: Callable[[Row], bool] | None,
) -> dict[GroupKey, int]:
    """Rows for which ``predicate`` holds, per group of ``grouped`` (within ``applies``)."""

    def compute() -> dict[GroupKey, int]:
        table = _table_for(rows, context, grouping)
        if table is not None and table.knows(predicate, applies):
            counts = table.count(predicate, applies)
            return {group: counts.get(group, 0) for group in grouped}
        applied = _applied(rows, context, grouped, grouping, applies)
        return {group: len(list(filter(predicate, members))) for group, members in applied.items()}

    return context.memo(("count-cells", id(rows), grouping, predicate, applies), compute)


# ---------------------------------------------------------------- one read of the rows per stage


_Predicate = Callable[[Row], bool]


#: A predicate tested only on the rows within a denominator (``applies``; None: every row of the stage).
_Test = tuple[_Predicate | None, _Predicate]


#: Every test the built-in metrics of a stage make of its rows (hits and nulls within their denominators, the
#: denominators themselves, paired outcomes), each denominator before the tests within it; see register_tests.
_STAGE_TESTS: dict[str, tuple[_Test, ...]] = {}


@dataclass
class _StageTable:
    """The rows that carry one stage, read once: group fields, pair ident and every known predicate's result.

    Metrics used to make a pass over the rows per grouping, denominator and
    predicate; rows spread over a large heap make each such pass wait on
    memory far more than it computes. Here each row is read once, every
    predicate tested while it is in the cache, and the metrics count from
    these compact columns instead; a row's group is a small integer (its
    cell), so counting never hashes a tuple of strings.
    """

    rows: list[Row]
    cells: list[tuple[Any, Any, Any]]  # the distinct (endpoint, condition, family) groups, in order of appearance
    cell_of: list[int]  # each row's index into cells
    idents: list[str]  # the pair ident of each row (see _pair_ident)
    results: dict[_Test, list[bool]]  # per test, whether each row is within its denominator and passes it

    def knows(self, predicate: _Predicate | None, applies: _Predicate | None) -> bool:
        """True when the read tested ``predicate`` (None: none) within ``applies`` (None: every row)."""
        return (applies is None or (None, applies) in self.results) and (
            predicate is None or (applies, predicate) in self.results
        )

    def grouped(self, *, with_family: bool) -> dict[GroupKey, list[Row]]:
        """The rows by endpoint and condition (and family), in row order within a group, groups sorted."""
        by_cell: list[list[Row]] = [[] for _ in self.cells]
        for cell, row in zip(self.cell_of, self.rows, strict=True):
            by_cell[cell].append(row)
        names = ("endpoint", "condition", "family")
        groups: dict[GroupKey, list[Row]] = {}
        for values, members in zip(self.cells, by_cell, strict=True):
            groups.setdefault(tuple(zip(names, values if with_family else values[:2], strict=False)), []).extend(
                members
            )
        if not with_family:  # rows of one group gathered from several cells: back in row order
            order = {id(row): index for index, row in enumerate(self.rows)}
            groups = {key: sorted(members, key=lambda row: order[id(row)]) for key, members in groups.items()}
        return {key: groups[key] for key in sorted(groups, key=lambda k: [str(v) for _, v in k])}

    def count(self, predicate: _Predicate | None, applies: _Predicate | None) -> dict[GroupKey, int]:
        """Rows within ``applies`` for which ``predicate`` holds (None: every such row), per fine group."""
        if predicate is not None:
            tally = Counter(compress(self.cell_of, self.results[(applies, predicate)]))
        elif applies is not None:
            tally = Counter(compress(self.cell_of, self.results[(None, applies)]))
        else:
            tally = Counter(self.cell_of)
        names = ("endpoint", "condition", "family")
        return {tuple(zip(names, self.cells[cell], strict=True)): count for cell, count in tally.items()}


def _stage_table(rows: Sequence[Row], context: MetricContext, stage: str) -> _StageTable | None:
    """The one read of the rows carrying ``stage`` (memoised); None when a known predicate fails on some row."""

    def compute() -> _StageTable | None:
        tests = _STAGE_TESTS.get(stage, ())
        columns: list[list[bool]] = [[] for _ in tests]
        steps = [(applies, predicate, column) for (applies, predicate), column in zip(tests, columns, strict=True)]
        families: dict[Any, Any] = {}
        index: dict[tuple[Any, Any, Any], int] = {}
        members: list[Row] = []
        cell_of: list[int] = []
        idents: list[str] = []
        try:
            # Row by row, every test while the row is in the cache: a row's parts lie wherever the parse put
            # them, and a pass per test would wait on memory once per test instead of once.
            for row in rows:
                if stage not in row.get("stages", _NO_STAGES):
                    continue
                key = row["key"]
                case_id = key["case_id"]
                if case_id not in families:
                    families[case_id] = context.cases.get(case_id, {}).get("family", "unknown")
                members.append(row)
                cell_of.append(index.setdefault((key["endpoint"], key["condition"], families[case_id]), len(index)))
                idents.append(_pair_ident(key))
                within: dict[_Predicate, bool] = {}  # each denominator's verdict on this row
                for applies, predicate, column in steps:
                    if applies is None:
                        passed = within[predicate] = bool(predicate(row))
                    else:  # a hit is only asked of the rows within its denominator, as the rates ask it
                        passed = within[applies] and bool(predicate(row))
                    column.append(passed)
        except Exception:  # noqa: BLE001 - a test failing on a row: each metric then reads the rows itself
            return None
        return _StageTable(members, list(index), cell_of, idents, dict(zip(tests, columns, strict=True)))

    return context.memo(("stage-table", id(rows), stage), compute)


def _table_for(rows: Sequence[Row], context: MetricContext, grouping: Hashable) -> _StageTable | None:
    """The stage table behind a built-in rate's grouping ``(stage, ("family",), ENDPOINT_CONDITION)``, if any."""
    if not (isinstance(grouping, tuple) and len(grouping) == 3 and isinstance(grouping[0], str)):
        return None
    stage, by, keys = grouping
    if tuple(by) != ("family",) or tuple(keys) != ENDPOINT_CONDITION:
        return None
    return _stage_table(rows, context, stage)


def _stage_cells(
    rows: Sequence[Row], context: MetricContext, grouped: Mapping[GroupKey, list[Row]], grouping: Hashable, stage: str
) -> dict[GroupKey, int]:
    """1 for each group of ``grouped`` where some row also carries ``stage``, else 0."""

    def compute() -> dict[GroupKey, int]:
        return {group: int(any(stage in row["stages"] for row in members)) for group, members in grouped.items()}

    return context.memo(("stage-cells", id(rows), grouping, stage), compute)


@dataclass(frozen=True)
class MeanMetric:
    """Mean of a numeric stage field over the rows where it is not null, per group."""

    reads: ClassVar[frozenset[str]] = ROW_MEMBERS

    name: str
    description: str
    stage: str
    value_of: Callable[[Row], float | None] = field(repr=False)
    by: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()  # the case kinds it is over (empty: every case)
    family_in: Callable[[str], bool] | None = field(default=None, repr=False)  # which families (None: all)

    def compute(self, rows: Sequence[Row], context: MetricContext) -> list[MetricValue]:
        """One mean per group; numerator is omitted, denominator counts the non-null values."""
        values = []
        for group, all_members in grouped_rows(rows, context, self.by, self.stage).items():
            members = of_kinds(all_members, context, self.kinds)
            if self.family_in is not None:
                keep = self.family_in
                members = [
                    row
                    for row in members
                    if keep(str(context.cases.get(row["key"]["case_id"], {}).get("family", "unknown")))
                ]
            if not members:
                continue
            numbers = [v for v in (self.value_of(row) for row in members) if v is not None]
            mean = sum(numbers) / len(numbers) if numbers else None
            values.append(MetricValue(self.name, dict(group), mean, None, len(numbers)))
        return values


@dataclass(frozen=True)
class DistributionMetric:
    """Counts of a categorical stage field per group; value is the share of rows with any category."""

    reads: ClassVar[frozenset[str]] = ROW_MEMBERS

    name: str
    description: str
    stage: str
    category_of: Callable[[Row], str | None] = field(repr=False)

    def compute(self, rows: Sequence[Row], context: MetricContext) -> list[MetricValue]:
        """One value per group; ``detail`` maps each category to its count."""
        values = []
        for group, members in grouped_rows(rows, context, (), self.stage).items():
            counts = Counter(c for c in (self.category_of(row) for row in members) if c is not None)
            total = sum(counts.values())
            values.append(rate_value(self.name, group, total, len(members), {k: counts[k] for k in sorted(counts)}))
        return values


@dataclass(frozen=True)
class McNemarVsBaseline:
    """Each condition against a baseline condition on the same work items: exact McNemar, Holm-adjusted.

    A row of condition X is paired with the ``baseline`` row of the same case, endpoint,
    seed, epoch and protocol (both carrying ``stage``), pooling every endpoint.
    ``b`` counts pairs where the outcome holds under the baseline only (the
    condition helped), ``c`` under X only. Value is the Holm-adjusted p-value across the
    conditions of the bundle that have pairs; ``detail`` holds ``b``, ``c``,
    ``n_pairs``, the raw p-value and both rates over the pairs. A bundle
    without baseline rows gives no value.
    """

    reads: ClassVar[frozenset[str]] = ROW_MEMBERS

    name: str
    description: str
    stage: str
    outcome: Callable[[Row], bool] = field(repr=False)
    baseline: str = field(kw_only=True)
    kinds: tuple[str, ...] = field(default=(), kw_only=True)  # the case kinds paired (empty: every case)
    #: The name ``detail`` gives the baseline's rate over the pairs.
    baseline_rate: str = field(default="rate_baseline", kw_only=True)

    def compute(self, rows: Sequence[Row], context: MetricContext) -> list[MetricValue]:
        """One test per non-baseline condition with at least one pair, grouped by condition."""
        outcomes: dict[str, dict[str, bool]] = defaultdict(dict)
        read = _stage_table(rows, context, self.stage)
        if read is not None and read.knows(self.outcome, None):
            conditions = [cell[1] for cell in read.cells]
            wanted = [in_kinds(context.family_kinds.get(cell[2], "unknown"), self.kinds) for cell in read.cells]
            for cell, ident, outcome in zip(read.cell_of, read.idents, read.results[(None, self.outcome)], strict=True):
                if wanted[cell]:
                    outcomes[conditions[cell]][ident] = outcome
        else:
            for row in of_kinds(rows, context, self.kinds):
                if self.stage in row.get("stages", _NO_STAGES):
                    outcomes[row["key"]["condition"]][_pair_ident(row["key"])] = bool(self.outcome(row))
        base = outcomes.get(self.baseline)
        if not base:
            return []
        tests = []
        for condition in sorted(c for c in outcomes if c != self.baseline):
            # (baseline outcome or None when unpaired, condition outcome) -> count: one lookup per item.
            table = Counter((base.get(ident), after) for ident, after in outcomes[condition].items())
            n_pairs = sum(count for (before, _), count in table.items() if before is not None)
            if not n_pairs:
                continue
            b, c = table[True, False], table[False, True]
            tests.append((condition, b, c, n_pairs, b + table[True, True], c + table[True, True]))
        adjusted = holm_adjust([mcnemar_exact(b, c) for _, b, c, _, _, _ in tests])
        values = []
        for (condition, b, c, n_pairs, before, after), p_holm in zip(tests, adjusted, strict=True):
            detail = {
                "b": b,
                "c": c,
                "n_pairs": n_pairs,
                "p_raw": mcnemar_exact(b, c),
                self.baseline_rate: before / n_pairs,
                "rate_condition": after / n_pairs,
            }
            values.append(MetricValue(self.name, {"condition": condition}, p_holm, None, n_pairs, None, None, detail))
        return values


def register_tests(metrics: Sequence[Metric]) -> None:
    """Note the tests each of ``metrics`` makes of its stage's rows, so that the one read of those rows makes them.

    A module that declares metrics calls this once, with all of them.
    """
    for metric in metrics:
        tests: list[_Test]
        if isinstance(metric, RateMetric):
            tests = [] if metric.applies is None else [(None, metric.applies)]
            tests += [(metric.applies, test) for test in (metric.hit, metric.nulls) if test is not None]
        elif isinstance(metric, McNemarVsBaseline):
            tests = [(None, metric.outcome)]
        else:
            continue
        known = _STAGE_TESTS.get(metric.stage, ())
        _STAGE_TESTS[metric.stage] = known + tuple(test for test in dict.fromkeys(tests) if test not in known)
