"""``assay pack``: tools for pack authors."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..packs import lock_manifest
from ..validate import find_pack_root


@click.group("pack")
def pack_command() -> None:
    """Tools for pack authors."""


@pack_command.command("lock")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def lock_command(path: Path) -> None:
    """Write the manifest's case and fixture lists and the pack digest from the files on disk."""
    root = find_pack_root(path)
    if root is None:
        raise UsageError(f"{path}: no pack manifest found")
    click.echo(lock_manifest(root))
