"""``assay registry``: the index of known packs and accepted bundles."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import get_host


@click.group("registry")
def registry_command() -> None:
    """Work with the registry of known packs."""


@registry_command.command("verify")
@click.option(
    "--index",
    "index_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Registry index file (default: the one shipped with assay).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def verify_command(ctx: click.Context, index_path: Path | None, as_json: bool) -> None:
    """Compare installed packs' digests with the registry; exit 1 on any mismatch."""
    from ..registry import default_index_path, load_index, verify_installed

    index = load_index(index_path or default_index_path())
    results = verify_installed(get_host(ctx).registry, index)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for result in results:
            click.echo(result.line())
    ctx.exit(1 if any(r.status == "mismatch" for r in results) else 0)
