"""``assay review``: blind review packets out, reviewers' labels in, agreement measured."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ...cli import get_host
from ...errors import UsageError


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@click.group("review")
def review_command() -> None:
    """Blind review of trajectory rows."""


@review_command.command("export")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for packets/, key.json and labels.template.json.",
)
@click.option("--sample", type=click.IntRange(min=1), help="Review a seeded sample of N rows instead of all.")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the sample, the shuffle and the packet names.",
)
def export_command(bundle: Path, out: Path, sample: int | None, seed: int) -> None:
    """Write blind packets: no condition, endpoint, original label, grounding or checker reason."""
    from ...reports import read_bundle
    from .review import export_packets

    registry = get_host(click.get_current_context()).registry
    texts = {name: str(defense.document.get("text") or "") for name, defense in registry.items("defenses").items()}
    count = export_packets(read_bundle(bundle).rows, out, sample=sample, seed=seed, condition_texts=texts)
    click.echo(f"{count} packets in {out / 'packets'}; give reviewers labels.template.json, keep key.json")


@review_command.command("import")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option("--key", "key_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option(
    "--labels",
    "label_paths",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    required=True,
    help="A reviewer's labels (repeatable; the file name names the reviewer).",
)
@click.option("--json", "as_json", is_flag=True)
def import_command(bundle: Path, key_path: Path, label_paths: tuple[Path, ...], as_json: bool) -> None:
    """Agreement with the original labels (and between reviewers): kappa, exact and within-one, Spearman."""
    from ...reports import read_bundle
    from .review import agreement_report, import_labels

    try:
        key = json.loads(key_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{key_path}: not a review key: {exc}") from None
    reviewers = {path.stem: import_labels(path) for path in label_paths}
    report = agreement_report(read_bundle(bundle).rows, key, reviewers)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    click.echo(f"{report['packets']} packets\n")
    click.echo(
        "| comparison | success agree | success kappa | refusal kappa | label agree | label kappa "
        "| grounding exact | within one | Spearman |"
    )
    click.echo("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for section, title in (("vs_original", "{} vs original"), ("between_reviewers", "{}")):
        for name, m in report[section].items():
            click.echo(
                f"| {title.format(name)} | {_fmt(m['success']['agreement'])} | {_fmt(m['success']['kappa'])} "
                f"| {_fmt(m['refusal']['kappa'])} | "
                f"{_fmt(m['label']['agreement'])} | {_fmt(m['label']['kappa'])} | {_fmt(m['grounding']['exact'])} "
                f"| {_fmt(m['grounding']['within_one'])} | {_fmt(m['grounding']['spearman'])} |"
            )
    counts = report["label_counts"]
    labels = sorted({label for per_source in counts.values() for label in per_source})
    click.echo(f"\n| label | {' | '.join(counts)} |")
    click.echo(f"|---|{'---:|' * len(counts)}")
    for label in labels:
        click.echo(f"| {label} | {' | '.join(str(per_source.get(label, 0)) for per_source in counts.values())} |")
