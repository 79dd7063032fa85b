"""Signed submissions: an Ed25519 signature over a bundle's seal.

``bundle.json`` lists every file of a bundle with its sha256, and the run
manifest and metrics by canonical digest, so signing the canonical digest of
``bundle.json`` (what ``assay hash BUNDLE`` prints) signs the whole bundle.
The signature lives beside it in ``signature.json``, which the seal does not
list (it cannot list itself):

.. code-block:: json

    {"spec_version": "1.1", "algorithm": "ed25519",
     "public_key": "<base64 of the 32-byte key>", "key_fingerprint": "sha256:<hex>",
     "bundle_digest": "sha256:<hex>", "signature": "<base64 of 64 bytes>"}

The signed message is :data:`DOMAIN` followed by the bundle digest, so a
signature made for anything else never verifies as a bundle's. A signature
says who answers for a bundle; it is not a proof that the numbers are right
(that is what the validator recomputes). The key's fingerprint is the sha256
of its raw 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bundle import BUNDLE_MANIFEST, write_json_atomic
from .documents import DocumentError, load_document
from .errors import SpecError, UsageError
from .hashing import digest_bytes, digest_document

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "DOMAIN",
    "SIGNATURE_FILE",
    "SignatureError",
    "fingerprint",
    "generate_key",
    "load_private_key",
    "read_signature",
    "sign_bundle",
    "verify_signature",
]

#: The file beside bundle.json that holds the signature.
SIGNATURE_FILE = "signature.json"
#: What every signed message starts with (domain separation).
DOMAIN = b"assay bundle signature v1\n"
_KEY_BYTES = 1 << 16


class SignatureError(SpecError):
    """A signature that does not verify, or a signature document that cannot be read."""


def fingerprint(public_key: bytes) -> str:
    """``sha256:<hex>`` of a raw 32-byte Ed25519 public key."""
    return digest_bytes(public_key)


def _raw_public(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def generate_key(path: Path) -> str:
    """Write a new Ed25519 private key to ``path`` (PEM, PKCS#8, mode 0600); returns its fingerprint.

    Never overwrites a file: an existing key may be someone's identity.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"{path}: already exists; choose a new file for the key") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return fingerprint(_raw_public(key))


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM (PKCS#8) or OpenSSH file, unencrypted; UsageError otherwise."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        with open(path, "rb") as handle:
            data = handle.read(_KEY_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the key: {exc.strerror or exc}") from None
    if len(data) > _KEY_BYTES:
        raise UsageError(f"{path}: too large to be a key")
    loaders = (serialization.load_ssh_private_key, serialization.load_pem_private_key)
    for loader in loaders if data.startswith(b"-----BEGIN OPENSSH") else reversed(loaders):
        try:
            key = loader(data, password=None)
        except (ValueError, TypeError, binascii.Error):
            continue
        except Exception:  # noqa: BLE001 - cryptography raises its own types for malformed keys
            continue
        if isinstance(key, Ed25519PrivateKey):
            return key
        raise UsageError(f"{path}: a {type(key).__name__.removesuffix('PrivateKey')} key; assay signs with Ed25519")
    raise UsageError(f"{path}: not an unencrypted Ed25519 private key (PEM or OpenSSH); 'assay keygen' makes one")


def _bundle_digest(directory: Path) -> str:
    manifest = directory / BUNDLE_MANIFEST
    if not manifest.is_file():
        raise UsageError(f"{directory}: not a bundle directory (no {BUNDLE_MANIFEST})")
    return digest_document(load_document(manifest).data)


def sign_bundle(directory: Path, key: Ed25519PrivateKey) -> dict[str, Any]:
    """Sign the bundle in ``directory``: writes ``signature.json`` beside ``bundle.json`` and returns it."""
    bundle_digest = _bundle_digest(directory)
    public = _raw_public(key)
    document = {
        "spec_version": "1.1",
        "algorithm": "ed25519",
        "public_key": base64.b64encode(public).decode(),
        "key_fingerprint": fingerprint(public),
        "bundle_digest": bundle_digest,
        "signature": base64.b64encode(key.sign(DOMAIN + bundle_digest.encode())).decode(),
    }
    write_json_atomic(directory / SIGNATURE_FILE, document)
    return document


def verify_signature(document: Any, bundle_digest: str) -> str:
    """The signer's key fingerprint when ``document`` signs ``bundle_digest``; SignatureError otherwise."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(document, dict) or document.get("algorithm") != "ed25519":
        raise SignatureError("not an Ed25519 signature document")
    try:
        public = base64.b64decode(str(document.get("public_key", "")), validate=True)
        signature = base64.b64decode(str(document.get("signature", "")), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("public_key and signature must be base64") from None
    if len(public) != 32 or len(signature) != 64:
        raise SignatureError("an Ed25519 key is 32 bytes and a signature 64")
    if document.get("key_fingerprint") != fingerprint(public):
        raise SignatureError("key_fingerprint is not the fingerprint of public_key")
    if document.get("bundle_digest") != bundle_digest:
        raise SignatureError(
            f"the signature is for bundle {document.get('bundle_digest')}, this bundle.json is {bundle_digest}"
        )
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, DOMAIN + bundle_digest.encode())
    except InvalidSignature:
        raise SignatureError("the signature does not verify with its public key (altered after signing?)") from None
    return fingerprint(public)


def read_signature(path: Path) -> Any:
    """The parsed signature document at ``path`` (bounded like every document); SignatureError if unreadable."""
    try:
        return load_document(path).data
    except (DocumentError, OSError) as exc:
        raise SignatureError(f"cannot read {path.name}: {exc}") from None
