"""``assay export``: a bundle's results in another tool's format, so they can be browsed and shared elsewhere.

* ``inspect``: Inspect AI evaluation logs (:mod:`assay.exports.inspect_log`), one per endpoint and
  condition, which ``inspect view`` browses and ``inspect_ai.log.read_eval_log`` loads.
* ``eee``: Every Eval Ever records (:mod:`assay.exports.eee`), one aggregate record per endpoint and
  condition, laid out as its datastore wants them.

Exports are derived data: every number comes from the metric plugins over the bundle's rows (as in
``assay report``), every file is written atomically, and the same bundle gives the same files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bundle import write_bytes_atomic
from ..reports._load import ReportData

__all__ = ["FORMATS", "export"]

Documents = list[tuple[str, dict[str, Any]]]


def _inspect(data: ReportData) -> Documents:
    from .inspect_log import inspect_logs

    return inspect_logs(data)


def _eee(data: ReportData) -> Documents:
    from .eee import eee_records

    return eee_records(data)


#: Format name -> the documents it makes of a bundle: (path relative to the output folder, JSON document).
FORMATS: dict[str, Callable[[ReportData], Documents]] = {"inspect": _inspect, "eee": _eee}


def export(data: ReportData, fmt: str, out: Path) -> list[Path]:
    """Write the recomputed bundle ``data`` in format ``fmt`` under ``out`` (each file atomically); the paths."""
    written = []
    for relative, document in FORMATS[fmt](data):
        path = out / relative
        write_bytes_atomic(path, (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode())
        written.append(path)
    return written
