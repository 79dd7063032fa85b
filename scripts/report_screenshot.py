"""Draw the screenshot of a report's summary screen that docs/reports.md shows (docs/img/report-summary.png).

A scripted run of a small safeclaw sample (two endpoints, two defenses), its HTML report, and the top of that
page in headless Chromium (Debian's ``chromium``; ``make test`` installs it). Scripted, so the picture is the
same every time the report is; rerun after a change to the report's layout::

    .venv/bin/python scripts/report_screenshot.py [--out docs/img/report-summary.png]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    """Run, report, open in Chromium, write the PNG."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "report-summary.png")
    args = parser.parse_args()
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1764547200")
    from assay.engine.run import RunSettings, execute_run
    from assay.plugins import load_plugins
    from assay.reports import read_bundle, recompute
    from assay.reports.html import write_html
    from assay.testing.browser import HeadlessBrowser

    host = load_plugins()
    with tempfile.TemporaryDirectory() as scratch:
        outcome = execute_run(
            RunSettings(
                pack="safeclaw",
                endpoints=["scripted:mixed", "scripted:refuse"],
                defenses=["D0", "D3"],
                sample="stratified:2",
                out=Path(scratch) / "run",
                progress=False,
            ),
            host=host,
        )
        page = Path(scratch) / "report.html"
        write_html(page, recompute(read_bundle(outcome.bundle), host.registry))
        with HeadlessBrowser() as browser:
            browser.open(page.resolve().as_uri())
            png = browser.screenshot(1280, 860)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"{args.out}: {len(png)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
