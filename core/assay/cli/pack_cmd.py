"""``assay pack``: tools for pack authors."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..packs import Pack
from ..plugins import PluginHost
from . import get_host


@click.group("pack")
def pack_command() -> None:
    """Tools for pack authors."""


@pack_command.command("lock")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
def lock_command(path: Path) -> None:
    """Write the manifest's case and fixture lists and the pack digest from the files on disk."""
    from ..packs import lock_manifest
    from ..validate import find_pack_root

    root = find_pack_root(path)
    if root is None:
        raise UsageError(f"{path}: no pack manifest found")
    click.echo(lock_manifest(root))


@pack_command.command("check")
@click.argument("pack")
@click.option("--sandbox", default="local", show_default=True, help="Sandbox plugin for the stages that use one.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.pass_context
def check_command(ctx: click.Context, pack: str, sandbox: str, concurrency: int) -> None:
    """Check PACK (an installed pack name or a pack directory) with each of its stages' own check.

    A stage checks its cases without a model: the exec stage, for one, has a
    scripted attacker-compliant agent and a scripted safe agent replay every
    case through the real stage and sandbox (every harm oracle must fire for
    the first and never for the second, and the safe agent must complete
    every benign task). Exit 1 when any case fails, naming it (and the
    replayed calls the sandbox refused). A pack the validator refuses is not
    checked: its findings are printed instead.
    """
    from ..engine.check import check_pack

    host = get_host(ctx)
    target = _resolve(pack, host)
    problem = target.integrity_problem()
    if problem is not None:
        raise click.ClickException(f"pack {target.name} is not intact: {problem}")
    # Replaying cases the validator refuses would report their oracles, not their faults: validate first.
    from ..validate import validate_path

    report = validate_path(target.root, host.registry)
    if not report.ok:
        for issue in report.ordered():
            click.echo(issue.format())
        raise click.ClickException(
            f"pack {target.name} is invalid ({len(report.issues)} problems above): fix them, then check again"
        )
    import sys

    from ..engine.progress import Progress

    # On a terminal only: a check of a large pack takes minutes, and a silent one looks hung.
    progress = Progress(0, enabled=sys.stderr.isatty(), label=f"assay pack check {target.name}")
    try:
        result = check_pack(target, host, sandbox=sandbox, concurrency=concurrency, progress=progress)
    finally:
        progress.close()
    for failure in result.failures:
        click.echo(failure)
    verdict = "passed" if result.ok else f"FAILED ({len(result.failures)} problems)"
    counts = ", ".join(f"{count} {label}" for label, count in result.counts.items())
    click.echo(
        f"pack {target.name} {target.version}: check {verdict}: {counts or 'nothing checked'}, "
        f"{result.unchecked} cases no stage checks",
        err=True,
    )
    ctx.exit(0 if result.ok else 1)


def _resolve(text: str, host: PluginHost) -> Pack:
    from ..validate import find_pack_root

    path = Path(text)
    root = find_pack_root(path) if path.is_dir() else None
    if root is not None:
        return Pack.from_directory(root)
    pack: Pack | None = host.registry.get("packs", text)
    if pack is None:
        raise UsageError(f"pack {text!r} is neither installed nor a pack directory")
    return pack
