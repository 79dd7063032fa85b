"""What the judges measured on the packs' calibration sets, as ``calibration.json`` records it.

``python bench/judge_calibration.py --write`` measures every deterministic judge
(and the audit's evidence) on every half of each staged pack's calibration set
and writes the file; a test keeps it equal to a fresh measurement. A judge
class declares its own lines (``calibration``), the host records them in the
run manifest, and reports and the leaderboard show them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["MEASURED_FILE", "measured"]

MEASURED_FILE = "calibration.json"


def measured(name: str, version: str) -> tuple[dict[str, Any], ...]:
    """The calibration lines of judge (or audit evidence) ``name`` at ``version``: set, half, n, accuracy, kappa."""
    path = resources.files(__package__).joinpath(MEASURED_FILE)
    if not path.is_file():
        return ()
    records = json.loads(path.read_text(encoding="utf-8"))
    return tuple(dict(line) for line in records.get("measured", {}).get(f"{name} {version}", []))
