"""The order the engine runs the registered stages of a work item in."""

from __future__ import annotations

from collections.abc import Mapping

from .components import Stage
from .errors import PluginError

__all__ = ["stage_order"]


def stage_order(stages: Mapping[str, Stage]) -> list[str]:
    """The registered stages in the order the engine runs them.

    The spec's stages first, in the spec's order, then the others by name;
    a stage is moved after every stage it needs. Raises
    :class:`~assay.errors.PluginError` when needs go round in a circle.
    """
    from .schemas import STAGES  # imported here: loading plugins, which checks the order, need not load jsonschema

    preferred = sorted(stages, key=lambda name: (STAGES.index(name) if name in STAGES else len(STAGES), name))
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(preferred):
        ready = next(
            (name for name in preferred if name not in placed and set(stages[name].needs) & set(stages) <= placed),
            None,
        )
        if ready is None:
            circle = sorted(name for name in preferred if name not in placed)
            raise PluginError(f"the stages {', '.join(circle)} need each other: no order runs them")
        order.append(ready)
        placed.add(ready)
    return order
