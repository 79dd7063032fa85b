"""Paired comparisons of outcomes between two selections of a bundle's rows.

``A`` and each ``B`` are selectors over the row key fields ``endpoint``,
``condition`` and ``protocol`` (``condition=baseline``). A row of A is paired with
the row of B that agrees on every other key field (case, seed, epoch and the
unselected ones), so each pair is the same work item under two settings: the
design McNemar's test and the paired bootstrap assume. For every outcome and
every B this gives the two rates, their difference (B - A), a seeded paired
bootstrap interval, the exact McNemar p-value with its discordant counts, and
the Holm-adjusted p-value across every comparison of the invocation. A score
outcome is compared by its means, with a task-blocked sign-permutation test.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..components import Outcome
from ..errors import AssayError, UsageError
from ..metrics import in_kinds
from ..stats import (
    holm_adjust,
    mcnemar_from_pairs,
    paired_bootstrap_diff,
    sign_permutation_test,
    task_blocked_differences,
)

__all__ = [
    "Comparison",
    "ComparisonResult",
    "KEY_FIELDS",
    "Outcome",
    "Pairing",
    "SELECTABLE",
    "ScoreComparison",
    "Selector",
    "compare_rows",
]

Row = Mapping[str, Any]

KEY_FIELDS = ("case_id", "endpoint", "condition", "seed", "epoch", "protocol")
SELECTABLE = ("endpoint", "condition", "protocol")


@dataclass(frozen=True)
class Selector:
    """Constraints ``key=value[,key=value]`` on the selectable row key fields, sorted by field."""

    constraints: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``key=value[,key=value]``; raises :class:`UsageError` naming what is wrong."""
        constraints: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.strip().partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise UsageError(f"selector {text!r}: expected key=value[,key=value], got {part.strip()!r}")
            if key not in SELECTABLE:
                raise UsageError(f"selector {text!r}: {key!r} is not one of {', '.join(SELECTABLE)}")
            if key in constraints:
                raise UsageError(f"selector {text!r}: {key} is given twice")
            constraints[key] = value
        return cls(tuple(sorted(constraints.items())))

    @property
    def fields(self) -> tuple[str, ...]:
        """The key fields this selector constrains."""
        return tuple(key for key, _ in self.constraints)

    def matches(self, row: Row) -> bool:
        """True when the row's key has every selected value (compared as text)."""
        key = row["key"]
        return all(str(key.get(name)) == value for name, value in self.constraints)

    def __str__(self) -> str:
        return ",".join(f"{key}={value}" for key, value in self.constraints)


@dataclass(frozen=True)
class Pairing:
    """How the rows of A and one B paired up."""

    b: str
    rows_a: int
    rows_b: int
    pairs: int
    unpaired_a: int
    unpaired_b: int


@dataclass(frozen=True)
class Comparison:
    """One outcome compared between A and one B over their paired rows.

    ``mcnemar_b`` counts pairs where the outcome holds under A only,
    ``mcnemar_c`` under B only; ``diff`` is ``rate_b - rate_a``.
    """

    b: str
    outcome: str
    pairs: int
    rate_a: float
    rate_b: float
    diff: float
    ci_low: float
    ci_high: float
    mcnemar_b: int
    mcnemar_c: int
    p_value: float
    p_holm: float
    tasks: int = 0
    sign_perm_p: float | None = None
    model_family: str = ""  # the model family of the pairs ("" when the bundle's endpoints name none, or one)


@dataclass(frozen=True)
class ScoreComparison:
    """The mean of a score outcome under A and one B over their paired rows.

    With a task-blocked sign-permutation test of the difference.
    """

    b: str
    outcome: str
    pairs: int
    tasks: int
    mean_a: float
    mean_b: float
    diff: float
    sign_perm_p: float


@dataclass(frozen=True)
class ComparisonResult:
    """Every comparison of one invocation, with what is needed to reproduce it."""

    a: str
    rows_a: int
    pair_on: tuple[str, ...]
    seed: int
    resamples: int
    confidence: float
    pairings: tuple[Pairing, ...]
    comparisons: tuple[Comparison, ...]
    no_pairs: tuple[tuple[str, str], ...] = ()
    bundle: str = ""
    run_id: str = ""
    scores: tuple[ScoreComparison, ...] = ()

    def to_document(self) -> dict[str, Any]:
        """A JSON-ready document of the result."""
        doc = asdict(self)
        doc["pair_on"] = list(self.pair_on)
        doc["no_pairs"] = [{"b": b, "outcome": outcome} for b, outcome in self.no_pairs]
        doc["p_adjustment"] = "holm"
        doc["ci_method"] = "paired percentile bootstrap"
        doc["test"] = "exact McNemar (two-sided); task-blocked sign-permutation over per-task mean differences"
        return doc


def _available(rows: Iterable[Row]) -> str:
    found: dict[str, set[str]] = {name: set() for name in SELECTABLE}
    for row in rows:  # one walk: the rows may be read from disk on each (see assay.reports.rowfile)
        for name, values in found.items():
            values.add(str(row["key"].get(name)))
    return "; ".join(f"{name}s: {', '.join(sorted(values)) or 'none'}" for name, values in found.items())


class _Raised:
    """An outcome that raised on a row: raised again only if a comparison asks for it, as it would have been."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


#: How a compared value is kept (see _Selection): a float, None, False, True, an int (exact in a float), or
#: anything else (kept whole, aside).
_FLOAT, _NONE, _FALSE, _TRUE, _INT, _ASIDE = range(6)
_EXACT = 2**53


def _encoded(value: Any) -> tuple[int, float]:
    if value is None:
        return _NONE, 0.0
    if value is True or value is False:
        return (_TRUE if value else _FALSE), 0.0
    if type(value) is float:
        return _FLOAT, value
    if type(value) is int and -_EXACT <= value <= _EXACT:
        return _INT, float(value)
    return _ASIDE, 0.0


class _Selection(Mapping[tuple[Any, ...], "_Item"]):
    """The rows one selector matched, by pair key: what a comparison needs of each, in arrays.

    Its case, its endpoint and the value of each chosen outcome (a byte saying what kind of value, and a float):
    a large bundle's rows are never held (see :class:`assay.reports.rowfile.RowFile`), and the pairs are made of
    a few hundred bytes a row, most of it the pair key and its place in the table.
    """

    def __init__(self, chosen: Sequence[Outcome]) -> None:
        self._chosen = chosen
        self._at: dict[tuple[Any, ...], int] = {}
        self._case_ids: list[Any] = []
        self._endpoints: list[Any] = []
        self._kinds = [array("b") for _ in chosen]
        self._numbers = [array("d") for _ in chosen]
        self._aside: dict[tuple[int, int], Any] = {}  # (outcome, row): a value of another type, or what was raised

    def add(self, key: tuple[Any, ...], row: Row, shared: _Shared) -> None:
        """Keep what the comparison needs of ``row``, under its pair ``key`` (its texts kept once, by ``shared``)."""
        position = len(self._case_ids)
        self._at[key] = position
        self._case_ids.append(shared(row["key"]["case_id"]))
        self._endpoints.append(shared(row["key"]["endpoint"]))
        for number, outcome in enumerate(self._chosen):
            try:
                value = outcome.of(row)
            except Exception as exc:  # noqa: BLE001 - kept, and raised only if a comparison reads this value
                value = _Raised(exc)
            kind, stored = _encoded(value)
            if kind == _ASIDE:
                self._aside[number, position] = value
            self._kinds[number].append(kind)
            self._numbers[number].append(stored)

    def value(self, outcome: int, position: int) -> Any:
        """The value of the chosen outcome at ``outcome`` for the row kept at ``position``, as ``of`` gave it."""
        kind = self._kinds[outcome][position]
        if kind == _FLOAT:
            return self._numbers[outcome][position]
        if kind == _INT:
            return int(self._numbers[outcome][position])
        if kind == _ASIDE:
            value = self._aside[outcome, position]
            if isinstance(value, _Raised):
                raise value.error
            return value
        return None if kind == _NONE else kind == _TRUE

    def __getitem__(self, key: tuple[Any, ...]) -> _Item:
        return _Item(self, self._at[key])

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


class _Item:
    """One row of a :class:`_Selection`, as a comparison reads it."""

    __slots__ = ("_position", "_selection")

    def __init__(self, selection: _Selection, position: int) -> None:
        self._selection, self._position = selection, position

    @property
    def case_id(self) -> Any:
        """The row's case id."""
        return self._selection._case_ids[self._position]

    @property
    def endpoint(self) -> Any:
        """The row's endpoint."""
        return self._selection._endpoints[self._position]

    def of(self, outcome: int) -> Any:
        """The value of the chosen outcome at ``outcome``."""
        return self._selection.value(outcome, self._position)


class _Shared:
    """One copy of each key text however many rows name it (a condition, an endpoint, a case in A and in B).

    A table of this comparison's own, let go with it (``sys.intern`` would grow the interpreter's for good).
    """

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        """``value``, or the equal text already kept."""
        return self._texts.setdefault(value, value) if type(value) is str else value


def _indexes(
    rows: Iterable[Row], selectors: Sequence[tuple[str, Selector]], pair_on: Sequence[str], chosen: Sequence[Outcome]
) -> list[_Selection]:
    """One walk of the rows: for each (role, selector), its rows by pair key."""
    indexes = [_Selection(chosen) for _ in selectors]
    shared = _Shared()
    for row in rows:
        for (role, selector), index in zip(selectors, indexes, strict=True):
            if selector.matches(row):
                key = tuple(shared(row["key"].get(name)) for name in pair_on)
                if key in index:
                    raise AssayError(
                        f"{role} {selector}: two rows share the key {dict(zip(pair_on, key, strict=True))} "
                        "(run 'assay validate')"
                    )
                index.add(key, row, shared)
    return indexes


def _choose(names: Sequence[str] | None, available: Sequence[Outcome]) -> tuple[Outcome, ...]:
    if not names:
        return tuple(available)
    known = {outcome.name: outcome for outcome in available}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"unknown outcome {unknown[0]!r} (known: {', '.join(known)})")
    wanted = set(names)
    return tuple(outcome for outcome in available if outcome.name in wanted)


def compare_rows(
    rows: Sequence[Row],
    a: Selector,
    bs: Sequence[Selector],
    *,
    outcomes: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 10_000,
    confidence: float = 0.95,
    available: Sequence[Outcome],
    case_kinds: Mapping[str, str] | None = None,
    endpoint_families: Mapping[str, str] | None = None,
) -> ComparisonResult:
    """Compare A with every B on each outcome that both rows of a pair carry.

    ``available`` are the outcomes that can be named (the registered ones,
    from ``register_outcomes``); ``case_kinds`` maps case ids to their kinds,
    so an outcome over some kinds of case pairs only those (a case of an
    unknown kind is paired); ``endpoint_families`` maps endpoints to their
    model families, and pairs of different families are never pooled into one
    test (one comparison per family). Outcomes (default:
    all of them) with no paired rows are left out; when outcomes were named,
    those are listed in ``no_pairs``. The
    bootstrap of every comparison uses ``seed``, so the result is the same
    for the same rows whatever order they are in.
    """
    if not bs:
        raise UsageError("give at least one --b selector")
    chosen = _choose(outcomes, available)
    kinds = case_kinds or {}
    pair_on = tuple(name for name in KEY_FIELDS if name not in a.fields)
    seen: set[Selector] = set()
    for b in bs:
        if b.fields != a.fields:
            raise UsageError(
                f"--b {b} selects {', '.join(b.fields)} but --a {a} selects {', '.join(a.fields)}; "
                "both must name the same fields"
            )
        if b == a:
            raise UsageError(f"--b {b} is the same as --a")
        if b in seen:
            raise UsageError(f"--b {b} is given twice")
        seen.add(b)
    roles = [("--a", a), *(("--b", b) for b in bs)]
    a_index, *b_indexes = _indexes(rows, roles, pair_on, chosen)  # one walk of the rows for A and every B
    for (role, selector), index in zip(roles, [a_index, *b_indexes], strict=True):
        if not index:
            raise UsageError(f"{role} {selector} matches no rows ({_available(rows)})")
    pairings, pending, no_pairs, scores = [], [], [], []
    for b, b_index in zip(bs, b_indexes, strict=True):
        all_keys = sorted(a_index.keys() & b_index.keys())
        keys = all_keys
        if not keys:
            raise UsageError(f"--a {a} and --b {b} share no work item (pairs agree on {', '.join(pair_on)})")
        pairings.append(
            Pairing(str(b), len(a_index), len(b_index), len(keys), len(a_index) - len(keys), len(b_index) - len(keys))
        )
        for position, outcome in enumerate(chosen):
            keys = (
                [k for k in all_keys if in_kinds(kinds.get(str(a_index[k].case_id), "unknown"), outcome.kinds)]
                if outcome.kinds
                else all_keys
            )
            if outcome.scale == "score":
                found = _scores(outcome, position, a_index, b_index, keys, str(b), resamples, seed)
                scores.extend(found)
                if not found and outcomes:
                    no_pairs.append((str(b), outcome.name))
                continue
            groups = _by_model_family(keys, a_index, b_index, endpoint_families or {})
            for family, group_keys in groups:
                both = [(a_index[k].of(position), b_index[k].of(position)) for k in group_keys]
                pairs = [(x, y) for x, y in both if x is not None and y is not None]
                if not pairs:
                    if outcomes and len(groups) == 1:
                        no_pairs.append((str(b), outcome.name))
                    continue
                kept = [k for k, (x, y) in zip(group_keys, both, strict=True) if x is not None and y is not None]
                xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
                test = mcnemar_from_pairs(xs, ys)
                boot = paired_bootstrap_diff(
                    [float(x) for x in xs],
                    [float(y) for y in ys],
                    n_resamples=resamples,
                    confidence=confidence,
                    seed=seed,
                )
                # Task-blocked: one mean difference per task (case), so seeds of one task never count as independent.
                blocks = task_blocked_differences(
                    [a_index[k].case_id for k in kept], [float(x) for x in xs], [float(y) for y in ys]
                )
                permutation = sign_permutation_test(blocks, n_permutations=resamples, seed=seed)
                pending.append(
                    (
                        str(b),
                        outcome.name,
                        len(pairs),
                        sum(xs) / len(xs),
                        sum(ys) / len(ys),
                        boot,
                        test,
                        len(blocks),
                        permutation.p_value,
                        family,
                    )
                )
    adjusted = holm_adjust([entry[6].p_value for entry in pending])
    comparisons = tuple(
        Comparison(
            b,
            name,
            n,
            rate_a,
            rate_b,
            boot.diff,
            boot.ci_low,
            boot.ci_high,
            test.b,
            test.c,
            test.p_value,
            p_holm,
            tasks,
            perm_p,
            family,
        )
        for (b, name, n, rate_a, rate_b, boot, test, tasks, perm_p, family), p_holm in zip(
            pending, adjusted, strict=True
        )
    )
    return ComparisonResult(
        str(a),
        len(a_index),
        pair_on,
        seed,
        resamples,
        confidence,
        tuple(pairings),
        comparisons,
        tuple(no_pairs),
        scores=tuple(scores),
    )


def _by_model_family(
    keys: Sequence[tuple[Any, ...]],
    a_index: Mapping[tuple[Any, ...], _Item],
    b_index: Mapping[tuple[Any, ...], _Item],
    families: Mapping[str, str],
) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The pair keys by model family (an endpoint without one is its own family): one group of every key, labelled
    "", when the endpoints name no family or all pairs share one; a pair whose A and B endpoints are of different
    families is labelled "A-family vs B-family"."""
    if not families:
        return [("", list(keys))]

    def family_of(item: _Item) -> str:
        endpoint = str(item.endpoint)
        return families.get(endpoint, endpoint)

    groups: dict[str, list[tuple[Any, ...]]] = {}
    for key in keys:
        a, b = family_of(a_index[key]), family_of(b_index[key])
        groups.setdefault(a if a == b else f"{a} vs {b}", []).append(key)
    if len(groups) == 1:
        return [("", list(keys))]
    return sorted(groups.items())


def _scores(
    outcome: Outcome,
    position: int,
    a_index: Mapping[tuple[Any, ...], _Item],
    b_index: Mapping[tuple[Any, ...], _Item],
    keys: Sequence[tuple[Any, ...]],
    b: str,
    resamples: int,
    seed: int,
) -> list[ScoreComparison]:
    """The comparison of a score outcome for one B, when both rows of some pairs carry it."""
    kept = [k for k in keys if a_index[k].of(position) is not None and b_index[k].of(position) is not None]
    if not kept:
        return []
    xs, ys = [float(a_index[k].of(position)) for k in kept], [float(b_index[k].of(position)) for k in kept]
    blocks = task_blocked_differences([a_index[k].case_id for k in kept], xs, ys)
    test = sign_permutation_test(blocks, n_permutations=resamples, seed=seed)
    mean_a, mean_b = sum(xs) / len(xs), sum(ys) / len(ys)
    return [ScoreComparison(b, outcome.name, len(kept), len(blocks), mean_a, mean_b, mean_b - mean_a, test.p_value)]
