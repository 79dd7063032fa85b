"""``assay hash``: the content digest of a pack, bundle or file."""

from __future__ import annotations

from pathlib import Path

import click

from ..bundle import BUNDLE_MANIFEST
from ..documents import DocumentError, load_document
from ..errors import PackError, UsageError
from ..hashing import digest_document, digest_file
from ..packs import Pack
from ..validate import find_pack_root


@click.command("hash")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--canonical", is_flag=True, help="Hash a JSON/YAML document's canonical form, not its bytes.")
def hash_command(path: Path, canonical: bool) -> None:
    """Print sha256:<hex> of PATH.

    A pack directory gives the pack digest recomputed from its files; a bundle
    directory the digest of its seal (bundle.json, canonical); a file its bytes
    (or, with --canonical, its RFC 8785 canonical JSON).
    """
    if path.is_dir():
        if (path / BUNDLE_MANIFEST).is_file():
            click.echo(_document_digest(path / BUNDLE_MANIFEST))
            return
        root = find_pack_root(path)
        if root is None:
            raise UsageError(f"{path}: neither a pack nor a bundle directory")
        try:
            click.echo(Pack.from_directory(root).computed_digest())
        except PackError as exc:
            raise click.ClickException(str(exc)) from None
        return
    click.echo(_document_digest(path) if canonical else digest_file(path)[0])


def _document_digest(path: Path) -> str:
    try:
        return digest_document(load_document(path).data)
    except DocumentError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise click.ClickException(f"{path}{line}: {exc.message}") from None
