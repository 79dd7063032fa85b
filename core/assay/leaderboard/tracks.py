"""Leaderboard tracks: what a pack ranks, and the entries one bundle gives a track.

A pack declares its tracks in its manifest (``leaderboard``, see the pack
schema): the cases a track covers (every case, or a named split), the stages
a submission must have run on them, the metric entries are ranked by and its
direction, and metrics shown beside it. An *entry* is one endpoint under one
condition of an accepted bundle; its headline value is the ranking metric's
rate over the track's rows, from the metric plugin's own per-row outcome, so
two entries can be paired on the same work items (McNemar).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..metrics import in_kinds
from ..stats import rate, wilson_interval

__all__ = ["Entry", "Track", "coverage_problems", "entries_for", "pair_key", "tracks_of"]


@dataclass(frozen=True)
class Track:
    """One leaderboard track of a pack."""

    id: str
    stages: tuple[str, ...]
    rank_by: str
    direction: str
    title: str = ""
    description: str = ""
    split: str | None = None
    also: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()
    seeds: tuple[int, ...] | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], cases: Sequence[str]) -> Track:
        """A track from its manifest entry; ``cases`` are the case ids it covers (sorted)."""
        return cls(
            id=str(data["id"]),
            stages=tuple(data["stages"]),
            rank_by=str(data["rank_by"]),
            direction=str(data["direction"]),
            title=str(data.get("title") or data["id"]),
            description=str(data.get("description") or ""),
            split=data.get("split"),
            also=tuple(data.get("also") or ()),
            cases=tuple(sorted(cases)),
            seeds=None if data.get("seeds") is None else tuple(sorted(int(s) for s in data["seeds"])),
        )

    def to_json(self) -> dict[str, Any]:
        """The track as the registry index records it (so the site needs no installed pack)."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "split": self.split,
            "stages": list(self.stages),
            "rank_by": self.rank_by,
            "direction": self.direction,
            "also": list(self.also),
            "cases": list(self.cases),
            "seeds": None if self.seeds is None else list(self.seeds),
        }


def tracks_of(manifest: Mapping[str, Any]) -> list[Track]:
    """The tracks a pack manifest declares, each with the case ids it covers."""
    every = sorted(str(entry["id"]) for entry in manifest.get("cases") or [])
    splits = manifest.get("splits") or {}
    tracks = []
    for data in manifest.get("leaderboard") or []:
        split = data.get("split")
        tracks.append(Track.from_mapping(data, every if split is None else [str(c) for c in splits.get(split, [])]))
    return tracks


def pair_key(key: Mapping[str, Any]) -> str:
    """The work item a row is, apart from its endpoint and condition: what two entries are paired on."""
    return f"{key['case_id']} {key['seed']} {key['epoch']} {key['protocol']}"


def coverage_problems(
    track: Track,
    run: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    case_stages: Mapping[str, Collection[str]] | None = None,
) -> list[str]:
    """Why a bundle does not cover ``track`` completely (empty when it does).

    ``case_stages`` gives the stages each case's family supports: a row must
    carry every track stage its case has (a benign case has no audit).
    """
    plan = run["plan"]
    problems = []
    missing_cases = sorted(set(track.cases) - set(plan["cases"]))
    if missing_cases:
        shown = ", ".join(missing_cases[:5]) + (f" and {len(missing_cases) - 5} more" if len(missing_cases) > 5 else "")
        problems.append(f"track {track.id}: the plan lacks {len(missing_cases)} of its cases ({shown})")
    missing_stages = [stage for stage in track.stages if stage not in plan["stages"]]
    if missing_stages:
        problems.append(f"track {track.id}: the run did not include stage {', '.join(missing_stages)}")
    if track.seeds is not None and sorted(plan["seeds"]) != list(track.seeds):
        wanted_seeds = ", ".join(map(str, track.seeds))
        problems.append(
            f"track {track.id}: the run's seeds are {', '.join(map(str, sorted(plan['seeds'])))}, "
            f"the track needs exactly {wanted_seeds}"
        )
    if problems:
        return problems
    wanted = set(track.cases)
    mine = [row for row in rows if row["key"]["case_id"] in wanted]
    failed = [row for row in mine if row.get("errors")]
    if failed:
        problems.append(f"track {track.id}: {len(failed)} of its rows recorded errors, so they were not scored")
    unstaged = [
        row
        for row in mine
        if not all(
            stage in row["stages"]
            for stage in track.stages
            if case_stages is None or stage in case_stages.get(row["key"]["case_id"], track.stages)
        )
    ]
    if unstaged and not failed:
        problems.append(f"track {track.id}: {len(unstaged)} of its rows lack a stage the track needs")
    expected = len(track.cases) * len(plan["endpoints"]) * len(plan["conditions"])
    expected *= len(plan["seeds"]) * plan["epochs"] * len(plan["protocols"])
    if len(mine) != expected:
        problems.append(f"track {track.id}: {len(mine)} rows for its cases, the plan needs {expected}")
    return problems


@dataclass(frozen=True)
class Entry:
    """One endpoint under one condition of one bundle, scored on one track."""

    endpoint: str
    condition: str
    hits: int
    n: int
    outcomes: Mapping[str, bool] = field(repr=False)

    @property
    def value(self) -> float | None:
        """The ranking rate (None without rows)."""
        return rate(self.hits, self.n)

    @property
    def interval(self) -> tuple[float, float]:
        """Its Wilson 95% interval."""
        return wilson_interval(self.hits, self.n)


def entries_for(
    track: Track, metric: Any, rows: Sequence[Mapping[str, Any]], case_kinds: Mapping[str, str] | None = None
) -> list[Entry]:
    """The entries of a bundle's rows on ``track``, by endpoint then condition, from ``metric.outcome(row)``.

    A metric over some kinds of case (its ``kinds``: an attack rate leaves the benign companions out) counts
    only those, as its value in the bundle's metrics does; ``case_kinds`` maps case ids to their kinds.
    """
    wanted = set(track.cases)
    kinds = tuple(getattr(metric, "kinds", ()) or ())
    by_entry: dict[tuple[str, str], dict[str, bool]] = {}
    for row in rows:
        key = row["key"]
        if key["case_id"] not in wanted:
            continue
        if kinds and not in_kinds((case_kinds or {}).get(key["case_id"], "unknown"), kinds):
            continue
        outcome = metric.outcome(row)
        cell = by_entry.setdefault((key["endpoint"], key["condition"]), {})
        if outcome is not None:
            cell[pair_key(key)] = bool(outcome)
    return [
        Entry(endpoint, condition, sum(outcomes.values()), len(outcomes), outcomes)
        for (endpoint, condition), outcomes in sorted(by_entry.items())
    ]
