"""``assay export``: a bundle's results in Inspect AI's log format or as Every Eval Ever records."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from . import get_host


@click.command("export")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["inspect", "eee"]),
    required=True,
    help="inspect: Inspect AI logs (inspect view browses them); eee: Every Eval Ever records.",
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder to write the files into."
)
@click.option(
    "--pack",
    "pack",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The bundle's pack directory (default: the installed pack), for case families and kinds.",
)
@click.pass_context
def export_command(ctx: click.Context, bundle: Path, fmt: str, out: Path, pack: Path | None) -> None:
    """Export BUNDLE (a directory or .zip) for another tool, every number recomputed from its rows.

    \b
    inspect  one Inspect AI log per endpoint and condition, one sample per work item, each
             registered outcome a score: `inspect view --log-dir OUT` browses them.
    eee      one Every Eval Ever aggregate record per endpoint and condition, under
             OUT/data/<collection>/<developer>/<model>/<uuid>.json, as its datastore files them.

    \b
    Example:
      assay export out/run1/bundle.zip --format inspect --out out/run1/inspect
    """
    from ..exports import export
    from ..reports import read_bundle, recompute

    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory; choose another --out")
    data = recompute(read_bundle(bundle), get_host(ctx).registry, pack_root=pack)
    written = export(data, fmt, out)
    click.echo(f"{bundle}: {len(written)} {fmt} file{'s' if len(written) != 1 else ''} written under {out}")
