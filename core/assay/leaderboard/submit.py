"""``assay leaderboard submit``: accept into a registry only a bundle that can be verified.

A bundle is accepted when every one of these holds, and refused with every
reason that does not:

1. it validates completely, exec replay included (:func:`assay.validate.validate_path`
   with ``replay=True``): seal, provenance, re-derived verdicts, completeness,
   recomputed metrics, and a signature that verifies when there is one;
2. its pack is in the registry's ``packs.json`` with the bundle's name,
   version and digest;
3. no endpoint is scripted (in the run manifest or in any row), since a
   scripted endpoint replays fixed outputs and measures no model, and no
   endpoint's answers are degenerate (:meth:`assay.health.EndpointHealth.answer_problems`:
   mostly empty, one text, or the system prompt or the condition's text read
   back, overall or under one condition), since such a model measures nothing;
4. it covers at least one of the pack's tracks completely (the one asked
   for, with ``track``): every case, stage and planned row, no row errors.

The accepted bundle is stored by digest (``bundles/sha256-<hex>.zip``, the
digest of its ``bundle.json``, as ``assay hash`` prints it) and listed in
``bundles/index.json`` with its tracks (their definitions), entries and
headline numbers, signer and submission time.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bundle import write_json_atomic, zip_bundle
from ..errors import UsageError
from ..hashing import digest_document
from ..plugins import PluginHost
from .tracks import Track, coverage_problems, entries_for, tracks_of

__all__ = ["INDEX_FILE", "PACKS_FILE", "Submission", "read_index", "submit_bundle"]

PACKS_FILE = "packs.json"
INDEX_FILE = "bundles/index.json"
_SCRIPTED_BACKENDS = frozenset({"scripted", "synthetic"})


@dataclass
class Submission:
    """The answer to one submission: accepted with its index record, or refused with every reason."""

    bundle: str
    reasons: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        """True when the bundle was stored and listed."""
        return self.record is not None


def read_index(registry: Path) -> dict[str, Any]:
    """The registry's bundle index (an empty one when there is none yet)."""
    path = registry / INDEX_FILE
    if not path.exists():
        return {"spec_version": "1.0", "bundles": []}
    from ..documents import DocumentError, load_document

    try:
        data = load_document(path).data
    except (DocumentError, OSError) as exc:
        raise UsageError(f"{path}: cannot read the registry's index: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("bundles"), list):
        raise UsageError(f"{path}: not a bundle index (no bundles list)")
    return data


def _registered_packs(registry: Path) -> list[dict[str, Any]]:
    from ..documents import DocumentError, load_document

    path = registry / PACKS_FILE
    try:
        data = load_document(path).data
    except (DocumentError, OSError) as exc:
        raise UsageError(f"{path}: cannot read the registry's packs: {exc}") from None
    packs = data.get("packs") if isinstance(data, dict) else None
    return [p for p in packs or [] if isinstance(p, dict)]


def submit_bundle(
    bundle: Path,
    registry: Path,
    host: PluginHost,
    *,
    track: str | None = None,
    at: _dt.datetime | None = None,
) -> Submission:
    """Validate ``bundle`` for the leaderboard of ``registry``; store and list it when it passes."""
    from ..reports import open_bundle, read_bundle
    from ..validate import validate_path

    if not registry.is_dir():
        raise UsageError(f"{registry}: no such registry directory")
    submission = Submission(str(bundle))
    reasons = submission.reasons
    report = validate_path(bundle, host.registry, replay=True)
    reasons += [f"validation: {issue.format()}" for issue in report.ordered()]
    if report.issues and any(issue.rank.name == "UNREADABLE" for issue in report.issues):
        return submission
    try:
        files = read_bundle(bundle)
    except Exception as exc:  # noqa: BLE001 - whatever stops the reader is one more reason, already found above
        reasons.append(f"the bundle cannot be read: {exc}")
        return submission
    identity = dict(files.pack)
    known = [
        p
        for p in _registered_packs(registry)
        if (p.get("name"), p.get("version"), p.get("digest"))
        == (identity.get("name"), identity.get("version"), identity.get("digest"))
    ]
    if not known:
        reasons.append(
            f"pack {identity.get('name')} {identity.get('version')} {identity.get('digest')} is not in "
            f"{registry / PACKS_FILE}: only registered packs have leaderboards"
        )
    scripted = sorted(
        str(e.get("id"))
        for e in files.run.get("endpoints", [])
        if e.get("scripted") or e.get("backend") in _SCRIPTED_BACKENDS
    )
    if scripted or any(row.get("scripted") for row in files.rows):
        reasons.append(
            f"scripted endpoint {', '.join(scripted) or '(in the rows)'}: a scripted endpoint replays fixed outputs "
            "and measures no model"
        )
    from ..health import endpoint_health

    for health in endpoint_health(list(files.rows), host.registry.items("outcomes")):
        problems = health.answer_problems()
        if problems:
            reasons.append(
                f"endpoint {health.endpoint} answers degenerately ({'; '.join(problems)}): a model that does not "
                "answer the cases cannot rank"
            )
    pack = host.registry.get("packs", identity.get("name"))
    tracks: list[Track] = []
    if pack is None or pack.claimed_digest != identity.get("digest"):
        reasons.append(
            f"pack {identity.get('name')} at the bundle's digest is not installed, so its tracks are unknown"
        )
    else:
        tracks = tracks_of(pack.manifest)
        if not tracks:
            reasons.append(f"pack {pack.name} declares no leaderboard tracks")
        if track is not None:
            tracks = [t for t in tracks if t.id == track]
            if not tracks:
                reasons.append(f"pack {pack.name} has no track {track!r}")
    covered: list[tuple[Track, list[str]]] = []
    uncovered: list[tuple[Track, list[str]]] = []
    case_stages: dict[str, set[str]] = {}
    if pack is not None:
        for case_id, entry in pack.case_index().items():
            family = host.registry.get("families", entry.get("family"))
            case_stages[case_id] = set(family.stages) if family is not None else set()
    for candidate in tracks:
        problems = coverage_problems(candidate, files.run, files.rows, case_stages)
        (uncovered if problems else covered).append((candidate, problems))
    if tracks and not covered:
        reasons += [problem for _, problems in uncovered for problem in problems]
    if reasons:
        return submission
    digest = digest_document(files.manifest)
    index = read_index(registry)
    if any(entry.get("digest") == digest for entry in index["bundles"]):
        reasons.append(f"bundle {digest} is already in the registry")
        return submission
    stored = f"bundles/sha256-{digest.split(':', 1)[1]}.zip"
    with open_bundle(bundle) as root:
        zip_bundle(root, registry / stored)
    when = (at or _dt.datetime.now(_dt.UTC)).astimezone(_dt.UTC)
    record = {
        "digest": digest,
        "file": stored,
        "pack": identity,
        "run_id": files.run.get("run_id"),
        "signer": report.facts.get("signer"),
        "submitted_at": when.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "tracks": [candidate.to_json() for candidate, _ in covered],
        "entries": _entries(covered, files, host),
    }
    index["bundles"].append(record)
    index["bundles"].sort(key=lambda entry: (str(entry.get("submitted_at")), str(entry.get("digest"))))
    write_json_atomic(registry / INDEX_FILE, index)
    submission.record = record
    return submission


def _entries(covered: list[tuple[Track, list[str]]], files: Any, host: PluginHost) -> list[dict[str, Any]]:
    """The headline numbers of each (track, endpoint, condition), with the endpoint's model."""
    from ..reports._load import case_kinds

    endpoints = {str(e.get("id")): e for e in files.run.get("endpoints", [])}
    records = []
    for candidate, _ in covered:
        metric = host.registry.get("metrics", candidate.rank_by)
        for entry in entries_for(candidate, metric, files.rows, case_kinds(files, host.registry)):
            low, high = entry.interval
            endpoint = endpoints.get(entry.endpoint, {})
            records.append(
                {
                    "track": candidate.id,
                    "endpoint": entry.endpoint,
                    "condition": entry.condition,
                    "model": endpoint.get("model", {}).get("name"),
                    "backend": endpoint.get("backend"),
                    "metric": candidate.rank_by,
                    "value": entry.value,
                    "numerator": entry.hits,
                    "denominator": entry.n,
                    "low": low,
                    "high": high,
                }
            )
    return records
