"""The authbench assay case pack: registers the pack directory shipped with this distribution."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from assay import hookimpl
from assay.packs import Pack


def pack_directory() -> Path:
    """The installed pack directory (pack.yaml, cases/, fixtures/)."""
    return Path(str(resources.files(__name__) / "pack"))


@hookimpl
def register_packs(register) -> None:
    """Register the authbench pack."""
    register(Pack.from_directory(pack_directory()))
