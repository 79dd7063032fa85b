"""The social pack: six helpdesk conversations, published apart from the design that runs them."""

from __future__ import annotations

from pathlib import Path

from assay.api import Pack, hookimpl

PACK_DIR = Path(__file__).resolve().parent / "pack"


@hookimpl
def register_packs(register) -> None:
    """Register the pack shipped with this distribution."""
    register(Pack.from_directory(PACK_DIR))
