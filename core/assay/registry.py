"""The registry of known packs: name, version, spec version, digest, distribution.

``registry/packs.json`` in the repository is the source; wheels carry a copy.
:func:`verify_installed` compares every installed pack with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import AssayError, SpecError
from .hashing import is_digest
from .plugins import Registry

__all__ = ["VerifyResult", "default_index_path", "load_index", "verify_installed"]


def default_index_path() -> Path:
    """The packaged registry index, else the source checkout's ``registry/packs.json``."""
    packaged = resources.files("assay") / "_registry" / "packs.json"
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "registry" / "packs.json"


def load_index(path: Path) -> list[dict[str, Any]]:
    """The pack entries of a registry index; raises SpecError when malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path}: cannot read the registry index: {exc}") from None
    packs = data.get("packs") if isinstance(data, dict) else None
    required = ("name", "version", "spec_version", "digest", "distribution")
    if not isinstance(packs, list) or not all(isinstance(p, dict) and all(k in p for k in required) for p in packs):
        raise SpecError(f'{path}: a registry index is {{"packs": [{{{", ".join(required)}}}, ...]}}')
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(packs):
        ident = (entry["name"], entry["version"])
        if ident in seen:
            raise SpecError(f"{path}: /packs/{index}: {entry['name']} {entry['version']} is listed twice")
        seen.add(ident)
        if not is_digest(entry["digest"]):
            raise SpecError(f"{path}: /packs/{index}/digest: not a sha256:<64 hex> digest")
    return packs


@dataclass(frozen=True)
class VerifyResult:
    """The comparison of one installed pack with the registry."""

    name: str
    version: str
    status: str  # ok, mismatch, unregistered
    installed_digest: str | None
    registry_digest: str | None
    detail: str = ""

    def line(self) -> str:
        """One human-readable line."""
        head = f"{self.name} {self.version}: {self.status}"
        return f"{head}: {self.detail}" if self.detail else f"{head} ({self.installed_digest})"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return self.__dict__.copy()


def verify_installed(registry: Registry, index: list[dict[str, Any]]) -> list[VerifyResult]:
    """Recompute every installed pack's digest from its files and compare it with the index."""
    results = []
    for name, pack in registry.items("packs").items():
        try:
            version, claimed, computed = pack.version, pack.claimed_digest, pack.computed_digest()
        except AssayError as exc:
            results.append(VerifyResult(name, "?", "mismatch", None, None, f"unreadable: {exc}"))
            continue
        entries = [e for e in index if e["name"] == pack.name and e["version"] == version]
        if computed != claimed:
            results.append(
                VerifyResult(
                    name, version, "mismatch", computed, claimed, f"files give {computed}, its manifest says {claimed}"
                )
            )
        elif not entries:
            results.append(
                VerifyResult(
                    name, version, "unregistered", computed, None, "no registry entry for this name and version"
                )
            )
        elif entries[0]["digest"] != computed:
            results.append(
                VerifyResult(
                    name,
                    version,
                    "mismatch",
                    computed,
                    entries[0]["digest"],
                    f"installed {computed}, registry {entries[0]['digest']}",
                )
            )
        else:
            results.append(VerifyResult(name, version, "ok", computed, entries[0]["digest"]))
    return results
