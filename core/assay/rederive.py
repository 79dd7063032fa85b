"""The contract of re-deriving a stage's recorded verdicts from the rest of its row.

Recomputing a bundle's metrics proves the numbers follow from the verdicts
its rows record; it says nothing about the verdicts. So a stage whose
outcome follows deterministically from what a row records (the response, the
tool calls, the state diff, the case) may register a *rederiver*
(:attr:`assay.components.Stage.rederiver`): the validator gives it every row
of a bundle that carries the stage, and it says which recorded verdicts its
own record does not give. A cheater who relabels a verdict and recomputes the
metrics is then still refused.

``Stage.rederiver(setup)`` makes one :class:`Rederiver` per batch of rows,
from a :class:`RederiveSetup` (the registry's deterministic judges, its
oracles, the pack's files). Its ``check(row, case, shared)`` returns a
:class:`Rederived`; ``shared`` is a dict the stages of one row share (work
one stage did that the next may reuse). A problem stops the re-derivation of
the stages that need this one (their inputs are then in doubt). A rederiver
may have ``close()``, called when the batch is done.

Re-derivation trusts what a row says its actions did (the tool results, the
state diff). ``assay validate --replay`` goes further for stages that
register a *replayer* (:attr:`assay.components.Stage.replayer`): the recorded
actions are made again in a fresh sandbox, and what they give must be what
the row records (:class:`Replayer`, :class:`Replayed`).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .components import RowProblem

__all__ = [
    "MAX_CALLS_PER_ROW",
    "NotDeterministic",
    "RederiveSetup",
    "Rederived",
    "Rederiver",
    "ReplaySetup",
    "Replayed",
    "Replayer",
    "key_text",
    "run_deterministic",
]

#: The most tool calls a replayer lets one row ask to replay (the engine makes at most 8 steps per session).
MAX_CALLS_PER_ROW = 256

_T = TypeVar("_T")


@dataclass(frozen=True)
class RederiveSetup:
    """What a rederiver may use: the deterministic judges by name (built with no options), the registered oracles
    by name, and the pack's root (for a case's own files), or None without an intact pack."""

    judges: Mapping[str, Any] = field(default_factory=dict)
    oracles: Mapping[str, Any] = field(default_factory=dict)
    pack_root: Path | None = None


@dataclass(frozen=True)
class Rederived:
    """What re-deriving one stage of one row found: how many verdicts were checked, and each recorded verdict the
    row's own record does not give (``stop``: do not re-derive the stages that need this one)."""

    checked: int = 0
    problems: tuple[RowProblem, ...] = ()
    stop: bool = False


#: Nothing to re-derive in this row (its producer is not deterministic, say).
NOTHING = Rederived()


class Rederiver(Protocol):
    """Re-derives one stage's verdicts, row by row (see the module docstring)."""

    def check(self, row: Mapping[str, Any], case: Mapping[str, Any] | None, shared: dict[str, Any]) -> Rederived:
        """The stage's verdicts of ``row`` again; ``case`` is its case document, or None when the pack lacks it."""
        ...


class NotDeterministic(Exception):
    """A coroutine said to be deterministic awaited something (a model call)."""


def run_deterministic(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Drive a coroutine that never suspends (a deterministic judge's) to its result, without an event loop.

    Raises :class:`NotDeterministic` (and closes the coroutine) when it suspends.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: _T = done.value
        return result
    coroutine.close()
    raise NotDeterministic


@dataclass(frozen=True)
class ReplaySetup:
    """What a replayer may use (``assay validate --replay``): the run manifest, the registered sandboxes and oracles by
    name, and the pack's root."""

    run: Mapping[str, Any]
    sandboxes: Mapping[str, Any] = field(default_factory=dict)
    oracles: Mapping[str, Any] = field(default_factory=dict)
    pack_root: Path | None = None


@dataclass(frozen=True)
class Replayed:
    """What replaying one row found: whether it was replayed (False: the stage leaves this row out, or ``problem``
    says why it could not be), and, for a replayed row, the recorded outcome the replay does not give."""

    replayed: bool = False
    problem: RowProblem | None = None


class Replayer(Protocol):
    """Makes a row's recorded actions again, where a stage's verdicts rest on what actions did (``Stage.replayer``).

    ``unavailable`` is why nothing can be replayed (its sandbox is not installed, say), else None.
    """

    unavailable: str | None

    async def replay(self, row: Mapping[str, Any], case: Mapping[str, Any]) -> Replayed:
        """Replay one row that carries the stage."""
        ...


def key_text(key: Mapping[str, Any]) -> str:
    """A row's key as findings name it."""
    return (
        f"case {key.get('case_id')}, endpoint {key.get('endpoint')}, condition {key.get('condition')}, "
        f"seed {key.get('seed')}, epoch {key.get('epoch')}, protocol {key.get('protocol')}"
    )
