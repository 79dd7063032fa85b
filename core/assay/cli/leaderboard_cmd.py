"""``assay leaderboard``: submit bundles to a registry and build its static site."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click

from . import get_host


@click.group("leaderboard")
def leaderboard_command() -> None:
    """Leaderboards of the tracks packs declare, from bundles a registry accepted."""


@leaderboard_command.command("submit")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--registry",
    "registry",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The registry directory (packs.json, bundles/).",
)
@click.option("--track", help="Submit for this track only (default: every track the bundle covers).")
@click.option(
    "--at",
    "at",
    help="Record this submission time (ISO 8601, UTC) instead of now: for reproducible registries.",
)
@click.pass_context
def submit_command(ctx: click.Context, bundle: Path, registry: Path, track: str | None, at: str | None) -> None:
    """Validate BUNDLE completely (exec replay included) and, if it passes, store and list it.

    Refused when it does not validate, its pack is not in the registry, an
    endpoint is scripted, or it covers no track completely: every reason is
    printed, one per line, and the exit status is 1.
    """
    from ..errors import UsageError
    from ..leaderboard import submit_bundle

    when = None
    if at is not None:
        try:
            when = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--at {at!r}: not an ISO 8601 time such as 2026-12-01T12:00:00Z") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
    result = submit_bundle(bundle, registry, get_host(ctx), track=track, at=when)
    if not result.accepted:
        for reason in result.reasons:
            click.echo(f"{bundle}: {reason}")
        click.echo(
            f"{bundle}: refused ({len(result.reasons)} reason{'s' if len(result.reasons) != 1 else ''})", err=True
        )
        ctx.exit(1)
    record = result.record
    assert record is not None
    tracks = ", ".join(t["id"] for t in record["tracks"])
    click.echo(f"{bundle}: accepted as {record['digest']} for {tracks} ({record['file']})", err=True)


@leaderboard_command.command("build")
@click.option(
    "--registry",
    "registry",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The registry directory.",
)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Site folder.")
@click.pass_context
def build_command(ctx: click.Context, registry: Path, out: Path) -> None:
    """Write the static leaderboard site of REGISTRY into OUT: a page per pack and track, reports, JSON."""
    from ..leaderboard import build_site

    pages = build_site(registry, out, get_host(ctx))
    click.echo(f"{out}: {len(pages) - 1} track page{'s' if len(pages) != 2 else ''}; open {pages[0]}", err=True)
