"""``assay compare``: paired tests of binary outcomes between selections of a bundle's rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from ..errors import UsageError
from ..reports import Selector
from . import get_host


def _selector(
    ctx: click.Context, param: click.Parameter, value: str | tuple[str, ...]
) -> Selector | tuple[Selector, ...]:
    # Parsing in the callback makes a malformed selector a click usage error (exit 2) naming the option.
    try:
        if isinstance(value, tuple):
            return tuple(Selector.parse(text) for text in value)
        return Selector.parse(value)
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("compare")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option(
    "--a",
    "a",
    required=True,
    metavar="SELECTOR",
    callback=_selector,
    help="The baseline rows: key=value[,key=value] over endpoint, condition, protocol.",
)
@click.option(
    "--b",
    "bs",
    required=True,
    multiple=True,
    metavar="SELECTOR",
    callback=_selector,
    help="Rows to compare with A, selecting the same fields; repeat for several.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Only this outcome (repeat for several; default every registered outcome, which 'assay plugins' lists).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Seed of the paired bootstrap, recorded in the output.",
)
@click.option("--resamples", default=10_000, show_default=True, type=click.IntRange(min=1), help="Bootstrap resamples.")
@click.option(
    "--alpha",
    default=0.05,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Significance level of the decision gates an analysis makes.",
)
@click.option(
    "--pack",
    "pack_root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The bundle's pack directory, for case families (default: the installed pack).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
@click.pass_context
def compare_command(
    ctx: click.Context,
    bundle: Path,
    a: Selector,
    bs: tuple[Selector, ...],
    metrics: tuple[str, ...],
    seed: int,
    resamples: int,
    alpha: float,
    pack_root: Path | None,
    as_json: bool,
) -> None:
    """Compare rows A with rows B of BUNDLE (a directory or .zip), pair by pair.

    A row of A is paired with the row of B that has the same case, seed,
    epoch and every key field neither selector names. For each binary outcome
    both rows carry and each B: the number of pairs, both rates, the
    difference B - A with a seeded paired-bootstrap 95% interval, the exact
    McNemar p-value with its discordant counts b (A only) and c (B only), and
    the Holm-adjusted p-value across every comparison printed. Unpaired rows
    are counted.

    \b
    Example:
      assay compare out/demo/bundle --a endpoint=scripted-a --b endpoint=scripted-b
    """
    from ..components import AnalysisContext
    from ..reports import compare_rows, read_bundle, render_comparison_markdown
    from ..reports._load import KindsOfCases, case_families

    files = read_bundle(bundle)
    registry = get_host(ctx).registry
    available = list(registry.items("outcomes").values())
    cases, _ = case_families(files, registry, pack_root)
    result = compare_rows(
        files.rows,
        a,
        bs,
        outcomes=metrics or None,
        seed=seed,
        resamples=resamples,
        available=available,
        case_kinds=KindsOfCases(cases, registry),  # the pack read once: a million cases are not read twice
        # Never pool model families into one test: an endpoint's `family` option, else the endpoint is its own.
        endpoint_families={
            str(e.get("id")): str((e.get("options") or {}).get("family") or e.get("id"))
            for e in files.run.get("endpoints", [])
        },
    )
    result = replace(result, bundle=str(bundle), run_id=str(files.run.get("run_id")))
    analyses = [analysis for analysis in registry.items("analyses").values() if analysis.applies(files.rows)]
    found = []
    if analyses:
        context = AnalysisContext(files.run, cases, seed, resamples, alpha)
        found = [(analysis, analysis.run(files.rows, a, bs, context)) for analysis in analyses]
    if as_json:
        extra = {analysis.name: analysis.document(results) for analysis, results in found}
        document = {**result.to_document(), **extra, "alpha": alpha}
        click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(render_comparison_markdown(result), nl=False)
        for analysis, results in found:
            if results:
                click.echo("\n" + analysis.markdown(results, context), nl=False)
