"""Building the paired outcomes of ``assay compare`` from what a stage records (see ``register_outcomes``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["stage_field"]

Row = Mapping[str, Any]


def stage_field(stage: str, name: str, *, null_is_false: bool = False) -> Callable[[Row], bool | None]:
    """The outcome "``row.stages[stage][name]`` is true": None where the row has no such stage (the row is left out
    of the pairs), and where the field is null, None or False as ``null_is_false`` says."""

    def outcome(row: Row) -> bool | None:
        values: Mapping[str, Any] | None = row.get("stages", {}).get(stage)
        if values is None:
            return None
        value = values.get(name)
        if value is None:
            return False if null_is_false else None
        return value is True

    outcome.__qualname__ = outcome.__name__ = f"{stage}.{name}"
    return outcome
