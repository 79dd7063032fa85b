"""Work items' positions in a plan's matrix, without a table of every case.

A plan is a matrix: case x endpoint x condition x seed x epoch x protocol, in
that order. The engine's row log, the validator's duplicate check and the
paired metrics each keep a few bytes per item by its position in the matrix
instead of a dict entry per item. Finding a value's place on an axis is a
bisection when the axis is sorted (the planner sorts the cases; a plan of a
million items may have hundreds of thousands of them), and a dict only
otherwise.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["KEY_FIELDS", "PlanMatrix"]

#: The row key fields, in plan order, and the plan member each one's values are in (epochs: a count).
KEY_FIELDS = ("case_id", "endpoint", "condition", "seed", "epoch", "protocol")
_MEMBERS = {"case_id": "cases", "endpoint": "endpoints", "condition": "conditions", "seed": "seeds",
            "protocol": "protocols"}  # fmt: skip


class _Axis:
    """One axis's distinct values in order, and where each is."""

    __slots__ = ("_index", "values")

    def __init__(self, values: Sequence[Any]) -> None:
        self._index: dict[Any, int] | None = None
        self.values: Sequence[Any]
        if isinstance(values, range) and values.step > 0:  # epochs: a count, perhaps a hostile one (10^12)
            self.values = values
            return
        try:
            ordered = all(a < b for a, b in itertools.pairwise(values))
        except TypeError:
            ordered = False
        if ordered and all(type(value) in (str, int) for value in values[:1]):
            self.values = values  # strictly rising: no duplicates, and bisection finds each
            return
        index: dict[Any, int] = {}
        for value in values:
            index.setdefault(value, len(index))
        self._index, self.values = index, list(index)

    def find(self, value: Any) -> int | None:
        """The value's place on the axis, or None when it is not on it."""
        if self._index is not None:
            try:
                return self._index.get(value)
            except TypeError:  # unhashable: not on the axis
                return None
        try:
            place = bisect_left(self.values, value)
        except TypeError:
            return None
        if place < len(self.values) and _same(self.values[place], value):
            return place
        return None

    def __len__(self) -> int:
        return len(self.values)


def _same(a: Any, b: Any) -> bool:
    # As a dict would match them: equal values (1 and 1.0 alike), but a string never equals a number.
    return bool(a == b)


class PlanMatrix:
    """Positions over some of a plan's axes (all of them, in plan order, by default)."""

    def __init__(self, axes: Sequence[Sequence[Any]]) -> None:
        self._axes = [_Axis(values) for values in axes]
        self.size = 1
        for axis in self._axes:
            self.size *= len(axis)

    @classmethod
    def of_plan(cls, plan: Mapping[str, Any], fields: Sequence[str] = KEY_FIELDS) -> PlanMatrix:
        """The matrix of a plan document (a run manifest's ``plan``) over the key ``fields``; raises KeyError,
        TypeError or ValueError for a plan that does not give them."""
        axes = [range(int(plan["epochs"])) if name == "epoch" else plan[_MEMBERS[name]] for name in fields]
        if not all(isinstance(values, Sequence) and not isinstance(values, str) for values in axes):
            raise TypeError("a plan axis is not a list")
        return cls(axes)

    def position(self, values: Sequence[Any]) -> int | None:
        """The position of the item with these values (one per axis), or None when one is off its axis."""
        position = 0
        for value, axis in zip(values, self._axes, strict=True):
            place = axis.find(value)
            if place is None:
                return None
            position = position * len(axis) + place
        return position

    def find(self, axis: int, value: Any) -> int | None:
        """A value's place on one axis, or None."""
        return self._axes[axis].find(value)

    def values_at(self, position: int) -> tuple[Any, ...]:
        """The values of the item at a position (the inverse of :meth:`position`)."""
        values: list[Any] = []
        for axis in reversed(self._axes):
            position, place = divmod(position, len(axis))
            values.append(axis.values[place])
        return tuple(reversed(values))
