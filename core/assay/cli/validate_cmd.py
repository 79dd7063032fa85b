"""``assay validate``: check packs, documents and bundles against the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..schemas import DOCUMENT_NAMES
from . import get_host


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable report.")
@click.option(
    "--pack",
    "pack",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Check bundles against this pack directory instead of the installed pack.",
)
@click.option(
    "--schema", type=click.Choice(DOCUMENT_NAMES), help="Treat a single document as this type instead of guessing."
)
@click.option(
    "--replay",
    is_flag=True,
    help="Also replay each exec row's recorded tool calls in a fresh sandbox (runs them confined; slower).",
)
@click.pass_context
def validate_command(
    ctx: click.Context, paths: tuple[Path, ...], as_json: bool, pack: Path | None, schema: str | None, replay: bool
) -> None:
    """Validate PATHS: pack directories, case or policy files, bundle directories or .zip files.

    Each problem is one line, FILE:LINE: /json/pointer: message, most relevant
    first. Exit 0 when everything is valid, 1 when anything is not.
    """
    registry = get_host(ctx).registry
    reports = [_validate(path, registry, pack, schema, replay) for path in paths]
    if as_json:
        click.echo(
            json.dumps({"valid": all(r.ok for r in reports), "reports": [r.to_json() for r in reports]}, indent=2)
        )
    else:
        for report in reports:
            for issue in report.ordered():
                click.echo(issue.format())
            for warning in report.warnings:
                click.echo(f"warning: {warning.format()}", err=True)
            if report.ok:
                click.echo(f"{report.target}: valid {report.kind}{_summary(report.facts)}", err=True)
                for warning in report.facts.get("health_warnings") or ():
                    click.echo(f"{report.target}: warning: {warning}", err=True)
            else:
                count = len(report.issues)
                click.echo(
                    f"{report.target}: invalid {report.kind} ({count} problem{'s' if count != 1 else ''})", err=True
                )
    ctx.exit(0 if all(r.ok for r in reports) else 1)


def _summary(facts: dict[str, Any]) -> str:
    parts = []
    if facts.get("name"):
        parts.append(f"{facts['name']} {facts.get('version')}")
    elif isinstance(facts.get("pack"), dict):
        parts.append(f"pack {facts['pack'].get('name')} {facts['pack'].get('version')}")
    if facts.get("cases") is not None:
        parts.append(f"{facts['cases']} cases")
    if facts.get("rows") is not None:
        parts.append(f"{facts['rows']} rows")
    if facts.get("metrics_checked") is not None:
        parts.append(f"{facts['metrics_checked']} claimed numbers recomputed")
    if facts.get("verdicts_rederived"):
        parts.append(f"{facts['verdicts_rederived']} verdicts re-derived")
    for fact in sorted(fact for fact in facts if fact.endswith("_rows_replayed")):
        parts.append(f"{facts[fact]} {fact.removesuffix('_rows_replayed')} rows replayed")
    if facts.get("digest"):
        parts.append(str(facts["digest"]))
    if "signer" in facts:
        parts.append(f"signed by key {facts['signer']}" if facts["signer"] else "unsigned")
    return f" ({', '.join(parts)})" if parts else ""


def _validate(path: Path, registry: Any, pack: Path | None, schema: str | None, replay: bool) -> Any:
    """One path validated; on a terminal a spinner says what is being checked (a large bundle, replayed, takes
    minutes, and a silent command looks hung)."""
    import sys

    from ..validate import validate_path

    if not sys.stderr.isatty():
        return validate_path(path, registry, pack=pack, schema=schema, replay=replay)
    from rich.console import Console

    what = "validating and replaying" if replay else "validating"
    with Console(stderr=True).status(f"assay validate: {what} {path} ..."):
        return validate_path(path, registry, pack=pack, schema=schema, replay=replay)
