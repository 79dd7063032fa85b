"""``assay pack check``: each stage's own check of a pack's cases (see ``Stage.check_pack``).

A stage that can check its cases without a model (replaying their ground
truth with scripted agents through the real stage and sandbox, say) says so
with ``check_pack``; this runs every such stage that the pack's families
list, and gathers what they found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..components import PackCheck
from ..packs import Pack
from ..plugins import PluginHost

__all__ = ["CheckResult", "check_pack"]


@dataclass
class CheckResult:
    """What the stages checked (counts by what they name), the cases no stage checks, and the failures."""

    counts: dict[str, int] = field(default_factory=dict)
    unchecked: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every checked case passed."""
        return not self.failures


def check_pack(
    pack: Pack, host: PluginHost, *, sandbox: str = "local", concurrency: int = 8, progress: Any = None
) -> CheckResult:
    """Run every registered stage's ``check_pack`` that the pack's families list, in stage order.

    ``progress`` (an :class:`assay.engine.progress.Progress`, say) is handed to each stage's check.
    """
    from .stages import stage_order

    stages = host.registry.items("stages")
    index = pack.case_index()
    listed: set[str] = set()
    for entry in index.values():
        family = host.registry.get("families", entry["family"])
        listed.update(family.stages if family is not None else ())
    result = CheckResult()
    checked: set[str] = set()
    for name in stage_order(stages):
        stage = stages[name]
        if name not in listed or stage.check_pack is None:
            continue
        found = stage.check_pack(PackCheck(pack, host, sandbox, concurrency, progress))
        checked.update(found.checked)
        for label, count in found.counts.items():
            result.counts[label] = result.counts.get(label, 0) + count
        result.failures.extend(found.failures)
    result.unchecked = len(set(index) - checked)
    return result
