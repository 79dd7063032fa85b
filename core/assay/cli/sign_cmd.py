"""``assay sign`` and ``assay keygen``: who answers for a submitted bundle."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("sign")
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Ed25519 private key: PEM (PKCS#8, as 'assay keygen' writes) or OpenSSH, unencrypted.",
)
def sign_command(bundle: Path, key_path: Path) -> None:
    """Sign the bundle directory BUNDLE: writes signature.json beside its bundle.json.

    The signature covers bundle.json's canonical digest, and with it every
    sealed file. Sign before zipping; `assay validate` then prints the
    signer's key fingerprint. Unsigned bundles still validate.
    """
    from ..signing import load_private_key, sign_bundle

    document = sign_bundle(bundle, load_private_key(key_path))
    click.echo(f"{bundle}: signed {document['bundle_digest']} with key {document['key_fingerprint']}")


@click.command("keygen")
@click.argument("key", type=click.Path(dir_okay=False, path_type=Path))
def keygen_command(key: Path) -> None:
    """Write a new Ed25519 private key to KEY (mode 0600, never overwriting) and print its fingerprint."""
    from ..signing import generate_key

    click.echo(f"{key}: new Ed25519 key {generate_key(key)}")
