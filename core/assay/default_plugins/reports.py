"""The staged-endpoint and permission designs' main report tables, registered as report sections."""

from __future__ import annotations

from typing import Any

from ..components import ReportSection
from ..hookspecs import Register, hookimpl


def _built(function: str) -> Any:
    """``assay.reports`` builder ``function``, imported when a report is built (loading plugins stays cheap)."""

    def build(panel: Any) -> Any:
        from ..reports import _permission_tables, _tables

        module = _permission_tables if function == "permission_sections" else _tables
        return getattr(module, function)(panel)

    return build


SECTIONS = (
    ReportSection(
        "core-fail", "CoreFail@N by endpoint and defense, pooled per defense.", _built("core_fail_section"), 10
    ),
    ReportSection(
        "audit", "The core-gated harm-evidence audit accounting, with its closure.", _built("audit_section"), 20
    ),
    ReportSection("exec", "Exec outcomes by endpoint and defense, pooled per defense.", _built("exec_section"), 30),
    ReportSection(
        "core-exec-join", "CoreFail against ExecHarm on matched work items.", _built("core_exec_join_section"), 40
    ),
    ReportSection("mcnemar", "Each defense against D0 on the same work items.", _built("mcnemar_section"), 50),
    ReportSection(
        "permission",
        "Permission policies: static quality, enforced execution, errors.",
        _built("permission_sections"),
        60,
    ),
)


@hookimpl
def register_report_sections(register: Register) -> None:
    """Register the built-in main tables."""
    for section in SECTIONS:
        register(section)
