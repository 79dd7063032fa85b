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
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from ..components import Outcome
from ..errors import AssayError, UsageError
from ..metrics import in_kinds
from ..stats import (
    holm_adjust,
    mcnemar_from_pairs,
    paired_bootstrap_diff,
    ranked_task_differences,
    sign_permutation_test,
)

if TYPE_CHECKING:
    import numpy as np

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
#: Pair codes stay below this (numpy int64), so one more field's ranks can be folded in without overflow.
_CODE_LIMIT = 2**62


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


class _KeyValues:
    """The distinct values of the pair key fields and of the endpoint, each numbered once, in the order first seen.

    One table for A and every B, so the same value has the same number in each, and each text is kept once however
    many rows name it (a table of the comparison's own, let go with it).
    """

    def __init__(self, fields: Sequence[str]) -> None:
        self._numbers: dict[str, dict[Any, int]] = {name: {} for name in (*fields, "endpoint")}
        self._ranks: dict[str, np.ndarray] = {}

    def number(self, field: str, value: Any) -> int:
        """The number of ``value`` among the values of ``field`` (a new one when it was not seen before)."""
        numbers = self._numbers[field]
        found = numbers.get(value)
        if found is None:
            found = numbers[value] = len(numbers)
        return found

    def values(self, field: str) -> Iterator[Any]:
        """The distinct values of ``field``, by number."""
        return iter(self._numbers[field])

    def release(self, field: str) -> None:
        """Let go of the values of ``field`` once nothing more is asked of them but their ranks (a pack's every case
        id, say, while the statistics take their turn)."""
        self.ranks(field)
        self._numbers[field] = {}

    def ranks(self, field: str) -> np.ndarray:
        """Each value's rank among the distinct values of ``field`` in sorted order, by number (once all are in)."""
        import numpy as np

        if field in self._ranks:
            return self._ranks[field]
        values = np.fromiter(self._numbers[field], dtype=object, count=len(self._numbers[field]))
        try:
            order = np.argsort(values, kind="stable")
        except TypeError:
            kinds = ", ".join(sorted({type(value).__name__ for value in values}))
            raise AssayError(
                f"key field {field} mixes values that cannot be ordered ({kinds}; run 'assay validate')"
            ) from None
        ranks = self._ranks[field] = np.empty(len(values), dtype=np.int64)
        ranks[order] = np.arange(len(values), dtype=np.int64)
        return ranks


class _Column:
    """Numbers from 0 up, one a row, in the narrowest array that holds them: a byte a row while a key field has up to
    256 distinct values (a condition, a seed), widened as they grow (a case id)."""

    _WIDER: ClassVar[dict[str, str]] = {"B": "H", "H": "I", "I": "Q"}

    def __init__(self) -> None:
        self._numbers = array("B")

    def append(self, number: int) -> None:
        """Add one row's number."""
        if number >= 1 << (8 * self._numbers.itemsize):
            self._numbers = array(self._WIDER[self._numbers.typecode], self._numbers)
        self._numbers.append(number)

    def __len__(self) -> int:
        return len(self._numbers)

    def as_array(self) -> np.ndarray:
        """The numbers, as a numpy array sharing their memory."""
        import numpy as np

        dtype = np.dtype(self._numbers.typecode)
        return np.frombuffer(self._numbers, dtype=dtype) if self._numbers else np.zeros(0, dtype=dtype)


class _Selection:
    """The rows one selector matched, as a paired comparison needs them: numbers in arrays, never the rows.

    Each row's pair key (the numbers of its field values, then one integer code ordered as the key tuples are), its
    endpoint, and the value of each chosen outcome (a byte saying what kind of value, and a float when it is a
    number): a large bundle's rows are never held (see :class:`assay.reports.rowfile.RowFile`), and a row costs a
    few dozen bytes.
    """

    def __init__(self, chosen: Sequence[Outcome], fields: Sequence[str]) -> None:
        self._chosen = chosen
        self._columns = {name: _Column() for name in (*fields, "endpoint")}
        self._endpoints = self._columns["endpoint"]
        self._kinds = [array("b") for _ in chosen]
        self._numbers: list[array[float] | None] = [None for _ in chosen]  # made at the first number
        self._aside: dict[tuple[int, int], Any] = {}  # (outcome, row): a value of another type, or what was raised
        self.codes: np.ndarray | None = None  # set by _encode_keys once every row is in

    def add(self, row: Row, values: _KeyValues) -> None:
        """Keep what the comparison needs of ``row``, its key values numbered by ``values``."""
        position = len(self._endpoints)
        key = row["key"]
        for field, column in self._columns.items():
            column.append(values.number(field, key.get(field)))
        for number, outcome in enumerate(self._chosen):
            try:
                value = outcome.of(row)
            except Exception as exc:  # noqa: BLE001 - kept, and raised only if a comparison reads this value
                value = _Raised(exc)
            kind, stored = _encoded(value)
            if kind == _ASIDE:
                self._aside[number, position] = value
            self._kinds[number].append(kind)
            if kind in (_FLOAT, _INT):
                self._numbers_of(number)[position] = stored

    def _numbers_of(self, outcome: int) -> array[float]:
        numbers = self._numbers[outcome]
        if numbers is None:
            numbers = self._numbers[outcome] = array("d", bytes(8 * len(self._endpoints)))
        elif len(numbers) < len(self._endpoints):
            numbers.frombytes(bytes(8 * (len(self._endpoints) - len(numbers))))
        return numbers

    def __len__(self) -> int:
        return len(self._endpoints)

    def field(self, name: str) -> np.ndarray:
        """The number of each row's value of the key field ``name`` (see :class:`_KeyValues`)."""
        return self._columns[name].as_array()

    def keep_fields(self, names: Iterable[str]) -> None:
        """Let go of the numbers of every key field but ``names`` (once the keys are coded, only a few are asked)."""
        self._columns = {name: column for name, column in self._columns.items() if name in names}

    def kinds(self, outcome: int, positions: np.ndarray) -> np.ndarray:
        """What kind of value the chosen outcome at ``outcome`` gave for the rows at ``positions``."""
        import numpy as np

        kinds: np.ndarray = np.frombuffer(self._kinds[outcome], dtype=np.int8)[positions]
        return kinds

    def odd(self, outcome: int) -> bool:
        """True when some row's value of the chosen outcome at ``outcome`` is kept aside (or raised)."""
        return any(number == outcome for number, _ in self._aside)

    def value(self, outcome: int, position: int) -> Any:
        """The value of the chosen outcome at ``outcome`` for the row kept at ``position``, as ``of`` gave it."""
        kind = self._kinds[outcome][position]
        if kind in (_FLOAT, _INT):
            number = self._numbers_of(outcome)[position]  # there since the row's number was kept
            return number if kind == _FLOAT else int(number)
        if kind == _ASIDE:
            value = self._aside[outcome, position]
            if isinstance(value, _Raised):
                raise value.error
            return value
        return None if kind == _NONE else kind == _TRUE


def _encode_keys(selections: Sequence[_Selection], values: _KeyValues, fields: Sequence[str]) -> None:
    """Give every row of every selection one integer code for its pair key, ordered as the key tuples are.

    A mixed-radix number of the ranks of its field values; when one more field would overflow, the codes so far are
    renumbered densely first (their order kept), so however many distinct values the fields have, a code is below
    the number of rows times the next field's distinct values.
    """
    import numpy as np

    codes = [np.zeros(len(selection), dtype=np.int64) for selection in selections]
    top = 1  # every code is below this
    for field in fields:
        ranks = values.ranks(field)
        radix = max(1, len(ranks))
        if top * radix >= _CODE_LIMIT:
            distinct, inverse = np.unique(np.concatenate(codes), return_inverse=True)
            codes = np.split(inverse.reshape(-1).astype(np.int64), np.cumsum([len(code) for code in codes])[:-1])
            top = len(distinct)
        for selection, code in zip(selections, codes, strict=True):
            code *= radix
            code += ranks[selection.field(field)]
        top *= radix
    for selection, code in zip(selections, codes, strict=True):
        selection.codes = code
        selection.keep_fields(("case_id", "endpoint"))  # what kinds, families and task blocks are found by


def _repeats(selection: _Selection) -> bool:
    """True when two rows of the selection have the same pair key."""
    import numpy as np

    assert selection.codes is not None
    ordered = np.sort(selection.codes)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _first_repeat(rows: Iterable[Row], selectors: Sequence[tuple[str, Selector]], pair_on: Sequence[str]) -> NoReturn:
    """Raise naming the first row, in the bundle's order, whose pair key an earlier row of its selection has."""
    seen: list[set[tuple[Any, ...]]] = [set() for _ in selectors]
    for row in rows:
        for (role, selector), keys in zip(selectors, seen, strict=True):
            if selector.matches(row):
                key = tuple(row["key"].get(name) for name in pair_on)
                if key in keys:
                    raise AssayError(
                        f"{role} {selector}: two rows share the key {dict(zip(pair_on, key, strict=True))} "
                        "(run 'assay validate')"
                    )
                keys.add(key)
    raise AssayError("two rows of a selection share a pair key (run 'assay validate')")  # the rows changed under us


def _selections(
    rows: Iterable[Row], selectors: Sequence[tuple[str, Selector]], pair_on: Sequence[str], chosen: Sequence[Outcome]
) -> tuple[list[_Selection], _KeyValues]:
    """One walk of the rows: for each (role, selector), the rows it matched, each with its pair key's code."""
    values = _KeyValues(pair_on)
    selections = [_Selection(chosen, pair_on) for _ in selectors]
    for row in rows:
        for (_, selector), selection in zip(selectors, selections, strict=True):
            if selector.matches(row):
                selection.add(row, values)
    _encode_keys(selections, values, pair_on)
    if any(_repeats(selection) for selection in selections):
        _first_repeat(rows, selectors, pair_on)  # a second walk, only to name the repeat as the bundle orders it
    return selections, values


@dataclass(frozen=True)
class _Pairs:
    """Rows of A and of one B paired by key: positions in each selection, in the order of their sorted keys."""

    a: _Selection
    b: _Selection
    at_a: np.ndarray
    at_b: np.ndarray

    def where(self, keep: np.ndarray) -> _Pairs:
        """The pairs for which ``keep`` (one bool a pair) is true, in the same order."""
        return _Pairs(self.a, self.b, self.at_a[keep], self.at_b[keep])

    def __len__(self) -> int:
        return len(self.at_a)

    def values(self, outcome: int) -> tuple[_Pairs, list[Any], list[Any]]:
        """The pairs where both rows carry the chosen outcome at ``outcome`` (not None), and its values in each.

        Values come back as the outcome gave them; a value whose outcome raised is raised again here, the first in
        key order (A's before B's), as reading the pairs one by one would."""
        import numpy as np

        if self.a.odd(outcome) or self.b.odd(outcome):
            both = [
                (self.a.value(outcome, x), self.b.value(outcome, y))
                for x, y in zip(self.at_a.tolist(), self.at_b.tolist(), strict=True)
            ]
            keep = [x is not None and y is not None for x, y in both]
            carried = [pair for pair, wanted in zip(both, keep, strict=True) if wanted]
            return self.where(np.array(keep, dtype=bool)), [x for x, _ in carried], [y for _, y in carried]
        kinds_a, kinds_b = self.a.kinds(outcome, self.at_a), self.b.kinds(outcome, self.at_b)
        kept = self.where((kinds_a != _NONE) & (kinds_b != _NONE))
        return kept, _decoded(kept.a, outcome, kept.at_a), _decoded(kept.b, outcome, kept.at_b)


def _decoded(selection: _Selection, outcome: int, positions: np.ndarray) -> list[Any]:
    """The values (none of them None, raised or aside) of the chosen outcome at ``outcome`` at ``positions``."""
    import numpy as np

    kinds = selection.kinds(outcome, positions)
    if np.all((kinds == _TRUE) | (kinds == _FALSE)):
        truths: list[Any] = (kinds == _TRUE).tolist()  # the usual binary outcome: no number kept at all
        return truths
    return [selection.value(outcome, position) for position in positions.tolist()]


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
    import numpy as np

    roles = [("--a", a), *(("--b", b) for b in bs)]
    (a_rows, *b_selections), key_values = _selections(rows, roles, pair_on, chosen)  # one walk for A and every B
    for (role, selector), selection in zip(roles, [a_rows, *b_selections], strict=True):
        if not len(selection):
            raise UsageError(f"{role} {selector} matches no rows ({_available(rows)})")
    families = _endpoint_families(key_values.values("endpoint"), endpoint_families or {})
    # An outcome over some kinds of case pairs only those: whether it applies, by case number.
    applies: dict[int, np.ndarray] = {}
    if any(outcome.kinds for outcome in chosen):
        distinct_kinds, kind_of_case = _case_kinds(key_values.values("case_id"), kinds)
        for position, outcome in enumerate(chosen):
            if outcome.kinds:
                wanted = np.array([in_kinds(kind, outcome.kinds) for kind in distinct_kinds], dtype=bool)
                applies[position] = wanted[kind_of_case]
    key_values.release("case_id")
    pairings, pending, no_pairs, scores = [], [], [], []
    for b, b_rows in zip(bs, b_selections, strict=True):
        all_pairs = _paired(a_rows, b_rows)
        if not len(all_pairs):
            raise UsageError(f"--a {a} and --b {b} share no work item (pairs agree on {', '.join(pair_on)})")
        unpaired_a, unpaired_b = len(a_rows) - len(all_pairs), len(b_rows) - len(all_pairs)
        pairings.append(Pairing(str(b), len(a_rows), len(b_rows), len(all_pairs), unpaired_a, unpaired_b))
        for position, outcome in enumerate(chosen):
            paired = all_pairs
            if position in applies:
                paired = all_pairs.where(applies[position][a_rows.field("case_id")[all_pairs.at_a]])
            if outcome.scale == "score":
                found = _scores(outcome, position, paired, key_values, str(b), resamples, seed)
                scores.extend(found)
                if not found and outcomes:
                    no_pairs.append((str(b), outcome.name))
                continue
            groups = _by_model_family(paired, families)
            for family, group in groups:
                kept, xs, ys = group.values(position)
                if not xs:
                    if outcomes and len(groups) == 1:
                        no_pairs.append((str(b), outcome.name))
                    continue
                test = mcnemar_from_pairs(xs, ys)
                as_a, as_b = np.array(xs, dtype=float), np.array(ys, dtype=float)
                boot = paired_bootstrap_diff(as_a, as_b, n_resamples=resamples, confidence=confidence, seed=seed)
                # Task-blocked: one mean difference per task (case), so seeds of one task never count as independent.
                blocks = ranked_task_differences(_case_ranks(kept, key_values), as_a, as_b)
                permutation = sign_permutation_test(blocks, n_permutations=resamples, seed=seed)
                pending.append(
                    (
                        str(b),
                        outcome.name,
                        len(xs),
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
        len(a_rows),
        pair_on,
        seed,
        resamples,
        confidence,
        tuple(pairings),
        comparisons,
        tuple(no_pairs),
        scores=tuple(scores),
    )


def _case_kinds(case_ids: Iterable[Any], kinds: Mapping[str, str]) -> tuple[list[str], np.ndarray]:
    """The distinct kinds of the cases, and each case's kind by its number: one lookup a case, however many outcomes
    ask (a case not in ``kinds`` is of kind "unknown")."""
    import numpy as np

    numbered: dict[str, int] = {}
    of_case = np.fromiter(
        (numbered.setdefault(kinds.get(str(case_id), "unknown"), len(numbered)) for case_id in case_ids), dtype=np.int64
    )
    return list(numbered), of_case


def _paired(a_rows: _Selection, b_rows: _Selection) -> _Pairs:
    """The rows of A and B with the same pair key, in the order of their sorted keys (codes are unique within each)."""
    import numpy as np

    assert a_rows.codes is not None and b_rows.codes is not None
    _, at_a, at_b = np.intersect1d(a_rows.codes, b_rows.codes, assume_unique=True, return_indices=True)
    return _Pairs(a_rows, b_rows, at_a, at_b)


def _case_ranks(pairs: _Pairs, key_values: _KeyValues) -> np.ndarray:
    """Each pair's case as its rank among the cases in sorted order: what task blocking groups and orders by."""
    ranks: np.ndarray = key_values.ranks("case_id")[pairs.a.field("case_id")[pairs.at_a]]
    return ranks


def _endpoint_families(endpoints: Iterable[Any], families: Mapping[str, str]) -> list[str] | None:
    """Each endpoint's model family, by its number in the key table (an endpoint without one is its own); None when
    the endpoints name no family."""
    if not families:
        return None
    return [families.get(str(endpoint), str(endpoint)) for endpoint in endpoints]


def _by_model_family(pairs: _Pairs, families: Sequence[str] | None) -> list[tuple[str, _Pairs]]:
    """The pairs by model family: one group of them all, labelled "", when the endpoints name no family or all pairs
    share one; a pair whose A and B endpoints are of different families is labelled "A-family vs B-family"."""
    import numpy as np

    if families is None:
        return [("", pairs)]
    of_a = pairs.a.field("endpoint")[pairs.at_a]
    of_b = pairs.b.field("endpoint")[pairs.at_b]
    combined = of_a.astype(np.int64) * len(families) + of_b
    labels: dict[str, np.ndarray] = {}
    for code in np.unique(combined).tolist():
        family_a, family_b = families[code // len(families)], families[code % len(families)]
        label = family_a if family_a == family_b else f"{family_a} vs {family_b}"
        found = combined == code
        labels[label] = labels[label] | found if label in labels else found
    if len(labels) == 1:
        return [("", pairs)]
    return [(label, pairs.where(keep)) for label, keep in sorted(labels.items())]


def _scores(
    outcome: Outcome,
    position: int,
    pairs: _Pairs,
    key_values: _KeyValues,
    b: str,
    resamples: int,
    seed: int,
) -> list[ScoreComparison]:
    """The comparison of a score outcome for one B, when both rows of some pairs carry it."""
    import numpy as np

    kept, values_a, values_b = pairs.values(position)
    if not values_a:
        return []
    xs, ys = [float(x) for x in values_a], [float(y) for y in values_b]
    blocks = ranked_task_differences(_case_ranks(kept, key_values), np.array(xs), np.array(ys))
    test = sign_permutation_test(blocks, n_permutations=resamples, seed=seed)
    mean_a, mean_b = sum(xs) / len(xs), sum(ys) / len(ys)
    return [ScoreComparison(b, outcome.name, len(kept), len(blocks), mean_a, mean_b, mean_b - mean_a, test.p_value)]
