"""Provenance: the components a bundle says it used, against the ones this validator resolves.

A run manifest lists every component with its registered name, plugin
module, distribution and version. The validator recomputes with what *it*
has installed, so a component of the same name from another distribution (a
look-alike judge that records itself as ``rule``) or another version could
make a bundle agree or disagree for the wrong reason. Each used component is
therefore compared with its registration here:

* ``provenance-mismatch``: same kind and name, another plugin or distribution
  (a plugin's former names, its ``ASSAY_FORMER_NAMES``, count as its own);
* ``version-drift``: same plugin, another version (numbers that then differ
  are reported on their own, as mismatches, and this finding says why they may);
* ``provenance-missing``: a component the run used that its manifest does not list.

Components this validator does not have at all are reported by the reference
checks (``unknown-judge``, ``unknown-metric``, ...), not here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..documents import SourceDocument
from ..plugins import Registry, singular
from ._common import as_list, get
from ._report import Rank, Report

__all__ = ["check_provenance", "used_components"]

_DEFENSE_KINDS = ("defense", "prompt_condition", "permission_baseline")


def used_components(run: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of every component a run manifest says the run used (metrics come from the claims)."""
    # The pack is not here: its identity is checked by digest, which says more than where it was installed from.
    used: set[tuple[str, str]] = set()
    used |= {("judges", str(judge.get("name"))) for judge in as_list(run.get("judges")) if isinstance(judge, dict)}
    used |= {
        ("backends", str(endpoint.get("backend")))
        for endpoint in as_list(run.get("endpoints"))
        if isinstance(endpoint, dict)
    }
    used |= {
        ("defenses", str(condition.get("id")))
        for condition in as_list(run.get("conditions"))
        if isinstance(condition, dict) and condition.get("kind") in _DEFENSE_KINDS
    }
    executor = get(run, "executor", "name")
    if isinstance(executor, str):
        used.add(("executors", executor))
    sandbox = run.get("sandbox")
    if isinstance(sandbox, str) and sandbox:
        used.add(("sandboxes", sandbox.split(":", 1)[0]))  # a spec, "NAME" or "NAME:key=value,..."
    return used


def check_provenance(
    run: dict[str, Any],
    run_doc: SourceDocument,
    name: str,
    registry: Registry,
    report: Report,
    used: Iterable[tuple[str, str]],
) -> None:
    """Compare each used component's recorded provenance with this validator's registration of it."""
    listed: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    for index, entry in enumerate(as_list(run.get("plugins"))):
        if isinstance(entry, dict):
            listed.setdefault((str(entry.get("kind")), str(entry.get("name"))), (index, entry))
    for kind, component in sorted(set(used)):
        here = registry.registration(kind, component) if kind in _KINDS else None
        if here is None:
            continue
        found = listed.get((kind, component))
        label = f"{singular(kind)} {component!r}"
        if found is None:
            report.add(
                name,
                f"{label} was used but the run manifest's plugins do not say where it came from",
                rank=Rank.REFERENCE,
                code="provenance-missing",
                line=run_doc.line_of("/plugins"),
                pointer="/plugins",
            )
            continue
        index, entry = found
        pointer = f"/plugins/{index}"
        same_plugin = entry.get("plugin") in (here.plugin, *here.former_plugins)  # a plugin renamed keeps its word
        if not same_plugin or entry.get("distribution") != here.distribution:
            report.add(
                name,
                f"{label} was {entry.get('plugin')} from {entry.get('distribution')}; this validator's is "
                f"{here.plugin} from {here.distribution}: another component under the same name",
                rank=Rank.REFERENCE,
                code="provenance-mismatch",
                line=run_doc.line_of(pointer),
                pointer=pointer,
            )
        elif entry.get("version") != here.version:
            report.add(
                name,
                f"version drift: {label} was {entry.get('distribution')} {entry.get('version')}, this validator "
                f"recomputes with {here.version}; numbers that differ may differ for that reason",
                rank=Rank.REFERENCE,
                code="version-drift",
                line=run_doc.line_of(f"{pointer}/version"),
                pointer=f"{pointer}/version",
            )


_KINDS = frozenset(
    {"packs", "families", "backends", "judges", "oracles", "metrics", "sandboxes", "defenses", "executors"}
)
