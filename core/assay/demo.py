"""``make demo``: validate the example pack, seal a bundle for it, validate that, report.

Until the engine can run endpoints (a later milestone), the bundle's rows are
synthetic: drawn deterministically by :mod:`assay.synthetic`, marked
``scripted`` in every row and endpoint, and produced by no model. The point of
the demo at this stage is the standard's round trip: pack -> rows -> sealed
bundle -> independent validation with every claimed number recomputed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from .bundle import zip_bundle
from .errors import AssayError
from .plugins import load_plugins
from .synthetic import SyntheticPlan, build_bundle
from .validate import validate_path

__all__ = ["main", "render_markdown"]


def render_markdown(summary: dict, title: str) -> str:
    """A Markdown table per metric from a metrics-summary document."""
    lines = [f"# {title}", ""]
    by_metric: dict[str, list[dict]] = {}
    for entry in summary["metrics"]:
        by_metric.setdefault(entry["metric"], []).append(entry)
    for metric, entries in by_metric.items():
        extra = sorted({k for e in entries for k in e["group"]} - {"endpoint", "condition"})
        lines += [f"## {metric}", "", "| endpoint | condition | " + "".join(f"{k} | " for k in extra) + "value | n | 95% CI |"]
        lines.append("|" + "---|" * (4 + len(extra) + 1))
        for e in entries:
            value = "-" if e["value"] is None else f"{e['value']:.3f}"
            ci = f"[{e['ci_low']:.3f}, {e['ci_high']:.3f}]" if e.get("ci_low") is not None else ""
            cells = [e["group"]["endpoint"], e["group"]["condition"], *(str(e["group"].get(k, "")) for k in extra), value, str(e.get("denominator", "")), ci]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m assay.demo", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    parser.add_argument("--pack", default="example")
    args = parser.parse_args(argv)
    try:
        host = load_plugins()
        pack = host.registry.get("packs", args.pack)
        if pack is None:
            print(f"assay demo: pack {args.pack!r} is not installed (run 'make demo')", file=sys.stderr)
            return 1
        pack_report = validate_path(pack.root, host.registry)
        print(f"pack {pack.name} {pack.version}: {'valid' if pack_report.ok else 'INVALID'} ({pack.claimed_digest})")
        if not pack_report.ok:
            for issue in pack_report.ordered():
                print(issue.format())
            return 1
        families = {name: family.kind for name, family in host.registry.items("families").items()}
        plan = SyntheticPlan(cases=pack.case_index(), endpoints=["scripted-a", "scripted-b"], conditions=["D0"], seeds=[0, 1], family_kinds=families)
        bundle = args.out / "bundle"
        if bundle.exists():
            shutil.rmtree(bundle)
        build_bundle(bundle, plan, {"name": pack.name, "version": pack.version, "digest": pack.claimed_digest}, host.registry)
        zip_bundle(bundle, args.out / "bundle.zip")
        report = validate_path(args.out / "bundle.zip", host.registry)
        for issue in report.ordered():
            print(issue.format())
        summary = json.loads((bundle / "metrics.json").read_text())
        markdown = args.out / "report.md"
        markdown.write_text(render_markdown(summary, f"{pack.name} {pack.version}: synthetic scripted rows (no model)"))
    except AssayError as exc:
        print(f"assay demo: {exc}", file=sys.stderr)
        return 1
    verdict = "valid" if report.ok else "INVALID"
    print(f"bundle: {bundle} ({report.facts.get('rows')} rows, {verdict}, {report.facts.get('metrics_checked')} claimed numbers recomputed)")
    print(f"bundle archive: {args.out / 'bundle.zip'}")
    print(f"report: {markdown}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
