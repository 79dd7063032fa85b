"""``assay judge calibrate``: how a judge agrees with a pack's hand-labelled calibration set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ...cli import get_host


@click.group("judge")
def judge_group() -> None:
    """Judges: measure one against hand labels."""


@judge_group.command("calibrate")
@click.option(
    "--pack",
    "pack_text",
    required=True,
    metavar="PACK",
    help="An installed pack's name, or a pack directory; its calibration/ folder holds the labelled responses.",
)
@click.option(
    "--judge",
    "judge_spec",
    default="calibrated",
    show_default=True,
    metavar="SPEC",
    help="The judge to measure: calibrated, rule, or llm:backend=NAME,<backend options>.",
)
@click.option(
    "--half",
    type=click.Choice(["all", "tuning", "heldout"]),
    default="all",
    show_default=True,
    help="Only the tuning half (patterns or weights may be fitted on it) or the held-out half (never fitted on).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N responses (in file order).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--fit",
    "fit_out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Also fit the calibrated judge's weights on the tuning half and write them to FILE (JSON, atomically).",
)
@click.pass_context
def calibrate_command(
    ctx: click.Context,
    pack_text: str,
    judge_spec: str,
    half: str,
    limit: int | None,
    as_json: bool,
    fit_out: Path | None,
) -> None:
    """Judge every labelled response of PACK's calibration set and print the agreement with the hand labels.

    Each response is judged as the semantic stage would judge it (the case's
    prompt under D0, native tool calls written out as the stage writes them);
    the audit's deterministic evidence is computed for every response labelled
    CoreFail. Printed: accuracy, Cohen's kappa and the confusion for the
    semantic verdict and for the audit class (HarmEvidence or SemanticOnly),
    overall, per half and per response style; then the agreement per evidence
    class. Exit 0 once measured, 1 for a calibration set that cannot be read.

    \b
    Examples:
      assay judge calibrate --pack safeclaw
      assay judge calibrate --pack safeclaw --judge rule --half heldout
    """
    from ...bundle import write_json_atomic
    from ...engine.run import resolve_pack
    from .calibration import calibrate, calibration_digest, fit_weights, load_calibration
    from .rejudge import build_judge

    host = get_host(ctx)
    pack = resolve_pack(pack_text, host)
    folder = Path(pack.root) / "calibration"
    items = load_calibration(folder)
    if half != "all":
        items = [item for item in items if item.half == half]
    if limit is not None:
        items = items[:limit]
    if not items:
        raise click.UsageError(f"{folder}: no {half} responses to measure")
    cases = pack.cases()
    unknown = sorted({item.case_id for item in items} - set(cases))
    if unknown:
        raise click.ClickException(f"{folder}: responses to cases the pack does not have: {', '.join(unknown[:5])}")
    defense = host.registry.get("defenses", "D0")
    condition: dict[str, Any] = dict(defense.document) if defense is not None else {"id": "D0"}
    judge = build_judge(judge_spec, host.registry)
    result = calibrate(items, cases, judge, condition, calibration_digest(folder))
    if fit_out is not None:
        weights = fit_weights(load_calibration(folder), cases, condition)
        weights["fitted_on"]["calibration_set"] = f"{pack.name} {pack.version}"
        write_json_atomic(fit_out, weights)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    click.echo(render_calibration(result, f"{pack.name} {pack.version}"))


def render_calibration(result: Any, pack_label: str) -> str:
    """The calibration result as Markdown: the semantic and audit tables, then the evidence classes."""
    judge = result.judge
    lines = [
        f"# Judge calibration: {judge.get('name')} {judge.get('version', '')} on {pack_label}".rstrip(),
        "",
        f"Calibration set {result.digest}. Hand labels against the seed's CoreFail and audit definitions; "
        "kappa is Cohen's; the confusion reads hand -> judge.",
        "",
    ]
    for title, table in (("Semantic verdict (CoreFail)", result.semantic), ("Audit class", result.audit)):
        lines += [
            f"## {title}",
            "",
            "| responses | n | accuracy | kappa | confusion |",
            "| --- | --- | --- | --- | --- |",
        ]
        for group, scores in table.items():
            confusion = ", ".join(f"{a}->{b} {n}" for (a, b), n in sorted(scores.confusion.items()))
            lines.append(
                f"| {group} | {scores.n} | {_number(scores.accuracy)} | {_number(scores.kappa)} | {confusion} |"
            )
        lines.append("")
    lines += ["## Audit evidence classes (responses labelled CoreFail)", "", "| class | n | accuracy | kappa |"]
    lines.append("| --- | --- | --- | --- |")
    for name, scores in result.evidence.items():
        lines.append(f"| {name} | {scores.n} | {_number(scores.accuracy)} | {_number(scores.kappa)} |")
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
