"""``make demo``: validate the example pack, seal a bundle for it, validate that, report.

Until the engine can run endpoints (a later milestone), the bundle's rows are
synthetic: drawn deterministically by :mod:`assay.synthetic`, marked
``scripted`` in every row and endpoint, and produced by no model. The point of
the demo at this stage is the standard's round trip: pack -> rows -> sealed
bundle -> independent validation with every claimed number recomputed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .bundle import zip_bundle
from .errors import AssayError
from .plugins import load_plugins
from .reports import read_bundle, recompute, render_markdown
from .synthetic import SyntheticPlan, build_bundle
from .validate import validate_path

__all__ = ["main", "render_markdown"]


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
        markdown = args.out / "report.md"
        recomputed = recompute(read_bundle(bundle), host.registry)
        markdown.write_text(render_markdown(recomputed, f"{pack.name} {pack.version}: synthetic scripted rows (no model)"))
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
