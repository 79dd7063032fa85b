"""Benchmark: how the judges agree with hand labels, on the tuning half and on the held-out half.

Every staged pack with a calibration set (``calibration/*.yaml`` in the pack:
responses in every style a model gives, each labelled by hand against the
seed's CoreFail and audit definitions) is measured with each deterministic
judge: Cohen's kappa and accuracy of the semantic verdict, and of the audit
class (HarmEvidence or SemanticOnly, on the responses labelled CoreFail) from
the audit's deterministic evidence. The tuning half is what the calibrated
judge's weights were fitted on; the held-out half was never fitted on, so its
line is the one that says how the judge does on responses it has not seen.

The peer is a second annotator: where the pack ships one
(``calibration/annotators/*.yaml``, labels written blind), the agreement of the
two people is printed too, as the ceiling a judge can be held to.

Target (issue 30): kappa >= 0.9 on the held-out half for the default judge, for
the semantic verdict and the audit class alike. The script prints whether each
is met and exits 1 when the default judge misses it.

    python bench/judge_calibration.py [--pack safeclaw] [--judges calibrated,rule] [--write]

``--write`` records what was measured in the judges' ``calibration.json`` (what a
judge class declares as its calibration, and reports show); a test keeps that
file equal to a fresh measurement.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from assay.designs.staged.audit import AUDIT_VERSION
from assay.designs.staged.calibration import (
    audit_class,
    calibration_digest,
    load_calibration,
    measure_pack,
    measurement_record,
    write_measured,
)
from assay.documents import load_document
from assay.engine.run import RunSettings, resolve_pack
from assay.plugins import load_plugins
from assay.stats import cohen_kappa

TARGET = 0.9


def _kappa(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def _annotators(folder: Path, items: list) -> list[str]:
    """Lines comparing each second annotator's blind labels with the calibration set's."""
    first = {item.id: item for item in items}
    lines = []
    for path in sorted((folder / "annotators").glob("*.yaml")):
        labels = [x for x in load_document(path).data["labels"] if x["id"] in first]
        semantic = cohen_kappa([first[x["id"]].core_fail for x in labels], [x["core_fail"] for x in labels])
        both = [x for x in labels if x["core_fail"] and first[x["id"]].core_fail]
        audit = cohen_kappa([audit_class(first[x["id"]].audit) for x in both], [audit_class(x["audit"]) for x in both])
        lines.append(
            f"  annotators: {path.stem} vs the set, {len(labels)} responses: semantic kappa {semantic:.3f}, "
            f"audit class kappa {audit:.3f} over {len(both)}"
        )
    return lines


def main() -> int:
    """Measure each judge on each half; exit 1 when the default judge misses the held-out target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="safeclaw")
    parser.add_argument("--judges", default="calibrated,rule")
    parser.add_argument("--write", action="store_true", help="record the measurement in calibration.json")
    args = parser.parse_args()
    host = load_plugins()
    pack = resolve_pack(args.pack, host)
    folder = Path(pack.root) / "calibration"
    items = load_calibration(folder)
    default = RunSettings.__dataclass_fields__["judge"].default
    print(f"{pack.name} {pack.version}: {len(items)} labelled responses, set {calibration_digest(folder)}")
    print(f"target: kappa >= {TARGET} on the held-out half (default judge: {default})")
    print(f"{'judge or audit':22} {'half':8} {'n':>4} {'acc':>6} {'kappa':>6}")
    missed = []
    measured = measure_pack(pack, host, [spec for spec in args.judges.split(",") if spec])
    for label, part, result in measured:
        table = result.semantic if part == "semantic" else result.audit
        for half in ("tuning", "heldout"):
            scores = table.get(half)
            if scores is None:
                continue
            print(f"{label:22} {half:8} {scores.n:4} {scores.accuracy:6.3f} {_kappa(scores.kappa)}")
            if half == "heldout" and label in (default, AUDIT_VERSION):
                met = scores.kappa is not None and scores.kappa >= TARGET
                print(f"  {part}: held-out kappa {_kappa(scores.kappa).strip()}, target {TARGET}: "
                      f"{'met' if met else 'MISSED'}")  # fmt: skip
                if not met:
                    missed.append(part)
    for line in _annotators(folder, items):
        print(line)
    if args.write:
        path = write_measured(measurement_record(pack, folder, measured, host))
        print(f"wrote {path}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
