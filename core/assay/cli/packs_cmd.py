"""``assay packs``: the installed case packs."""

from __future__ import annotations

import json

import click

from ..errors import AssayError
from . import get_host
from ._table import render_table


@click.command("packs")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def packs_command(ctx: click.Context, as_json: bool) -> None:
    """List installed case packs: name, version, digest, cases."""
    host = get_host(ctx)
    rows = []
    for registration in host.registry.registrations():
        if registration.kind != "packs":
            continue
        pack = registration.component
        try:
            manifest = pack.manifest
            row = {
                "name": pack.name,
                "version": pack.version,
                "digest": manifest.get("digest"),
                "cases": len(manifest.get("cases", [])),
                "spec_version": manifest.get("spec_version"),
                "distribution": registration.distribution,
                "path": str(pack.root),
            }
        except AssayError as exc:
            row = {
                "name": registration.name,
                "version": None,
                "digest": None,
                "cases": None,
                "error": str(exc),
                "distribution": registration.distribution,
                "path": str(pack.root),
            }
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    columns = ("name", "version", "digest", "cases")
    click.echo(
        render_table(columns, [[str(row.get(c) if row.get(c) is not None else "-") for c in columns] for row in rows])
    )
