"""Rendering reports and paired comparisons as Markdown.

A report opens with the answer (every warning and the headline rates), then
the design's main tables (those the bundle's stages support), the tables
grouped by stage, the work items, and the provenance last; a comparison is its
settings, the pairing counts and one table of tests.

Every cell and heading is escaped: bundle text is untrusted, and Markdown
viewers render raw HTML, so a model name must not be able to inject markup or
break a table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ._load import ReportData
from .cases import case_table
from .compare import ComparisonResult
from .model import ReportModel, Table, build_model, format_number, plural

__all__ = [
    "MAX_CASES",
    "escape_markdown",
    "markdown_table",
    "render_comparison_markdown",
    "render_markdown",
    "summary_line",
]

_SPECIAL = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "*": "\\*", "&": "&amp;", "<": "&lt;", ">": "&gt;"})
# A bracket only makes a link (or a link definition) right before "(", "[" or
# ":"; escaping just those keeps intervals such as [0.018, 0.404] readable.
_LINK = re.compile(r"\](?=[(\[:])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Characters that start a block (heading, quote, list, rule) at the start of a line.
_BLOCK_START = frozenset("#>-+=~_")

#: Differences listed in full before the rest are counted.
MAX_LISTED = 50
#: Work items listed in the Markdown report (the HTML report's case browser has them all).
MAX_CASES = 200


def escape_markdown(text: object, *, block: bool = False) -> str:
    """``text`` as inert Markdown on one line: no markup, HTML, links, code spans or table breaks.

    With ``block``, the text starts a line (a paragraph or list item), so a
    leading character that would open a heading, quote or list is escaped too.
    """
    # Control characters (terminal escape sequences among them) become U+FFFD:
    # this text is printed to terminals as well as rendered.
    flat = _CONTROL.sub("\ufffd", " ".join(str(text).split()))
    flat = _LINK.sub("\\\\]", flat.translate(_SPECIAL))
    if block and (flat[:1] in _BLOCK_START or re.match(r"\d+[.)]", flat)):
        flat = "\\" + flat if flat[:1] in _BLOCK_START else re.sub(r"^(\d+)([.)])", r"\1\\\2", flat)
    return flat


def markdown_table(table: Table) -> list[str]:
    """A pipe table (numbers right-aligned), preceded by its caption in bold when it has one."""
    lines = [f"**{escape_markdown(table.caption)}**", ""] if table.caption else []
    lines.append("| " + " | ".join(escape_markdown(c) for c in table.columns) + " |")
    numeric_from = len(table.columns) if table.numeric_from is None else table.numeric_from
    lines.append("|" + "|".join("---:" if i >= numeric_from else "---" for i in range(len(table.columns))) + "|")
    lines += ["| " + " | ".join(escape_markdown(c) for c in row) + " |" for row in table.rows]
    return lines


def _claims(model: ReportModel) -> list[str]:
    if not model.differences:
        return ["Every number claimed in metrics.json is reproduced by the registered metric plugins from rows.jsonl."]
    lines = [f"metrics.json differs from the recomputation in {plural(len(model.differences), 'place')}:", ""]
    lines += [f"- {escape_markdown(d, block=True)}" for d in model.differences[:MAX_LISTED]]
    if len(model.differences) > MAX_LISTED:
        lines.append(f"- ... and {len(model.differences) - MAX_LISTED} more")
    return lines


def summary_line(model: ReportModel) -> str:
    """One line of what the report is about: pack, run, rows, whether the claims reproduce."""
    facts = {row[0]: row[1] for row in model.facts.rows if len(row) >= 2}
    return (
        f"{facts.get('Pack', '')}; run {facts.get('Run', '')}; {facts.get('Rows', '?')} rows "
        f"({facts.get('Scripted rows', '0')} scripted); {facts.get('Errors', '')}; claims: {facts.get('Claims', '')}."
    )


def _blocks(model: ReportModel) -> Iterable[list[str]]:
    # The answer first (the headline rates and every warning), the detail after it, provenance last.
    yield [f"# {escape_markdown(model.title)}"]
    for warning in model.warnings:
        yield [f"> **Warning:** {escape_markdown(warning)}"]
    yield ["## Summary"]
    yield [escape_markdown(summary_line(model), block=True)]
    if model.summary is not None:
        yield markdown_table(model.summary)
    yield ["Every number below is recomputed from the rows, not copied from metrics.json. Rates are "
           "percentages with their 95% Wilson intervals; k is the count of hits, n the denominator."]  # fmt: skip
    if model.main:
        yield ["## Main tables"]
        for main in model.main:
            yield [f"### {escape_markdown(main.title)}"]
            if main.description:
                yield [escape_markdown(main.description, block=True)]
            for table in main.tables:
                yield markdown_table(table)
            for note in main.notes:
                yield [escape_markdown(note, block=True)]
    for stage in model.stages:
        yield [f"## Stage: {escape_markdown(stage.stage)}"]
        for section in stage.metrics:
            yield [f"### {escape_markdown(section.metric)}"]
            if section.description:
                yield [escape_markdown(section.description, block=True)]
            for table in section.tables:
                yield markdown_table(table)
            for note in section.notes:
                yield [escape_markdown(note, block=True)]
    if model.cases:
        yield ["## Cases"]
        yield markdown_table(case_table(model.cases, MAX_CASES))
    yield ["## Provenance"]
    yield markdown_table(model.facts)
    yield ["### Endpoints"]
    yield markdown_table(model.endpoints)
    yield ["### Conditions"]
    yield markdown_table(model.conditions)
    yield ["### Claims"]
    yield _claims(model)


def render_markdown(data: ReportData | ReportModel, title: str | None = None) -> str:
    """The whole report as Markdown text (ending in a newline); same input, same bytes.

    ``title`` replaces the default heading (pack, version and run id).
    """
    if isinstance(data, ReportModel):
        model = data if title is None else replace(data, title=title)
    else:
        model = build_model(data, title)
    return "\n\n".join("\n".join(block) for block in _blocks(model)) + "\n"


def _p(value: float) -> str:
    return f"{value:.4g}"


def render_comparison_markdown(result: ComparisonResult) -> str:
    """A paired comparison as Markdown: settings, pairing counts, then one row per outcome and B."""
    level = f"{result.confidence:.0%}"
    settings = Table(
        ("Field", "Value"),
        (
            ("Bundle", result.bundle),
            ("Run", result.run_id),
            ("A", f"{result.a} ({result.rows_a} rows)"),
            ("B", ", ".join(p.b for p in result.pairings)),
            ("Paired on", ", ".join(result.pair_on)),
            ("Interval", f"{level} paired percentile bootstrap, {result.resamples} resamples, seed {result.seed}"),
            ("Test", f"exact McNemar, Holm-adjusted over {len(result.comparisons)} comparisons"),
        ),
    )
    pairing = Table(
        ("B", "rows A", "rows B", "pairs", "unpaired A", "unpaired B"),
        tuple(
            (p.b, str(p.rows_a), str(p.rows_b), str(p.pairs), str(p.unpaired_a), str(p.unpaired_b))
            for p in result.pairings
        ),
        numeric_from=1,
    )
    by_family = any(c.model_family for c in result.comparisons)  # pairs of model families are never pooled
    tests = Table(
        (
            "B",
            *(["model family"] if by_family else []),
            "outcome",
            "pairs",
            "rate A",
            "rate B",
            "diff (B - A)",
            f"{level} CI",
            "b (A only)",
            "c (B only)",
            "McNemar p",
            "Holm p",
            "tasks",
            "sign-perm p",
        ),
        tuple(
            (
                c.b,
                *([c.model_family] if by_family else []),
                c.outcome,
                str(c.pairs),
                format_number(c.rate_a),
                format_number(c.rate_b),
                f"{c.diff:+.3f}",
                f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]",
                str(c.mcnemar_b),
                str(c.mcnemar_c),
                _p(c.p_value),
                _p(c.p_holm),
                str(c.tasks),
                "-" if c.sign_perm_p is None else _p(c.sign_perm_p),
            )
            for c in result.comparisons
        ),
        numeric_from=3 if by_family else 2,
    )
    blocks = [
        [f"# Paired comparison: A = {escape_markdown(result.a)}"],
        markdown_table(settings),
        ["## Pairing"],
        markdown_table(pairing),
        ["## Outcomes"],
        markdown_table(tests) if result.comparisons else ["No outcome has paired rows."],
        [
            "b counts pairs where the outcome holds under A only, c under B only; "
            "a positive difference means B is higher."
        ],
    ]
    if result.scores:
        scores = Table(
            ("B", "outcome", "pairs", "tasks", "mean A", "mean B", "diff (B - A)", "sign-perm p"),
            tuple(
                (
                    g.b,
                    g.outcome,
                    str(g.pairs),
                    str(g.tasks),
                    f"{g.mean_a:.2f}",
                    f"{g.mean_b:.2f}",
                    f"{g.diff:+.2f}",
                    _p(g.sign_perm_p),
                )
                for g in result.scores
            ),
            numeric_from=2,
        )
        blocks += [
            ["## Scores"],
            markdown_table(scores),
            ["The sign-permutation tests are task-blocked: one mean difference per task, signs flipped per task."],
        ]
    if result.no_pairs:
        blocks.append(
            ["No paired rows for: " + escape_markdown(", ".join(f"{o} (B = {b})" for b, o in result.no_pairs))]
        )
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
