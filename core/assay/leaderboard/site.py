"""``assay leaderboard build``: a static site of every track, from the registry's accepted bundles.

No server and no external assets: one HTML page per pack and track, an index,
each accepted bundle's report, and the same data as ``leaderboard.json``.
Every number is recomputed from the stored bundles (their rows give each
entry's per-row outcomes), never copied from the index:

* entries are ranked by the track's metric in its direction (ties: the
  narrower Wilson interval, then the name);
* each shows its Wilson 95% interval, and the exact McNemar p-value against
  the next entry down, paired on the work items both ran (case, seed, epoch,
  protocol), with the discordant counts;
* provenance: model, backend, the run's engine and judge, the signer's key
  fingerprint (or "unsigned"), the submission time, the bundle digest and a
  link to its report.

The pages are escaped throughout (a bundle names its own endpoints and
models) and carry the ranking in a table (``id="ranking"``, one ``tr`` per
entry with ``data-rank``, ``data-entry`` and ``data-value``) that a browser
test reads from the DOM.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bundle import write_bytes_atomic
from ..errors import UsageError
from ..judging import judge_text
from ..plugins import PluginHost
from ..stats import mcnemar_exact
from .submit import read_index
from .tracks import Entry, Track, entries_for

__all__ = ["RankedEntry", "build_site", "rank_entries"]


@dataclass(frozen=True)
class RankedEntry:
    """One entry on a track's page."""

    rank: int
    bundle: Mapping[str, Any]
    entry: Entry
    model: str
    backend: str
    engine: str
    judges: str
    versus_next: tuple[int, int, int, float] | None  # (paired items, this-only hits, next-only hits, p)
    also: Mapping[str, float | None]  # the track's other metrics for this entry

    @property
    def name(self) -> str:
        """How the entry is named: model, endpoint and condition."""
        return f"{self.model} ({self.entry.endpoint}, {self.entry.condition})"


def rank_entries(
    track: Track,
    found: Sequence[tuple[Mapping[str, Any], Mapping[str, Any], Entry]],
    also: Mapping[tuple[str, str, str], Mapping[str, float | None]] | None = None,
) -> list[RankedEntry]:
    """Order ``(bundle record, run manifest, entry)`` triples for ``track`` and pair each with the next.

    ``also`` gives, per (bundle digest, endpoint, condition), the track's other metrics.
    """
    sign = 1 if track.direction == "lower" else -1

    def order(item: tuple[Mapping[str, Any], Mapping[str, Any], Entry]) -> tuple[Any, ...]:
        _, run, entry = item
        low, high = entry.interval
        value = entry.value if entry.value is not None else (2.0 if sign == 1 else -1.0)
        return (sign * value, high - low, _model(run, entry.endpoint), entry.endpoint, entry.condition)

    ordered = sorted(found, key=order)
    ranked = []
    for position, (record, run, entry) in enumerate(ordered):
        versus = None
        if position + 1 < len(ordered):
            other = ordered[position + 1][2]
            shared = sorted(set(entry.outcomes) & set(other.outcomes))
            b = sum(1 for key in shared if entry.outcomes[key] and not other.outcomes[key])
            c = sum(1 for key in shared if other.outcomes[key] and not entry.outcomes[key])
            versus = (len(shared), b, c, mcnemar_exact(b, c))
        judges = "; ".join(judge_text(j) for j in run.get("judges", []) if isinstance(j, dict)) or "none"
        ranked.append(
            RankedEntry(
                rank=position + 1,
                bundle=record,
                entry=entry,
                model=_model(run, entry.endpoint),
                backend=str(_endpoint(run, entry.endpoint).get("backend", "")),
                engine=f"{run.get('engine', {}).get('name', '')} {run.get('engine', {}).get('version', '')}".strip(),
                judges=judges,
                versus_next=versus,
                also=(also or {}).get((str(record.get("digest")), entry.endpoint, entry.condition), {}),
            )
        )
    return ranked


def _endpoint(run: Mapping[str, Any], endpoint: str) -> Mapping[str, Any]:
    return next((e for e in run.get("endpoints", []) if e.get("id") == endpoint), {})


def _model(run: Mapping[str, Any], endpoint: str) -> str:
    return str(_endpoint(run, endpoint).get("model", {}).get("name") or endpoint)


def build_site(registry: Path, out: Path, host: PluginHost) -> list[Path]:
    """Write the site for ``registry`` into ``out``; returns the pages written (index first)."""
    from ..reports import read_bundle, recompute, render_html
    from ..reports._load import case_kinds

    index = read_index(registry)
    loaded: list[tuple[Mapping[str, Any], Any]] = []
    for record in index["bundles"]:
        stored = registry / str(record.get("file", ""))
        if not stored.is_file() or not stored.resolve().is_relative_to(registry.resolve()):
            raise UsageError(f"{registry}: the index lists {record.get('file')}, which is not a file of the registry")
        files = read_bundle(stored)
        if _digest(files.manifest) != record.get("digest"):
            raise UsageError(f"{stored}: its bundle.json is not the accepted one ({record.get('digest')})")
        loaded.append((record, files))
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for record, files in loaded:
        report = out / "reports" / f"{_slug(record['digest'])}.html"
        report.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(report, render_html(recompute(files, host.registry)).encode())
    boards: dict[tuple[str, str, str], tuple[Track, list[tuple[Mapping[str, Any], Mapping[str, Any], Entry]]]] = {}
    shown: dict[tuple[str, str, str], dict[str, float | None]] = {}
    for record, files in loaded:
        pack = record["pack"]
        for definition in record.get("tracks", []):
            track = Track.from_mapping(definition, definition.get("cases", []))
            metric = host.registry.get("metrics", track.rank_by)
            if metric is None or not callable(getattr(metric, "outcome", None)):
                raise UsageError(f"track {track.id} ranks by {track.rank_by}, which this assay cannot compute")
            board_key = (str(pack["name"]), str(pack["version"]), track.id)
            board = boards.setdefault(board_key, (track, []))
            kinds = case_kinds(files, host.registry)
            board[1].extend((record, files.run, entry) for entry in entries_for(track, metric, files.rows, kinds))
            shown.update(_also(track, files, str(record.get("digest")), host))
    data: dict[str, Any] = {"tracks": []}
    pages = []
    for (pack_name, version, track_id), (track, found) in sorted(boards.items()):
        ranked = rank_entries(track, found, shown)
        page = out / _slug(pack_name) / f"{_slug(track_id)}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(page, _track_page(pack_name, version, track, ranked).encode())
        pages.append((pack_name, version, track, page, ranked))
        data["tracks"].append(_track_json(pack_name, version, track, ranked))
    home = out / "index.html"
    write_bytes_atomic(home, _index_page(pages, out).encode())
    write_bytes_atomic(out / "leaderboard.json", (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    written = [home, *(page for *_, page, _ in pages)]
    return written


def _also(
    track: Track, files: Any, digest: str, host: PluginHost
) -> dict[tuple[str, str, str], dict[str, float | None]]:
    """The track's other metrics per (digest, endpoint, condition), computed by their plugins on its rows."""
    from ..components import MetricContext

    wanted = set(track.cases)
    rows = [row for row in files.rows if row["key"]["case_id"] in wanted]
    found: dict[tuple[str, str, str], dict[str, float | None]] = {}
    context = MetricContext(plan=files.run.get("plan", {}))
    for name in track.also:
        metric = host.registry.get("metrics", name)
        if metric is None:
            continue
        for value in metric.compute(rows, context):
            group = dict(value.group)
            if set(group) == {"endpoint", "condition"}:
                cell = found.setdefault((digest, str(group["endpoint"]), str(group["condition"])), {})
                cell[name] = value.value
    return found


def _digest(manifest: Mapping[str, Any]) -> str:
    from ..hashing import digest_document

    return digest_document(manifest)


def _slug(text: str) -> str:
    """A file name from an identifier or digest (identifiers are [A-Za-z0-9._-]; anything else is replaced)."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in text.replace("sha256:", "sha256-"))
    return cleaned.strip(".") or "_"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:100rem;padding:0 1rem;color:#1b1b1b}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.92rem}th,td{border-bottom:1px solid #ddd;padding:.4rem .5rem;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:.85em}.muted{color:#666}
"""


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _track_page(pack: str, version: str, track: Track, ranked: list[RankedEntry]) -> str:
    e = html.escape
    rows = []
    for item in ranked:
        low, high = item.entry.interval
        versus = "last entry"
        if item.versus_next is not None:
            pairs, b, c, p = item.versus_next
            versus = f"p = {p:.3g} ({b} vs {c} discordant of {pairs} paired items)"
        signer = item.bundle.get("signer")
        digest = str(item.bundle.get("digest"))
        rows.append(
            f'<tr data-rank="{item.rank}" data-entry="{e(item.name)}" data-value="{_number(item.entry.value)}">'
            f'<td class="num">{item.rank}</td><td>{e(item.model)}<br><span class="muted">endpoint '
            f"{e(item.entry.endpoint)}, condition {e(item.entry.condition)}</span></td>"
            f'<td class="num">{_number(item.entry.value)}</td><td class="num">[{low:.3f}, {high:.3f}]</td>'
            f'<td class="num">{item.entry.hits}/{item.entry.n}</td><td>{e(versus)}</td>'
            + "".join(f'<td class="num">{_number(item.also.get(name))}</td>' for name in track.also)
            + f"<td>{e(item.backend)}; {e(item.engine)}; judge {e(item.judges)}</td>"
            f"<td>{'key <code>' + e(str(signer)[:19]) + '…</code>' if signer else 'unsigned'}</td>"
            f"<td>{e(str(item.bundle.get('submitted_at')))}</td>"
            f'<td><a href="../reports/{e(_slug(digest))}.html">report</a><br><code>{e(digest[:19])}…</code></td></tr>'
        )
    better = "lower is better" if track.direction == "lower" else "higher is better"
    body = (
        f'<p><a href="../index.html">All tracks</a></p><h1>{e(track.title)}</h1>'
        f"<p>Pack <code>{e(pack)} {e(version)}</code>, track <code>{e(track.id)}</code>: {e(track.description)}</p>"
        f"<p>Ranked by <code>{e(track.rank_by)}</code> ({better}) over {len(track.cases)} cases, stages "
        f"{e(', '.join(track.stages))}. Intervals are Wilson 95%; each p-value is the exact McNemar test against "
        "the next entry, on the work items both ran.</p>"
        '<div class="scroll"><table id="ranking"><thead><tr><th>Rank</th><th>Entry</th><th>Value</th>'
        "<th>95% interval</th>"
        "<th>n</th><th>vs next</th>"
        + "".join(f"<th><code>{e(name)}</code></th>" for name in track.also)
        + "<th>Provenance</th><th>Signer</th><th>Submitted</th><th>Bundle</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return _document(f"{pack} {track.id}: assay leaderboard", body)


def _track_json(pack: str, version: str, track: Track, ranked: list[RankedEntry]) -> dict[str, Any]:
    return {
        "pack": pack,
        "version": version,
        "track": track.to_json(),
        "entries": [
            {
                "rank": item.rank,
                "model": item.model,
                "endpoint": item.entry.endpoint,
                "condition": item.entry.condition,
                "value": item.entry.value,
                "numerator": item.entry.hits,
                "denominator": item.entry.n,
                "interval": list(item.entry.interval),
                "versus_next": None
                if item.versus_next is None
                else dict(zip(("paired", "this_only", "next_only", "p"), item.versus_next, strict=True)),
                "backend": item.backend,
                "engine": item.engine,
                "judges": item.judges,
                "also": dict(item.also),
                "signer": item.bundle.get("signer"),
                "submitted_at": item.bundle.get("submitted_at"),
                "bundle": item.bundle.get("digest"),
                "report": f"reports/{_slug(str(item.bundle.get('digest')))}.html",
            }
            for item in ranked
        ],
    }


def _index_page(pages: list[tuple[str, str, Track, Path, list[RankedEntry]]], out: Path) -> str:
    e = html.escape
    items = "".join(
        f'<li><a href="{e(page.relative_to(out).as_posix())}">{e(pack)} {e(version)}: {e(track.title)}</a> '
        f'<span class="muted">({len(ranked)} entries; leader: {e(ranked[0].name) if ranked else "none"})</span></li>'
        for pack, version, track, page, ranked in pages
    )
    body = "<h1>assay leaderboard</h1><p>Accepted bundles only: each validated, re-derived and replayed.</p>"
    body += f'<ul id="tracks">{items or "<li>No accepted bundles yet.</li>"}</ul>'
    return _document("assay leaderboard", body)
