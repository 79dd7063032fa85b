"""The planner: the matrix of work items, with stable keys, in a deterministic order.

A work item is case x endpoint x condition x seed x epoch x protocol. Items
are ordered by those fields in that order, so two plans of the same inputs are
identical, and a bundle's rows can always be written back in plan order.
Subsets for quick runs are drawn here: ``limit:N`` (the first N cases) or
``stratified:N`` (N cases from every family, drawn with a recorded seed).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..plan_matrix import PlanMatrix

__all__ = [
    "Plan",
    "RunnableCases",
    "WorkItem",
    "build_plan",
    "family_of",
    "one_per_family",
    "parse_sample",
    "select_cases",
]


@dataclass(frozen=True, order=True)
class WorkItem:
    """One unit of work; its key is the result row's key."""

    case_id: str
    endpoint: str
    condition: str
    seed: int
    epoch: int
    protocol: str

    def key(self) -> dict[str, Any]:
        """The row key document."""
        return {
            "case_id": self.case_id,
            "endpoint": self.endpoint,
            "condition": self.condition,
            "seed": self.seed,
            "epoch": self.epoch,
            "protocol": self.protocol,
        }

    def ident(self) -> tuple[str, str, str, int, int, str]:
        """The key as a tuple (hashable, in key order)."""
        return (self.case_id, self.endpoint, self.condition, self.seed, self.epoch, self.protocol)

    def label(self) -> str:
        """A stable one-line name, used to seed per-item random draws."""
        return "|".join(map(str, self.ident()))


@dataclass(frozen=True)
class Plan:
    """The planned matrix, as the run manifest records it."""

    cases: tuple[str, ...]
    endpoints: tuple[str, ...]
    conditions: tuple[str, ...]
    seeds: tuple[int, ...]
    epochs: int
    protocols: tuple[str, ...]
    stages: tuple[str, ...]
    sampling: Mapping[str, Any]

    def items(self) -> Iterator[WorkItem]:
        """Every work item, in plan order (made as they are wanted: a plan of a million items holds its axes)."""
        for combo in itertools.product(
            self.cases, self.endpoints, self.conditions, self.seeds, range(self.epochs), self.protocols
        ):
            yield WorkItem(*combo)

    @functools.cached_property
    def _matrix(self) -> PlanMatrix:
        return PlanMatrix((self.cases, self.endpoints, self.conditions, self.seeds, range(self.epochs), self.protocols))

    def position(self, ident: tuple[Any, ...]) -> int | None:
        """An item's position in plan order, from its :meth:`WorkItem.ident` (None when it is not planned)."""
        return self._matrix.position(ident)

    def item_at(self, position: int) -> WorkItem:
        """The work item at a position in plan order (the inverse of :meth:`position`)."""
        return WorkItem(*self._matrix.values_at(position))

    def __len__(self) -> int:
        return (
            len(self.cases)
            * len(self.endpoints)
            * len(self.conditions)
            * len(self.seeds)
            * self.epochs
            * len(self.protocols)
        )

    def to_json(self) -> dict[str, Any]:
        """The ``plan`` member of the run manifest."""
        return {
            "cases": list(self.cases),
            "endpoints": list(self.endpoints),
            "conditions": list(self.conditions),
            "seeds": list(self.seeds),
            "epochs": self.epochs,
            "protocols": list(self.protocols),
            "stages": list(self.stages),
            "sampling": dict(self.sampling),
        }


def parse_sample(text: str | None) -> tuple[str, int] | None:
    """``stratified:N`` or ``limit:N`` (or None); raises UsageError otherwise."""
    if not text:
        return None
    strategy, _, count = text.partition(":")
    if strategy not in ("stratified", "limit") or not count.isdigit() or int(count) < 1:
        raise UsageError(f"--sample {text!r}: expected stratified:N or limit:N with N >= 1")
    return strategy, int(count)


def select_cases(
    families: Mapping[str, str],
    *,
    limit: int | None = None,
    sample: tuple[str, int] | None = None,
    sample_seed: int = 0,
) -> tuple[list[str], dict[str, Any]]:
    """Choose case ids from ``{case_id: family}``; returns them sorted and the sampling record."""
    if limit is not None and sample is not None:
        raise UsageError("use --limit or --sample, not both")
    if limit is not None:
        sample = ("limit", limit)
    ids = sorted(families)
    if sample is None:
        return ids, {"strategy": "all"}
    strategy, count = sample
    if strategy == "limit":
        return ids[:count], {"strategy": "limit", "n": count}
    rng = random.Random(sample_seed)
    by_family: dict[str, list[str]] = {}
    for case_id in ids:
        by_family.setdefault(families[case_id], []).append(case_id)
    chosen: list[str] = []
    for family in sorted(by_family):
        members = by_family[family]
        chosen += rng.sample(members, min(count, len(members)))
    return sorted(chosen), {"strategy": "stratified", "n": count, "by": "family", "seed": sample_seed}


def build_plan(
    cases: Sequence[str],
    endpoints: Sequence[str],
    conditions: Sequence[str],
    seeds: Sequence[int],
    stages: Sequence[str],
    *,
    epochs: int = 1,
    protocols: Sequence[str] = ("default",),
    sampling: Mapping[str, Any] | None = None,
) -> Plan:
    """Validate and freeze a plan; duplicates in any axis are a usage error."""
    for axis, values in (
        ("cases", cases),
        ("endpoints", endpoints),
        ("conditions", conditions),
        ("seeds", seeds),
        ("protocols", protocols),
        ("stages", stages),
    ):
        if not values:
            raise UsageError(f"the plan has no {axis}")
        if len(set(values)) != len(values):
            raise UsageError(
                f"the plan names the same {axis[:-1]} twice: "
                f"{sorted(v for v in values if list(values).count(v) > 1)[0]!r}"
            )
    if epochs < 1:
        raise UsageError("epochs must be at least 1")
    return Plan(
        tuple(cases),
        tuple(endpoints),
        tuple(conditions),
        tuple(int(s) for s in seeds),
        epochs,
        tuple(protocols),
        tuple(stages),
        dict(sampling or {"strategy": "all"}),
    )


def family_of(index: Mapping[str, Mapping[str, Any]], case_id: str) -> Any:
    """A case's family from the pack's case index (without making its entry when the index can say)."""
    family_of = getattr(index, "family_of", None)
    return family_of(case_id) if family_of is not None else index[case_id]["family"]


def one_per_family(index: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One case id of each family of the index."""
    seen: dict[Any, str] = {}
    for case_id in index:
        seen.setdefault(family_of(index, case_id), case_id)
    return list(seen.values())


class RunnableCases(Mapping[str, str]):
    """The cases of the pack that the planned stages run, id -> family: a view of the case index, not a copy (a
    pack may list hundreds of thousands)."""

    def __init__(self, index: Mapping[str, Mapping[str, Any]], families: frozenset[str]) -> None:
        self._index, self._families = index, families
        self._count = sum(1 for _ in self)

    def __getitem__(self, case_id: str) -> str:
        family = family_of(self._index, case_id)
        if family not in self._families:
            raise KeyError(case_id)
        return str(family)

    def __iter__(self) -> Iterator[str]:
        return (case_id for case_id in self._index if family_of(self._index, case_id) in self._families)

    def __len__(self) -> int:
        return self._count
