"""``make demo``: run a stratified subset of a pack against the embedded local model.

The main job, end to end: validate the pack, run one case of every family of
the staged-endpoint pack (``safeclaw``) under D0 and D3 through all three
stages (semantic, audit, exec in real sandboxes) against the embedded Gemma 3
270M with the ``rule`` judge, seal and zip the bundle, validate it
independently, and write the Markdown and HTML reports. It prints where the
bundle and the reports are, then the report's summary screen: the headline
rates per endpoint and condition. ``--endpoint scripted:mixed`` runs the same
job without a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bundle import write_bytes_atomic
from .engine.run import RunSettings, execute_run
from .errors import AssayError
from .plugins import load_plugins
from .reports import read_bundle, recompute, render_markdown, write_html
from .reports.model import build_model
from .validate import validate_path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m assay.demo", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    parser.add_argument("--pack", default="safeclaw")
    parser.add_argument("--defense", action="append", dest="defenses", help="defense condition (default: D0 and D3)")
    parser.add_argument("--endpoint", default="local", help="endpoint spec (default: the embedded local model)")
    parser.add_argument("--sample", default="stratified:1", help="subset of the pack (default: one case per family)")
    parser.add_argument("--max-tokens", type=int, default=64)
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
        settings = RunSettings(
            pack=args.pack, endpoints=[args.endpoint], out=args.out, sample=args.sample, judge="calibrated",
            defenses=args.defenses or ["D0", "D3"], max_tokens=args.max_tokens, resume=True, progress=True,
        )  # fmt: skip
        print(f"running {args.sample} of {pack.name} against {args.endpoint} with the calibrated judge ...", flush=True)
        outcome = execute_run(settings, host=host)
        archive_report = validate_path(outcome.archive, host.registry)
        for issue in archive_report.ordered():
            print(issue.format())
        data = recompute(read_bundle(outcome.archive), host.registry)
        model = build_model(data)
        html, markdown = args.out / "report.html", args.out / "report.md"
        write_html(html, model)
        write_bytes_atomic(markdown, render_markdown(model).encode("utf-8"))
    except AssayError as exc:
        print(f"assay demo: {exc}", file=sys.stderr)
        return 1
    verdict = "valid" if archive_report.ok else "INVALID"
    print(
        f"bundle: {outcome.bundle} ({outcome.rows} rows, {outcome.error_rows} error rows; {verdict}, "
        f"{archive_report.facts.get('metrics_checked')} claimed numbers recomputed)"
    )
    print(f"bundle archive: {outcome.archive}")
    for warning in outcome.warnings:
        print(f"warning: {warning}")
    print(f"report: {html} (HTML), {markdown} (Markdown)")
    # The report's summary screen, last: what a reader opening it sees first.
    print("summary (percent [95% Wilson interval] (k/n)):")
    for line in model.headline:
        print(f"  {line}")
    failed = bool(outcome.failures)
    return 0 if archive_report.ok and data.reproduced and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
