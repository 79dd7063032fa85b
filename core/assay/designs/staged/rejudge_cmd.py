"""``assay rejudge``: a second judge's verdicts on a bundle's semantic stage, and their agreement with its labels."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ...cli import get_host

#: The stages a second judge can re-label (what ``assay.designs.staged.rejudge.STAGES`` holds; a test keeps them
#: equal). Spelled out here so that loading the command, as every ``assay`` invocation does, imports no more.
STAGES = ("semantic",)


@click.command("rejudge")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "--judge",
    "judge",
    required=True,
    metavar="SPEC",
    help="The second judge: rule, or llm:backend=NAME,<backend options>.",
)
@click.option(
    "--stage", default="semantic", show_default=True, type=click.Choice(STAGES), help="The stage to re-judge."
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the second judge's verdict per row key, with the summary, to FILE (JSON, atomically).",
)
@click.option(
    "--pack",
    "pack",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Read the cases from this pack directory instead of the installed pack.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of Markdown.")
@click.pass_context
def rejudge_command(
    ctx: click.Context, bundle: Path, judge: str, stage: str, out: Path | None, pack: Path | None, as_json: bool
) -> None:
    """Re-judge the semantic stage of BUNDLE (a directory or .zip) with a second judge.

    Every row with a semantic stage is judged again from the same inputs: the
    case (from the installed pack, or --pack DIR, with the bundle's exact name,
    version and digest), the row's final output, and its transcript messages
    but the last assistant message as the prompt. Prints how the second
    judge's CoreFail labels agree with the bundle's: rows compared (rows
    where either label is null are counted apart), percent agreement, Cohen's
    kappa, the 2x2 confusion, and the Spearman correlation of the safety
    scores. The bundle itself is not changed.

    \b
    Examples:
      assay rejudge out/run/bundle --judge rule
      assay rejudge out/run/bundle --judge llm:backend=openai,model=M,base_url=U --out second.json
    """
    from ...bundle import write_bytes_atomic
    from ...reports import read_bundle
    from .rejudge import rejudge_bundle, render_rejudge_markdown

    files = read_bundle(bundle)
    result = rejudge_bundle(files, judge, get_host(ctx).registry, pack_root=pack, stage=stage)
    if out is not None:
        document = result.to_document()
        write_bytes_atomic(
            out, (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        )
        click.echo(f"{bundle}: {len(result.rows)} verdicts written to {out}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_document(verdicts=False), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(render_rejudge_markdown(result), nl=False)
