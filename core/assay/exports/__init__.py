"""``assay export``: a bundle's results in another tool's format, so they can be browsed and shared elsewhere.

* ``inspect``: Inspect AI evaluation logs (:mod:`assay.exports.inspect_log`), one per endpoint and
  condition, which ``inspect view`` browses and ``inspect_ai.log.read_eval_log`` loads.
* ``eee``: Every Eval Ever records (:mod:`assay.exports.eee`), one aggregate record per endpoint and
  condition with its instance-level companion, laid out as the datastore wants them.

Exports are derived data: every number comes from the metric plugins over the bundle's rows (as in
``assay report``), every file is written atomically, and the same bundle gives the same files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..reports._load import ReportData

__all__ = ["FORMATS", "export"]


def _inspect(data: ReportData, out: Path) -> list[Path]:
    from .inspect_log import write_inspect_logs

    return write_inspect_logs(data, out)


def _eee(data: ReportData, out: Path) -> list[Path]:
    from .eee import write_eee_records

    return write_eee_records(data, out)


#: Format name -> writer(report data, output folder) -> the files written.
FORMATS: dict[str, Callable[[ReportData, Path], list[Path]]] = {"inspect": _inspect, "eee": _eee}


def export(data: ReportData, fmt: str, out: Path) -> list[Path]:
    """Write the recomputed bundle ``data`` in format ``fmt`` under ``out``; the paths written."""
    writer = FORMATS[fmt]
    return writer(data, out)
