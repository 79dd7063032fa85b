"""Rendering a report as one self-contained HTML page: tables plus inline SVG figures.

No external assets, no JavaScript: the page inlines its CSS and draws its
figures with :mod:`assay.reports.svg`, and a Content-Security-Policy forbids
it from loading anything, as defence in depth should escaping ever miss. All
bundle text is escaped with :func:`html.escape`. Nothing in the page depends
on the time or the machine, so the same bundle gives byte-identical HTML.
"""

from __future__ import annotations

from dataclasses import replace
from html import escape
from pathlib import Path

from ..bundle import write_bytes_atomic
from ._load import ReportData
from .markdown import MAX_LISTED
from .model import MainSection, MetricSection, ReportModel, Table, build_model, plural
from .svg import family_chart, line_chart, rate_chart, spread_chart

__all__ = ["render_html", "write_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: bold; padding: 0.2rem 0; }
.warning { border-left: 4px solid #D55E00; background: #fff3ec; padding: 0.5rem 0.8rem; margin: 0.6rem 0; }
.note, .description { color: #444; max-width: 60rem; }
figure { margin: 0.5rem 0 1.5rem; overflow-x: auto; } figcaption { font-size: 0.8rem; color: #555; }
nav ul { columns: 2; font-size: 0.85rem; }
""".strip()


def _table(table: Table, css_class: str = "") -> list[str]:
    numeric_from = len(table.columns) if table.numeric_from is None else table.numeric_from
    lines = [f'<table class="{css_class}">' if css_class else "<table>"]
    if table.caption:
        lines.append(f"<caption>{escape(table.caption)}</caption>")
    lines.append("<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in table.columns) + "</tr></thead>")
    lines.append("<tbody>")
    for row in table.rows:
        cells = "".join(
            f'<td class="num">{escape(cell)}</td>' if index >= numeric_from else f"<td>{escape(cell)}</td>"
            for index, cell in enumerate(row)
        )
        lines.append(f"<tr>{cells}</tr>")
    lines.append("</tbody></table>")
    return lines


def _figure(section: MetricSection) -> list[str]:
    if section.figure == "rate" and section.points:
        svg = rate_chart(section.points, f"{section.metric}: rate and 95% Wilson interval per group")
        caption = "Rate per endpoint and condition (dot) with its 95% Wilson interval (whisker)."
    elif section.figure == "family" and section.points:
        svg = family_chart(section.points, f"{section.metric}: rate per family with 95% Wilson intervals")
        caption = "Rate per family (bar) for each endpoint and condition, with its 95% Wilson interval."
    else:
        return []
    return ["<figure>", svg, f"<figcaption>{escape(caption)}</figcaption>", "</figure>"]


def _main_figure(section: MainSection) -> list[str]:
    if section.figure == "lines" and section.points:
        svg = line_chart(section.points, f"{section.title}: one line per endpoint across defenses")
        caption = (
            "Defense trajectories: the rate of each endpoint (one line each) across the defenses in plan order; "
            "lower is better."
        )
    elif section.figure == "spread" and section.points:
        svg = spread_chart(
            section.points, f"{section.title}: mean over endpoints per defense, with each endpoint's rate"
        )
        caption = ("ObservedHarm@Exec per defense: the bar is the mean of the endpoints' rates, the whisker spans "
                   "their range and each dot is one endpoint.")  # fmt: skip
    else:
        return []
    return ["<figure>", svg, f"<figcaption>{escape(caption)}</figcaption>", "</figure>"]


def _body(model: ReportModel) -> list[str]:
    out = [f"<h1>{escape(model.title)}</h1>"]
    out += [f'<p class="warning"><strong>Warning:</strong> {escape(w)}</p>' for w in model.warnings]
    out += _table(model.facts, "facts")
    out.append("<nav><ul>")
    for main in model.main:
        out.append(f'<li><a href="#t-{escape(main.key)}">{escape(main.title)}</a></li>')
    anchors: dict[str, str] = {}
    for stage in model.stages:
        for section in stage.metrics:
            anchors[section.metric] = f"m-{len(anchors) + 1}"
            out.append(f'<li><a href="#{anchors[section.metric]}">{escape(section.metric)}</a></li>')
    out.append("</ul></nav>")
    out.append("<h2>Endpoints</h2>")
    out += _table(model.endpoints)
    out.append("<h2>Conditions</h2>")
    out += _table(model.conditions)
    out.append("<h2>Claims</h2>")
    if model.differences:
        out.append(
            f"<p>metrics.json differs from the recomputation in {plural(len(model.differences), 'place')}:</p><ul>"
        )
        out += [f"<li>{escape(d)}</li>" for d in model.differences[:MAX_LISTED]]
        if len(model.differences) > MAX_LISTED:
            out.append(f"<li>... and {len(model.differences) - MAX_LISTED} more</li>")
        out.append("</ul>")
    else:
        out.append(
            "<p>Every number claimed in metrics.json is reproduced by the registered metric plugins "
            "from rows.jsonl.</p>"
        )
    out.append(
        '<p class="note">Every number below is recomputed from the rows, not copied from metrics.json. '
        "Rates carry 95% Wilson intervals; k is the count of hits, n the denominator.</p>"
    )
    if model.main:
        out.append("<h2>Main tables</h2>")
    for main in model.main:
        out.append(f'<section id="t-{escape(main.key)}">')
        out.append(f"<h3>{escape(main.title)}</h3>")
        if main.description:
            out.append(f'<p class="description">{escape(main.description)}</p>')
        for table in main.tables:
            out += _table(table)
        out += [f'<p class="note">{escape(note)}</p>' for note in main.notes]
        out += _main_figure(main)
        out.append("</section>")
    for stage in model.stages:
        out.append(f"<h2>Stage: {escape(stage.stage)}</h2>")
        for section in stage.metrics:
            out.append(f'<section id="{anchors[section.metric]}">')
            out.append(f"<h3>{escape(section.metric)}</h3>")
            if section.description:
                out.append(f'<p class="description">{escape(section.description)}</p>')
            for table in section.tables:
                out += _table(table)
            out += [f'<p class="note">{escape(note)}</p>' for note in section.notes]
            out += _figure(section)
            out.append("</section>")
    return out


def render_html(data: ReportData | ReportModel, title: str | None = None) -> str:
    """The whole report as one self-contained HTML document; same input, same bytes."""
    if isinstance(data, ReportModel):
        model = data if title is None else replace(data, title=title)
    else:
        model = build_model(data, title)
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(model.title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
    ]
    return "\n".join([*head, *_body(model), "</body>", "</html>"]) + "\n"


def write_html(path: Path, data: ReportData | ReportModel, title: str | None = None) -> None:
    """Render and write the HTML report atomically (readers never see half a page)."""
    write_bytes_atomic(path, render_html(data, title).encode("utf-8"))
