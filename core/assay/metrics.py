"""Metric building blocks: rates, means, distributions and paired tests over result rows, grouped deterministically.

A design (or any plugin) declares its metrics with these: a :class:`RateMetric`
names its stage and its hit (and optionally its denominator, its nulls and
its grouping), a :class:`McNemarVsBaseline` pairs each condition's rows with
its baseline condition's rows of the same work item. Every metric groups rows
by endpoint and condition (some also by a case field) in a deterministic
order, so the same rows always give the same summary, which is what lets the
validator recompute a bundle's claims. Rates carry Wilson 95% intervals.

Every metric here accumulates (see :class:`assay.api.MetricAccumulator`):
the rows go past it once and it keeps counts per group, or a byte per work
item for a paired test, never the rows, so a summary of a million rows takes
the memory of a summary of a thousand. Rates that count the same stage share
one count of its rows (see :class:`_Cells`), each predicate tested once per
row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from operator import itemgetter
from typing import Any, ClassVar, Protocol

from .components import MetricAccumulator, MetricContext, MetricValue
from .plan_matrix import PlanMatrix
from .stats import holm_adjust, mcnemar_exact, rate, wilson_interval

__all__ = [
    "DistributionMetric",
    "ENDPOINT_CONDITION",
    "GroupKey",
    "ItemOutcomes",
    "McNemarVsBaseline",
    "MeanMetric",
    "PAIR_FIELDS",
    "ROW_MEMBERS",
    "RateMetric",
    "Row",
    "accumulated",
    "carried",
    "case_fields",
    "case_kind",
    "grouped_rows",
    "in_kinds",
    "item_outcomes",
    "kind_filter",
    "of_kinds",
    "rate_value",
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


_NO_STAGES: Mapping[str, Any] = {}


def stage_outcome(row: Row, stage: str) -> Mapping[str, Any] | None:
    """The outcome a row records for ``stage``, or None when it has none."""
    outcome: Mapping[str, Any] | None = row.get("stages", {}).get(stage)
    return outcome


def carried(row: Row, stage: str) -> Mapping[str, Any]:
    """The outcome of ``stage`` in a row known to carry it (a metric reads the rows grouped by its stage)."""
    outcome: Mapping[str, Any] = row["stages"][stage]
    return outcome


# ---------------------------------------------------------------- accumulating


class _Accumulating(Protocol):
    def accumulate(self, context: MetricContext) -> MetricAccumulator: ...


def accumulated(metric: _Accumulating, rows: Iterable[Row], context: MetricContext) -> list[MetricValue]:
    """What ``metric.compute`` gives for a metric that accumulates: every row past its accumulator, once."""
    accumulator = metric.accumulate(summary_pass(context))
    for row in rows:
        accumulator.add(row)
    return accumulator.values()


def summary_pass(context: MetricContext) -> MetricContext:
    """A context for one pass over the rows: what its accumulators share (see :meth:`MetricContext.memo`) is
    shared within the pass and with no other, so rows are never counted twice."""
    return replace(context, _memo={})


#: Case lookups a pass remembers at most (rows come case by case, in plan order, so a few suffice; bounded, so a
#: pack of a million cases is not held).
_CASES_REMEMBERED = 4096


def _case_lookup(context: MetricContext, what: Callable[[Mapping[str, Any]], Any], name: str) -> Callable[[str], Any]:
    """``what`` of each case by id, looked up once per case while its rows go past (shared within a pass)."""

    def make() -> Callable[[str], Any]:
        cases, known = context.cases, dict[str, Any]()

        def lookup(case_id: str) -> Any:
            try:
                return known[case_id]
            except KeyError:
                if len(known) >= _CASES_REMEMBERED:
                    known.clear()
                found = known[case_id] = what(cases.get(case_id, _NO_CASE))
                return found

        return lookup

    return context.memo(("case-lookup", name), make)


_NO_CASE: Mapping[str, Any] = {}


def case_fields(context: MetricContext, by: tuple[str, ...]) -> Callable[[str], GroupKey]:
    """Each case's ``by`` fields by case id, as a group key part (``"unknown"`` for a field it lacks); looked up
    once per case while its rows go past, shared within a pass."""
    return _case_lookup(context, lambda case: tuple((name, case.get(name, "unknown")) for name in by), f"parts:{by}")


def _family_of(context: MetricContext) -> Callable[[str], Any]:
    """Each case's family (``"unknown"`` without the pack)."""
    return _case_lookup(context, lambda case: case.get("family", "unknown"), "family")


def kind_filter(context: MetricContext, kinds: tuple[str, ...]) -> Callable[[str], bool] | None:
    """Whether each case is within ``kinds`` (see :func:`in_kinds`); None when every case is."""
    if not kinds:
        return None
    family_of, family_kinds = _family_of(context), context.family_kinds
    return lambda case_id: in_kinds(family_kinds.get(family_of(case_id), "unknown"), kinds)


def _sorted_groups(groups: Iterable[GroupKey]) -> list[GroupKey]:
    return sorted(groups, key=lambda k: [str(v) for _, v in k])


_Predicate = Callable[[Row], bool]


#: A predicate tested only on the rows within a denominator (``applies``; None: every row of the stage).
_Test = tuple[_Predicate | None, _Predicate]


@cache
def _carries(stage: str) -> _Predicate:
    """A test: the row carries ``stage`` (one function per stage, so tests of it are shared)."""
    return lambda row: stage in row["stages"]


class _Cells:
    """One count of the rows that carry a stage, per cell of a grouping, of every test the pass's rates make.

    A cell is the row key fields ``keys`` and the case fields ``by``. Rates of
    one stage and grouping share it (memoised in the pass): each row is read
    once and every predicate tested while the row is in the cache; what is
    kept is a list of counts per cell, however many rows go past.
    """

    def __init__(self, context: MetricContext, stage: str, keys: tuple[str, ...], by: tuple[str, ...]) -> None:
        self.stage, self.keys, self.by = stage, keys, by
        self._pick: Callable[[Mapping[str, Any]], Any] = itemgetter(*keys) if keys else (lambda key: ())
        self._parts = case_fields(context, by)
        self._columns: dict[_Test, int] = {}  # column 0 counts the rows
        self.counts: dict[tuple[Any, GroupKey], list[int]] = {}
        self._last: Row | None = None

    def column(self, applies: _Predicate | None, predicate: _Predicate | None) -> int:
        """The column counting rows within ``applies`` for which ``predicate`` holds (0: every row of the cell).

        Called while accumulators are made, before any row.
        """
        if self.counts:
            raise RuntimeError("a test was added to a count that has read rows")
        if applies is not None:  # each denominator's verdict is tested before the tests within it read it
            self._columns.setdefault((None, applies), len(self._columns) + 1)
        if predicate is None:
            return 0 if applies is None else self._columns[(None, applies)]
        return self._columns.setdefault((applies, predicate), len(self._columns) + 1)

    def add(self, row: Row) -> None:
        """Count one row (once, whichever of the rates sharing this count passes it on first)."""
        if row is self._last:
            return
        self._last = row  # held, so that the next row cannot take its address
        if self.stage not in row.get("stages", _NO_STAGES):
            return
        key = row["key"]
        cell = (self._pick(key), self._parts(key["case_id"]))
        counts = self.counts.get(cell)
        if counts is None:
            counts = self.counts[cell] = [0] * (len(self._columns) + 1)
        counts[0] += 1
        within: dict[_Predicate, bool] = {}  # each denominator's verdict on this row
        for (applies, predicate), column in self._columns.items():
            if applies is None:
                passed = within[predicate] = bool(predicate(row))
            else:  # a hit is only asked of the rows within its denominator
                passed = within[applies] and bool(predicate(row))
            if passed:
                counts[column] += 1

    def named(self) -> Iterable[tuple[dict[str, Any], dict[str, Any], list[int]]]:
        """Each cell as (its key fields by name, its case fields by name, its counts)."""
        single = len(self.keys) == 1
        for (values, parts), counts in self.counts.items():
            yield dict(zip(self.keys, (values,) if single else values, strict=True)), dict(parts), counts


def _cells(context: MetricContext, stage: str, keys: tuple[str, ...], by: tuple[str, ...]) -> _Cells:
    return context.memo(("cells", stage, keys, by), lambda: _Cells(context, stage, keys, by))


def grouped_rows(
    rows: Sequence[Row], context: MetricContext, by: Sequence[str], stage: str, keys: Sequence[str] = ENDPOINT_CONDITION
) -> dict[GroupKey, list[Row]]:
    """Rows that carry ``stage``, grouped by the row ``keys`` then the case fields ``by`` and sorted; rows keep
    their order within a group.

    For a metric that computes from rows it holds (an accumulating metric
    counts per group instead). Shared by every metric of one summary
    (memoised in the context).
    """

    def compute() -> dict[GroupKey, list[Row]]:
        pick = itemgetter(*keys) if keys else (lambda key: ())
        single = len(keys) == 1
        parts_of = case_fields(context, tuple(by))
        raw_groups: dict[tuple[Any, GroupKey], list[Row]] = {}
        for row in rows:
            if stage in row.get("stages", _NO_STAGES):
                key = row["key"]
                raw_groups.setdefault((pick(key), parts_of(key["case_id"])), []).append(row)
        groups: dict[GroupKey, list[Row]] = {}
        for (values, parts), members in raw_groups.items():
            named = tuple(zip(keys, (values,) if single else values, strict=True)) + parts
            groups.setdefault(named, []).extend(members)
        return {key: groups[key] for key in _sorted_groups(groups)}

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
    within = kind_filter(context, kinds)
    if within is None:
        return list(rows)
    return [row for row in rows if within(row["key"]["case_id"])]


def rate_value(name: str, group: GroupKey, hits: int, n: int, detail: Mapping[str, Any] | None = None) -> MetricValue:
    """A rate's value for one group: hits over n with its Wilson 95% interval (and ``detail``)."""
    low, high = wilson_interval(hits, n)
    return MetricValue(name, dict(group), rate(hits, n), hits, n, low, high, detail)


# ---------------------------------------------------------------- per work item, compactly


#: Work-item outcomes a pass keeps in arrays indexed by the plan (a byte each), in all, before it keeps the rest
#: in dicts: the plan is the bundle's, and a hostile one could name a matrix far larger than its rows.
_SLOT_BUDGET = 1 << 26


class _Slots:
    """Work items' positions in the plan's matrix over some key fields: a byte per item instead of a dict entry.

    Shared within a pass. ``slot`` is None for a key outside the plan (the
    caller then keeps it in a dict), or when the plan does not give the axes.
    """

    def __init__(self, context: MetricContext, fields: tuple[str, ...]) -> None:
        self.fields = fields
        try:
            self._matrix: PlanMatrix | None = PlanMatrix.of_plan(context.plan, fields)
        except (KeyError, TypeError, ValueError):
            self._matrix = None
        self.size = 0 if self._matrix is None else self._matrix.size
        self._budget = context.memo(("slot-budget",), lambda: [_SLOT_BUDGET])

    def slot(self, key: Mapping[str, Any]) -> int | None:
        """The key's position, or None."""
        if self._matrix is None:
            return None
        try:
            return self._matrix.position([key[name] for name in self.fields])
        except KeyError:
            return None

    def fields_of(self, position: int) -> tuple[Any, ...]:
        """The key fields of a position (the inverse of :meth:`slot`)."""
        assert self._matrix is not None
        return self._matrix.values_at(position)

    def array(self) -> bytearray | None:
        """A zeroed byte per position, or None when the pass has spent its budget for them."""
        if self._matrix is None or self.size > self._budget[0]:
            return None
        self._budget[0] -= self.size
        return bytearray(self.size)


def _slots(context: MetricContext, fields: tuple[str, ...]) -> _Slots:
    return context.memo(("slots", fields), lambda: _Slots(context, fields))


class ItemOutcomes:
    """A true/false outcome per work item, keyed by some row key fields (the last one given wins): a byte per
    item of the plan, a dict entry per item outside it. What an accumulating paired metric keeps instead of the
    rows; made by :func:`item_outcomes`."""

    def __init__(self, slots: _Slots) -> None:
        self._slots = slots
        self._array: bytearray | None = None
        self._spent = False
        self.others: dict[tuple[Any, ...], bool] = {}

    def set(self, key: Mapping[str, Any], outcome: bool) -> None:
        """Record one item's outcome (``key`` is a row key)."""
        position = self._slots.slot(key)
        if position is not None and self._array is None and not self._spent:
            self._array = self._slots.array()
            self._spent = self._array is None
        if position is None or self._array is None:
            self.others[tuple(key[name] for name in self._slots.fields)] = outcome
        else:
            self._array[position] = 2 if outcome else 1

    def get(self, ident: tuple[Any, ...]) -> bool | None:
        """The outcome of the item with these key fields, or None."""
        if self._array is not None:
            position = self._slots.slot(dict(zip(self._slots.fields, ident, strict=True)))
            if position is not None:
                code = self._array[position]
                return None if code == 0 else code == 2
        return self.others.get(ident)

    def items(self) -> Iterable[tuple[tuple[Any, ...], bool]]:
        """Every (key fields, outcome): the planned items in plan order, then the others as given."""
        if self._array is not None:
            fields_of, array = self._slots.fields_of, self._array
            for position in (i for i, code in enumerate(array) if code):
                yield fields_of(position), array[position] == 2
        yield from self.others.items()

    def joined(self, other: ItemOutcomes) -> Iterable[tuple[tuple[Any, ...], bool, bool]]:
        """(key fields, this outcome, ``other``'s) for every item both have."""
        if self._plain_with(other):
            assert self._array is not None and other._array is not None
            fields_of = self._slots.fields_of
            for position, (mine, theirs) in enumerate(zip(self._array, other._array, strict=True)):
                if mine and theirs:
                    yield fields_of(position), mine == 2, theirs == 2
            return
        for ident, outcome in self.items():
            found = other.get(ident)
            if found is not None:
                yield ident, outcome, found

    def paired_counts(self, other: ItemOutcomes) -> Counter[tuple[bool, bool]]:
        """(``other``'s outcome, this outcome) -> items both have."""
        if self._plain_with(other):
            assert self._array is not None and other._array is not None
            # Code pairs counted without decoding a position: a million items in milliseconds.
            codes = Counter(zip(other._array, self._array, strict=True))
            return Counter({(theirs == 2, mine == 2): n for (theirs, mine), n in codes.items() if theirs and mine})
        return Counter((theirs, mine) for _, mine, theirs in self.joined(other))

    def _plain_with(self, other: ItemOutcomes) -> bool:
        """Both keep every item in an array over the same positions."""
        return (
            self._array is not None
            and other._array is not None
            and self._slots is other._slots
            and not self.others
            and not other.others
        )


def item_outcomes(context: MetricContext, fields: tuple[str, ...]) -> ItemOutcomes:
    """An empty :class:`ItemOutcomes` over the row key ``fields`` (stores of one pass share their positions)."""
    return ItemOutcomes(_slots(context, fields))


# ---------------------------------------------------------------- the metrics


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

    def compute(self, rows: Iterable[Row], context: MetricContext) -> list[MetricValue]:
        """One rate per group, with its Wilson 95% interval."""
        return accumulated(self, rows, context)

    def accumulate(self, context: MetricContext) -> MetricAccumulator:
        """Counts on the finest grouping (every key field and the family), shared with every rate of the stage
        on it, summed up to this rate's groups at the end: a rate, its per-family and its pooled variants cost
        one count between them."""
        fine_keys = tuple(dict.fromkeys((*ENDPOINT_CONDITION, *self.keys)))
        fine_by = tuple(dict.fromkeys((*self.by, "family")))
        cells = _cells(context, self.stage, fine_keys, fine_by)
        columns = (
            cells.column(self.applies, self.hit),
            cells.column(None, self.applies),
            None if self.nulls is None else cells.column(self.applies, self.nulls),
            None if self.requires is None else cells.column(None, _carries(self.requires)),
        )
        return _RateAccumulator(self, context, cells, columns)


@dataclass
class _RateAccumulator:
    metric: RateMetric
    context: MetricContext
    cells: _Cells
    columns: tuple[int, int, int | None, int | None]

    def add(self, row: Row) -> None:
        self.cells.add(row)

    def values(self) -> list[MetricValue]:
        metric, kinds = self.metric, self.context.family_kinds
        hit, size, nulls, present = self.columns
        totals: dict[GroupKey, list[int]] = {}
        for named_keys, named_by, counts in self.cells.named():
            if not in_kinds(kinds.get(named_by["family"], "unknown"), metric.kinds):
                continue  # a group of another kind of case (the fine groups hold one family each)
            if metric.family_in is not None and not metric.family_in(str(named_by["family"])):
                continue
            group = tuple((k, named_keys[k]) for k in metric.keys) + tuple((b, named_by[b]) for b in metric.by)
            total = totals.setdefault(group, [0, 0, 0, 0])
            total[0] += counts[hit]
            total[1] += counts[size]
            total[2] += 0 if nulls is None else counts[nulls]
            total[3] += 0 if present is None else counts[present]
        values = []
        for group in _sorted_groups(totals):
            hits, n, null_count, required = totals[group]
            if n == 0 or (metric.requires is not None and not required):
                continue
            detail = None if metric.nulls is None else {"null_verdicts": null_count}
            values.append(rate_value(metric.name, group, hits, n, detail))
        return values


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

    def compute(self, rows: Iterable[Row], context: MetricContext) -> list[MetricValue]:
        """One mean per group; numerator is omitted, denominator counts the non-null values."""
        return accumulated(self, rows, context)

    def accumulate(self, context: MetricContext) -> MetricAccumulator:
        """Per group: rows, values and their sum (in row order, so the mean is the sum of the list's)."""
        return _MeanAccumulator(self, context)


class _MeanAccumulator:
    def __init__(self, metric: MeanMetric, context: MetricContext) -> None:
        self.metric = metric
        self._parts = case_fields(context, metric.by)
        self._within = kind_filter(context, metric.kinds)
        self._family = _family_of(context)
        self.groups: dict[tuple[Any, GroupKey], list[Any]] = {}

    def add(self, row: Row) -> None:
        metric = self.metric
        if metric.stage not in row.get("stages", _NO_STAGES):
            return
        key = row["key"]
        case_id = key["case_id"]
        if self._within is not None and not self._within(case_id):
            return
        if metric.family_in is not None and not metric.family_in(str(self._family(case_id))):
            return
        cell = (key["endpoint"], key["condition"]), self._parts(case_id)
        state = self.groups.get(cell)
        if state is None:
            state = self.groups[cell] = [0, 0, 0]
        state[0] += 1
        value = metric.value_of(row)
        if value is not None:
            state[1] += 1
            state[2] += value

    def values(self) -> list[MetricValue]:
        named = {
            (("endpoint", pair[0]), ("condition", pair[1]), *parts): state
            for (pair, parts), state in self.groups.items()
        }
        values = []
        for group in _sorted_groups(named):
            _, count, total = named[group]
            values.append(MetricValue(self.metric.name, dict(group), total / count if count else None, None, count))
        return values


@dataclass(frozen=True)
class DistributionMetric:
    """Counts of a categorical stage field per group; value is the share of rows with any category."""

    reads: ClassVar[frozenset[str]] = ROW_MEMBERS

    name: str
    description: str
    stage: str
    category_of: Callable[[Row], str | None] = field(repr=False)

    def compute(self, rows: Iterable[Row], context: MetricContext) -> list[MetricValue]:
        """One value per group; ``detail`` maps each category to its count."""
        return accumulated(self, rows, context)

    def accumulate(self, context: MetricContext) -> MetricAccumulator:
        """Per group: its rows and a count per category."""
        return _DistributionAccumulator(self)


class _DistributionAccumulator:
    def __init__(self, metric: DistributionMetric) -> None:
        self.metric = metric
        self.groups: dict[GroupKey, tuple[list[int], Counter[str]]] = {}

    def add(self, row: Row) -> None:
        if self.metric.stage not in row.get("stages", _NO_STAGES):
            return
        key = row["key"]
        group = (("endpoint", key["endpoint"]), ("condition", key["condition"]))
        state = self.groups.get(group)
        if state is None:
            state = self.groups[group] = ([0], Counter())
        state[0][0] += 1
        category = self.metric.category_of(row)
        if category is not None:
            state[1][category] += 1

    def values(self) -> list[MetricValue]:
        values = []
        for group in _sorted_groups(self.groups):
            (members,), counts = self.groups[group]
            total = sum(counts.values())
            detail = {k: counts[k] for k in sorted(counts)}
            values.append(rate_value(self.metric.name, group, total, members, detail))
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

    def compute(self, rows: Iterable[Row], context: MetricContext) -> list[MetricValue]:
        """One test per non-baseline condition with at least one pair, grouped by condition."""
        return accumulated(self, rows, context)

    def accumulate(self, context: MetricContext) -> MetricAccumulator:
        """Each condition's outcome per work item, a byte each (see :class:`ItemOutcomes`)."""
        return _McNemarAccumulator(self, context)


class _McNemarAccumulator:
    def __init__(self, metric: McNemarVsBaseline, context: MetricContext) -> None:
        self.metric = metric
        self._context = context
        self._within = kind_filter(context, metric.kinds)
        self.outcomes: dict[Any, ItemOutcomes] = {}

    def add(self, row: Row) -> None:
        metric = self.metric
        if metric.stage not in row.get("stages", _NO_STAGES):
            return
        key = row["key"]
        if self._within is not None and not self._within(key["case_id"]):
            return
        condition = key["condition"]
        outcomes = self.outcomes.get(condition)
        if outcomes is None:
            outcomes = self.outcomes[condition] = item_outcomes(self._context, PAIR_FIELDS)
        outcomes.set(key, bool(metric.outcome(row)))

    def values(self) -> list[MetricValue]:
        metric = self.metric
        base = self.outcomes.get(metric.baseline)
        if base is None:
            return []
        tests = []
        for condition in sorted(c for c in self.outcomes if c != metric.baseline):
            table = self.outcomes[condition].paired_counts(base)
            n_pairs = sum(table.values())
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
                metric.baseline_rate: before / n_pairs,
                "rate_condition": after / n_pairs,
            }
            values.append(MetricValue(metric.name, {"condition": condition}, p_holm, None, n_pairs, None, None, detail))
        return values
