"""Rendering a report as one self-contained HTML page: tables plus inline SVG figures.

No external assets: the page inlines its CSS, draws its figures with
:mod:`assay.reports.svg`, and carries one script of its own, the case browser
(``browser.js``), which reads the work items from a JSON data block and sets
every text it shows as text, never as markup. A Content-Security-Policy
forbids loading anything and allows that one script by its hash, as defence
in depth should escaping ever miss; all other bundle text is escaped with
:func:`html.escape`. It works from ``file://``. Nothing in the page depends on
the time or the machine, so the same bundle gives byte-identical HTML.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path
from typing import Any

from ..bundle import atomic_writer
from ._load import ReportData
from .markdown import MAX_LISTED, summary_line
from .model import MainSection, MetricSection, ReportModel, Table, build_model, plural
from .svg import family_chart, line_chart, rate_chart, spread_chart, use_colours

#: A line of the page: its text, or its pieces, made as they are written (the case browser's data).
Line = str | Iterator[str]

__all__ = ["render_html", "write_html"]

#: The case browser's script, inlined; the page's Content-Security-Policy allows exactly this script (by hash).
BROWSER_JS = (Path(__file__).with_name("browser.js")).read_text(encoding="utf-8")
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(BROWSER_JS.encode("utf-8")).digest()).decode("ascii")
_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{_SCRIPT_HASH}'"
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
.wide { overflow-x: auto; max-width: 100%; } .lede { font-size: 0.95rem; } table.headline { font-size: 0.95rem; }
.filters label { margin-right: 0.8rem; font-size: 0.85rem; } table.cases tbody tr { cursor: pointer; }
table.cases tbody tr:hover, table.cases tbody tr:focus { background: #eef4fb; }
.detail { border: 1px solid #ccc; padding: 0.5rem 1rem; margin: 1rem 0; background: #fafafa; }
.detail pre { white-space: pre-wrap; word-break: break-word; font-size: 0.8rem; max-height: 30rem; overflow: auto; }
.turn { border-left: 3px solid #ccc; margin: 0.4rem 0; padding-left: 0.6rem; }
.turn-assistant { border-color: #0072B2; } .role { font-size: 0.75rem; color: #555; text-transform: uppercase; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0 1rem; font-size: 0.85rem; }
""".strip()


def _table(table: Table, css_class: str = "") -> list[str]:
    numeric_from = len(table.columns) if table.numeric_from is None else table.numeric_from
    # In a box of its own that scrolls sideways: a wide table never widens the page.
    lines = ['<div class="wide">', f'<table class="{css_class}">' if css_class else "<table>"]
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
    lines.append("</tbody></table></div>")
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


def _provenance(model: ReportModel) -> list[str]:
    out = ['<section id="provenance">', "<h2>Provenance</h2>"]
    out += _table(model.facts, "facts")
    out.append("<h3>Endpoints</h3>")
    out += _table(model.endpoints)
    out.append("<h3>Conditions</h3>")
    out += _table(model.conditions)
    out.append("<h3>Claims</h3>")
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
    out.append("</section>")
    return out


def _summary(model: ReportModel) -> list[str]:
    out = ['<section id="summary">', "<h2>Summary</h2>", f'<p class="lede">{escape(summary_line(model))}</p>']
    if model.summary is not None:
        out += _table(model.summary, "headline")
    out.append(
        '<p class="note">Every number in this report is recomputed from the rows, not copied from metrics.json. '
        "Rates are percentages with their 95% Wilson intervals (k of n); in every chart a whisker is that "
        "interval, and each endpoint keeps one colour.</p>"
    )
    out.append("</section>")
    return out


def _browser(model: ReportModel) -> list[Line]:
    """The case browser: the entries as JSON data (never markup), filters, the list and a detail pane."""
    if not model.cases:
        return []
    selects = "".join(
        f'<label>{label} <select id="cb-{key}"><option value="">all</option></select></label> '
        for key, label in (("endpoint", "Endpoint"), ("condition", "Condition"), ("family", "Family"))
    )
    return [
        '<section id="cases">',
        "<h2>Cases</h2>",
        '<p class="description">Every work item with its verdicts. Filter, then open one for its transcript, '
        "tool calls, state diff, oracle verdicts, judge rationale and labels.</p>",
        f'<form class="filters" onsubmit="return false">{selects}'
        '<label>Outcome <select id="cb-outcome"><option value="">any</option></select></label> '
        '<label>is <select id="cb-value"><option value="">any</option><option value="yes">yes</option>'
        '<option value="no">no</option><option value="errors">an error row</option></select></label> '
        '<label>Case <input id="cb-text" type="search" placeholder="case id"></label></form>',
        '<p id="cb-count" class="note"></p>',
        '<table class="cases"><thead><tr><th>case</th><th>endpoint</th><th>condition</th><th>seed</th>'
        "<th>family</th><th>outcomes</th><th>errors</th></tr></thead>",
        '<tbody id="cb-rows"></tbody></table>',
        '<button id="cb-more" type="button" hidden>Show more</button>',
        '<div id="cb-detail" class="detail" hidden></div>',
        _data_block(model.cases),
        f"<script>{BROWSER_JS}</script>",
        "</section>",
    ]


def _json(value: Any) -> str:
    # Inside <script> a "<" of the bundle's could end the element or open a comment: every one is written as the
    # JSON escape \u003c, so the data block holds no "<" at all and still parses to the same value.
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c")


def _data_block(entries: Sequence[Any]) -> Iterator[str]:
    """The browser's ``{"entries": [...], "strings": [...]}`` data element, written an entry at a time.

    The same text as dumping the whole object at once (sorted keys, no spaces), but a large bundle's entries are
    made, swapped and written one by one (see :class:`assay.reports.cases.CaseEntries`).
    """
    table = _shared_strings(entries)
    index = {text: number for number, text in enumerate(table)}
    yield '<script type="application/json" id="assay-cases">{"entries":['
    for number, entry in enumerate(entries):
        yield ("," if number else "") + _json(_swap(entry, index))
    yield '],"strings":' + _json(table) + "}</script>"


#: A text at least this long that more than one work item holds (a system prompt, a task) is written once.
_SHARED_MIN = 120


def _long_texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= _SHARED_MIN:
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _long_texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _long_texts(item)


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _shared_strings(entries: Sequence[Any]) -> list[str]:
    """Every long text that more than one entry holds, sorted: what the data block writes once, by index.

    Every work item of a condition carries the same system prompt and task: written once, a large bundle's
    page is about half the size. The browser puts the texts back before it shows anything. Two walks of the
    entries, counting 16-byte digests and not the texts, so a large bundle's unique outputs are never held.
    """
    counts: Counter[bytes] = Counter()
    for entry in entries:
        counts.update(_text_key(text) for text in _long_texts(entry))
    repeated = {key for key, n in counts.items() if n > 1}
    del counts
    if not repeated:
        return []
    return sorted({text for entry in entries for text in _long_texts(entry) if _text_key(text) in repeated})


def _swap(value: Any, index: Mapping[str, int]) -> Any:
    """``value`` with every text of the table replaced by ``{"$": its index}``."""
    if isinstance(value, str):
        return {"$": index[value]} if value in index else value
    if isinstance(value, dict):
        swapped = {key: _swap(item, index) for key, item in value.items()}
        # The bundle's own {"$": ...} (or {"$raw": ...}) must not read as a reference: it is wrapped.
        return {"$raw": swapped} if set(swapped) in ({"$"}, {"$raw"}) else swapped
    if isinstance(value, list | tuple):
        return [_swap(item, index) for item in value]
    return value


def _body(model: ReportModel) -> list[Line]:
    # The answer first (warnings and the headline rates), then the work items, the detail, provenance last.
    use_colours(model.colours)
    out: list[Line] = [f"<h1>{escape(model.title)}</h1>"]
    out += [f'<p class="warning"><strong>Warning:</strong> {escape(w)}</p>' for w in model.warnings]
    out += _summary(model)
    out += _browser(model)
    out.append("<nav><h2>Detail</h2><ul>")
    for main in model.main:
        out.append(f'<li><a href="#t-{escape(main.key)}">{escape(main.title)}</a></li>')
    anchors: dict[str, str] = {}
    for stage in model.stages:
        for section in stage.metrics:
            anchors[section.metric] = f"m-{len(anchors) + 1}"
            out.append(f'<li><a href="#{anchors[section.metric]}">{escape(section.metric)}</a></li>')
    out.append('<li><a href="#provenance">Provenance</a></li>')
    out.append("</ul></nav>")
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
    out += _provenance(model)
    return out


def _lines(data: ReportData | ReportModel, title: str | None) -> list[Line]:
    if isinstance(data, ReportModel):
        model = data if title is None else replace(data, title=title)
    else:
        model = build_model(data, title)
    head: list[Line] = [
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
    return [*head, *_body(model), "</body>", "</html>"]


def _pieces(lines: Iterable[Line]) -> Iterator[str]:
    """The page's text in pieces: each line (a string, or pieces of one written as they are made), then a newline."""
    for line in lines:
        if isinstance(line, str):
            yield line + "\n"
        else:
            yield from line
            yield "\n"


def render_html(data: ReportData | ReportModel, title: str | None = None) -> str:
    """The whole report as one self-contained HTML document; same input, same bytes."""
    return "".join(_pieces(_lines(data, title)))


def write_html(path: Path, data: ReportData | ReportModel, title: str | None = None) -> None:
    """Write the HTML report atomically (readers never see half a page), the case browser an entry at a time.

    The same bytes as :func:`render_html`, without ever holding the page: a large bundle's case browser is
    gigabytes of text.
    """
    with atomic_writer(path) as handle:
        for piece in _pieces(_lines(data, title)):
            handle.write(piece.encode("utf-8"))
