"""Whether a pack validates, as ``assay run`` must know before any item starts, remembered per pack contents.

A run of a pack that ``assay validate`` refuses would lay down what the
validator refuses (a mail folder that climbs out of the store, SQL that
attaches a host database) or score a case the spec does not define. So the
run validates the pack first, exactly as ``assay validate`` does, and refuses
it with every finding (:class:`~assay.errors.PackInvalid`).

Validating a pack parses every case, which costs seconds for a few hundred
cases and minutes for hundreds of thousands. A verdict is therefore kept
under the user's cache directory, named by a digest of what decides it: the
pack's digest (which the run has just checked against its files), the
validator's own code and schemas, and every loaded plugin's distribution and
version. Anything that changes one of them is validated afresh; only "valid"
is kept, so a refused pack is refused with its findings every time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import PackInvalid
from ..plugins import PluginHost, Registry
from ._pack import validate_pack
from ._report import Issue, Report

__all__ = ["pack_problems", "require_valid_pack", "verdict_dir"]

#: Findings a refusal lists (the rest are counted; ``assay validate`` lists every one).
SHOWN_FINDINGS = 20


def verdict_dir() -> Path:
    """Where verdicts are kept: ``$XDG_CACHE_HOME/assay/pack-verdicts`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "assay" / "pack-verdicts"


@functools.cache
def _validator_digest() -> str:
    """A digest of the engine's code and schemas: a new validator (or any engine change) validates afresh."""
    from ..schemas import spec_dir

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for root in (package, spec_dir()):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts and path.is_file():
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _key(digest: str, registry: Registry) -> str:
    plugins: Any = [registration.describe() for registration in registry.registrations()]
    material = json.dumps({"pack": digest, "validator": _validator_digest(), "plugins": plugins}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def pack_problems(root: Path, digest: str, registry: Registry, *, label: str | None = None) -> list[Issue]:
    """The validator's findings on the pack at ``root`` (whose files were just checked to give ``digest``); empty
    when it validates.

    A pack found valid before, with the same digest, validator and plugins,
    is not validated again. Warnings do not count.
    """
    key = _key(digest, registry)
    marker = verdict_dir() / key
    if marker.is_file():
        return []
    report = Report(str(root))
    validate_pack(root, report, registry, label=label or str(root))
    if not report.ok:
        return report.ordered()
    _remember(marker, key, digest)
    return []


def require_valid_pack(root: Path, digest: str, host: PluginHost, *, label: str | None = None) -> None:
    """Validate the pack at ``root`` (whose files were just checked to give ``digest``); PackInvalid if it fails.

    A pack found valid before, with the same digest, validator and plugins,
    is not validated again. Warnings do not refuse a pack.
    """
    issues = pack_problems(root, digest, host.registry, label=label)
    if issues:
        lines = [issue.format() for issue in issues[:SHOWN_FINDINGS]]
        if len(issues) > SHOWN_FINDINGS:
            lines.append(f"... and {len(issues) - SHOWN_FINDINGS} more")
        raise PackInvalid(
            f"pack {label or root} does not validate ({len(issues)} "
            f"problem{'s' if len(issues) != 1 else ''}; first: {issues[0].format()}); nothing ran: fix the pack "
            f"(every problem: assay validate {root})",
            findings=tuple(lines),
        )


def _remember(marker: Path, key: str, digest: str) -> None:
    """Record that the pack of ``digest`` validated (under ``key``): the next run or validation skips it."""
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs the next run a validation
        marker.parent.mkdir(parents=True, exist_ok=True)
        scratch = marker.with_name(f".{key}.{os.getpid()}")
        scratch.write_text(digest + "\n")
        os.replace(scratch, marker)
