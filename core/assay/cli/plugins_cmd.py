"""``assay plugins``: every registered component with its plugin, distribution and version."""

from __future__ import annotations

import json

import click

from . import get_host
from ._table import render_table


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def plugins_command(ctx: click.Context, as_json: bool) -> None:
    """List registered plugins: kind, name, plugin, distribution, version."""
    rows = get_host(ctx).describe()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    columns = ("kind", "name", "plugin", "distribution", "version")
    click.echo(render_table(columns, [[str(row[c] or "-") for c in columns] for row in rows]))
