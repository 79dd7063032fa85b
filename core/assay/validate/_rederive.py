"""Re-deriving the verdicts a bundle records from what its rows record, not only recomputing the metrics.

Recomputing the metrics from the rows proves the numbers follow from the
verdicts; it says nothing about the verdicts. A cheater who relabels a
CoreFail row as a refusal (its recorded response still showing the leak) and
recomputes the metrics passes that check. So every stage that registered a
rederiver (:mod:`assay.rederive`) is given each row that carries it, in the
stages' order, and says which recorded verdicts the row's own record does not
give. A row whose recorded verdict differs is named with its key, its line
and the field that differs (``verdict-mismatch``); a stage whose record is in
doubt stops the stages that need it. Nothing here knows any stage: the
built-in ones bring their rederivers like a plugin's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..components import JudgeInstance, Stage
from ..judging import HostedJudge
from ..plugins import Registry
from ..rederive import NotDeterministic, RederiveSetup, key_text
from ..stage_order import stage_order
from ._report import Rank, Report

__all__ = ["Derivation", "derive_rows", "deterministic_judges", "rederiving_stages"]

#: Findings of this kind listed before the rest are summarised.
_MAX_LISTED = 20


def _no_endpoint(backend: str, options: Mapping[str, str]) -> Any:
    raise NotDeterministic


def deterministic_judges(registry: Registry) -> dict[str, JudgeInstance]:
    """An instance (default options) of every registered judge that declares ``deterministic = True``."""
    found: dict[str, JudgeInstance] = {}
    for registration in registry.registrations("judges"):
        if getattr(registration.component, "deterministic", False) is True:
            try:
                found[registration.name] = HostedJudge(registration.component.instance({}, _no_endpoint), registration)
            except Exception:  # noqa: BLE001 - plugin boundary: a judge that cannot be built is not re-derived
                continue
    return found


def rederiving_stages(registry: Registry) -> list[Stage]:
    """The registered stages with a rederiver, in the order the engine runs them."""
    stages = registry.items("stages")
    return [stages[name] for name in stage_order(stages) if stages[name].rederiver is not None]


@dataclasses.dataclass
class Derivation:
    """What re-deriving rows found: how many verdicts each line had checked, and every mismatch in line order."""

    checked: dict[int, int] = dataclasses.field(default_factory=dict)
    mismatches: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)  # (line, pointer, message)
    #: Verdicts checked on lines no longer listed in ``checked`` (a whole bundle's, summed chunk by chunk).
    counted: int = 0

    def restricted(self, lines: Iterable[int]) -> Derivation:
        """Only what was found on ``lines`` (the rows the validation accepted)."""
        keep = set(lines)
        return Derivation(
            {line: n for line, n in self.checked.items() if line in keep},
            [found for found in self.mismatches if found[0] in keep],
        )

    def report(self, report: Report, file: str) -> int:
        """Add the mismatches to ``report`` (the first few, then a count); returns how many verdicts were checked."""
        for line, pointer, message in self.mismatches[:_MAX_LISTED]:
            report.add(file, message, rank=Rank.INTEGRITY, code="verdict-mismatch", line=line, pointer=pointer)
        if len(self.mismatches) > _MAX_LISTED:
            report.add(
                file,
                f"{len(self.mismatches) - _MAX_LISTED} more rows record verdicts their own record does not give",
                rank=Rank.INTEGRITY,
                code="verdict-mismatch",
            )
        return self.counted + sum(self.checked.values())


def derive_rows(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    stages: Sequence[Stage],
    setup: RederiveSetup,
) -> Derivation:
    """Re-derive the verdicts of ``rows`` (found at ``lines``) by the rederivers of ``stages`` (in their order).

    ``case_of(case_id)`` gives a case's data (None when it cannot be had);
    it is asked only for rows that carry a stage to re-derive.
    """
    found = Derivation()
    rederivers = []
    for stage in stages:
        assert stage.rederiver is not None
        rederivers.append((stage.name, frozenset(stage.needs), stage.rederiver(setup)))
    with _collecting(), contextlib.ExitStack() as closing:
        for _, _, rederiver in rederivers:
            close = getattr(rederiver, "close", None)
            if callable(close):
                closing.callback(close)
        for row, line in zip(rows, lines, strict=True):
            try:
                count = _derive_row(row, line, case_of, rederivers, found)
            except Exception as exc:  # noqa: BLE001 - a row the engine could not have written is a finding
                why = f"{type(exc).__name__}; {_where(row)}"
                found.mismatches.append((line, "", f"the row cannot be re-derived from its own record ({why})"))
                continue
            if count:
                found.checked[line] = count
    return found


@contextlib.contextmanager
def _collecting() -> Iterator[None]:
    """The cyclic garbage collector on while plugins re-derive rows, with everything alive now frozen out of its scans.

    The validator pauses the collector while it reads rows (their JSON trees hold no cycles, and rescanning 10^4
    live rows again and again doubles the time). A stage's rederiver may leave cyclic garbage with every row (a
    library's model objects, say), which with the collector paused would stay until the process ends: memory
    would grow with the bundle. Freezing what is alive keeps the collector's scans as short as before.
    """
    paused = not gc.isenabled()
    gc.freeze()
    gc.enable()
    try:
        yield
    finally:
        if paused:
            gc.disable()
        gc.unfreeze()


_UNREAD: Any = object()


def _derive_row(
    row: Mapping[str, Any],
    line: int,
    case_of: Callable[[str], Mapping[str, Any] | None],
    rederivers: Sequence[tuple[str, frozenset[str], Any]],
    found: Derivation,
) -> int:
    """Every rederiver of a stage the row carries, in order; a stage in doubt stops the stages that need it."""
    carried = row["stages"]
    checked = 0
    stopped: set[str] = set()
    shared: dict[str, Any] = {}
    case = _UNREAD
    for name, needs, rederiver in rederivers:
        if name not in carried or needs & stopped:
            continue
        if case is _UNREAD:
            case = case_of(row["key"]["case_id"])
        result = rederiver.check(row, case, shared)
        checked += result.checked
        found.mismatches.extend((line, problem.pointer, problem.message) for problem in result.problems)
        if result.stop:
            stopped.add(name)
    return checked


def _where(row: Mapping[str, Any]) -> str:
    key = row.get("key")
    return key_text(key) if isinstance(key, Mapping) else "a row without a key"
