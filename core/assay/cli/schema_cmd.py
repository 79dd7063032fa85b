"""``assay schema``: the spec's JSON Schemas."""

from __future__ import annotations

import json

import click

from ..errors import UsageError


@click.command("schema")
@click.argument("name", required=False)
@click.option("--spec", "major", type=int, default=1, show_default=True, help="Major spec version.")
def schema_command(name: str | None, major: int) -> None:
    """Print the JSON Schema NAME, or list the schemas with their $id."""
    from ..schemas import DOCUMENT_NAMES, spec_schemas

    schemas = spec_schemas(major)
    if name is None:
        for document in (*DOCUMENT_NAMES, "defs"):
            click.echo(f"{document:<18} {schemas.schema(document)['$id']}")
        return
    if name not in (*DOCUMENT_NAMES, "defs"):
        raise UsageError(f"unknown schema {name!r}; one of: {', '.join((*DOCUMENT_NAMES, 'defs'))}")
    click.echo(json.dumps(schemas.schema(name), indent=2))
