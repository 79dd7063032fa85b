"""``assay report``: Markdown, HTML or JSON reports of a bundle, recomputed from its rows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from . import get_host

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Differences named on the warning line; the report itself lists more.
_NAMED = 3


@click.command("report")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print the recomputed metrics summary (JSON) instead of Markdown."
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write a self-contained HTML report (tables and figures) to FILE.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the Markdown report to FILE.",
)
@click.option(
    "--pack",
    "pack",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Take case families from this pack directory instead of the installed pack.",
)
@click.pass_context
def report_command(
    ctx: click.Context,
    bundle: Path,
    as_json: bool,
    html_path: Path | None,
    markdown_path: Path | None,
    pack: Path | None,
) -> None:
    """Report on BUNDLE (a directory or .zip), recomputing every metric from its rows.

    Prints the main tables the registered report sections build from the
    bundle (the staged-endpoint design's CoreFail@N by endpoint and defense
    with pooled rows, its audit accounting, exec rates, core-exec join and
    McNemar against its baseline, say), then Markdown tables grouped by stage
    (each rate with n and its 95% Wilson interval), or with --json the
    recomputed metrics summary. The HTML report adds figures. With --html or --markdown the
    report goes to that file instead of standard output. Case families come
    from the installed pack when it is the bundle's exact version, else they
    are "unknown".

    Exit 0 when metrics.json is reproduced by the rows; exit 1 (with a
    warning naming the first differences on standard error) when it is not,
    so a bundle whose claims do not reproduce never passes silently.
    """
    from ..bundle import write_bytes_atomic
    from ..reports import read_bundle, recompute, render_markdown, write_html
    from ..summary import summary_document

    data = recompute(read_bundle(bundle), get_host(ctx).registry, pack_root=pack)
    if html_path is not None:
        write_html(html_path, data)
        click.echo(f"{bundle}: HTML report written to {html_path}", err=True)
    if markdown_path is not None:
        write_bytes_atomic(markdown_path, render_markdown(data).encode("utf-8"))
        click.echo(f"{bundle}: Markdown report written to {markdown_path}", err=True)
    if as_json:
        click.echo(json.dumps(summary_document(data.values), indent=2, sort_keys=True, ensure_ascii=False))
    elif html_path is None and markdown_path is None:
        click.echo(render_markdown(data), nl=False)
    if not data.reproduced:
        # One line whatever the (untrusted) claims hold; control characters would reach the terminal.
        named = _CONTROL.sub("\ufffd", " ".join("; ".join(data.differences[:_NAMED]).split()))
        more = f"; and {len(data.differences) - _NAMED} more" if len(data.differences) > _NAMED else ""
        count = len(data.differences)
        noun = "difference" if count == 1 else "differences"
        click.echo(
            f"assay: warning: {bundle}: metrics.json does not reproduce from the rows ({count} {noun}): {named}{more}",
            err=True,
        )
        ctx.exit(1)
    ctx.exit(0)
