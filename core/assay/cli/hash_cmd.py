"""``assay hash``: the content digest of a pack, bundle or file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ..errors import ArchiveError, PackError, UsageError


@click.command("hash")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--canonical", is_flag=True, help="Hash a JSON/YAML document's canonical form, not its bytes.")
def hash_command(path: Path, canonical: bool) -> None:
    """Print sha256:<hex> of PATH.

    A pack directory gives the pack digest recomputed from its files; a bundle
    directory or .zip the digest of its seal (bundle.json, canonical), which is
    what the registry lists; any other file its bytes (or, with --canonical, its
    RFC 8785 canonical JSON).
    """
    from ..bundle import BUNDLE_MANIFEST
    from ..hashing import digest_file
    from ..packs import Pack
    from ..validate import extract_archive, find_pack_root

    if path.suffix.lower() == ".zip" and path.is_file():
        with tempfile.TemporaryDirectory(prefix="assay-hash-") as scratch:
            try:
                extracted = extract_archive(path, Path(scratch))
            except ArchiveError as exc:
                raise click.ClickException(f"{path}: {exc}") from None
            if not (extracted / BUNDLE_MANIFEST).is_file():
                raise click.ClickException(f"{path}: the archive holds no {BUNDLE_MANIFEST}")
            click.echo(_document_digest(extracted / BUNDLE_MANIFEST))
        return
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
    from ..documents import DocumentError, load_document
    from ..hashing import digest_document

    try:
        return digest_document(load_document(path).data)
    except DocumentError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise click.ClickException(f"{path}{line}: {exc.message}") from None
