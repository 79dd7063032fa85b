"""Reports of result bundles: Markdown and HTML tables recomputed from the rows, and paired comparisons.

* :func:`read_bundle` reads a bundle directory or zip; :func:`recompute`
  recomputes every registered metric from its rows and lists where the
  claimed ``metrics.json`` differs.
* :func:`render_markdown` and :func:`render_html` draw the same report model
  (:mod:`assay.reports.model`): the main tables the registered report
  sections build from the bundle (``register_report_sections``), then every metric by stage;
  HTML adds inline SVG figures (:mod:`assay.reports.svg`).
* :func:`compare_rows` pairs two selections of rows and tests each binary
  outcome (:mod:`assay.reports.compare`).

The CLI commands are ``assay report`` and ``assay compare``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._load import BundleFiles, ReportData, claim_differences, open_bundle, read_bundle, recompute
    from .compare import Comparison, ComparisonResult, Selector, compare_rows
    from .html import render_html, write_html
    from .markdown import render_comparison_markdown, render_markdown

# Each name is imported from its module on first use (PEP 562): the command line
# imports this package to build its options, and most commands draw no report.
_HOMES = {
    "BundleFiles": "._load",
    "ReportData": "._load",
    "claim_differences": "._load",
    "open_bundle": "._load",
    "read_bundle": "._load",
    "recompute": "._load",
    "Comparison": ".compare",
    "ComparisonResult": ".compare",
    "Selector": ".compare",
    "compare_rows": ".compare",
    "render_html": ".html",
    "write_html": ".html",
    "render_comparison_markdown": ".markdown",
    "render_markdown": ".markdown",
}

__all__ = [
    "BundleFiles",
    "Comparison",
    "ComparisonResult",
    "ReportData",
    "Selector",
    "claim_differences",
    "compare_rows",
    "open_bundle",
    "read_bundle",
    "recompute",
    "render_comparison_markdown",
    "render_html",
    "render_markdown",
    "write_html",
]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
