"""``assay run``: run a pack against endpoints and seal a validated bundle."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..errors import UsageError
from . import get_host

_FILE_KEYS = {
    "pack", "endpoints", "defenses", "seeds", "stages", "judge", "out", "limit", "sample", "sample_seed",
    "concurrency", "executor", "epochs", "max_tokens", "temperature", "sandbox",
    "max_model_calls", "wall_time", "context_window", "max_error_rate",
}  # fmt: skip


def _stage_options(ctx: click.Context) -> dict[str, Any]:
    """Every registered stage's run options by name (stages may share one)."""
    options: dict[str, Any] = {}
    for stage in get_host(ctx).registry.items("stages").values():
        for option in stage.options:
            options.setdefault(option.name, option)
    return options


class RunCommand(click.Command):
    """``assay run``, whose options include those of every registered stage (see :class:`assay.api.RunOption`)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """The command's own options, then one per registered stage option."""
        params = super().get_params(ctx)
        known = {param.name for param in params}
        extra: list[click.Parameter] = [
            click.Option(
                [f"--{option.name.replace('_', '-')}", option.name],
                help=option.help,
                type=click.Choice(option.choices) if option.choices else None,
            )
            for option in _stage_options(ctx).values()
            if option.name not in known
        ]
        return [*params[:-1], *extra, params[-1]]  # --help stays last


def _int_list(text: str, what: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected comma-separated integers") from None


def _from_file(path: Path, stage_options: Mapping[str, Any]) -> dict[str, Any]:
    from ..documents import DocumentError, load_document

    try:
        data = load_document(path).data
    except DocumentError as exc:
        raise UsageError(f"{path}:{exc.line or 1}: {exc.message}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a run file is a mapping of run settings")
    known = _FILE_KEYS | set(stage_options)
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return data


def save_run_file(path: Path, data: dict[str, Any]) -> None:
    """Update (or create) a run file with ``data``; ruamel's round trip keeps comments and order."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    from ..bundle import write_bytes_atomic

    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    document = yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None
    if document is None:
        document = CommentedMap()
    if not isinstance(document, dict):
        raise UsageError(f"{path}: a run file is a mapping of run settings")
    for key, value in data.items():
        value = str(value) if isinstance(value, Path) else value
        if document.get(key) != value:
            document[key] = value
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    write_bytes_atomic(path, buffer.getvalue().encode("utf-8"))


@click.command("run", cls=RunCommand)
@click.argument("run_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pack", help="Pack NAME[@VERSION] (installed) or a pack directory.")
@click.option(
    "--endpoint",
    "endpoints",
    multiple=True,
    help="Endpoint spec, repeatable: scripted:mixed, local, openai:model=M,base_url=U[,id=NAME].",
)
@click.option(
    "--defense",
    "--condition",
    "defenses",
    multiple=True,
    help="Condition, repeatable: a registered defense policy or prompt condition ('assay plugins' lists them; "
    "default: the conditions the pack's families name, else the registered default conditions).",
)
@click.option("--seeds", help="Comma-separated seeds (default 0).")
@click.option("--stages", help="Comma-separated stages (default: every stage the pack's cases support).")
@click.option("--judge", help="Judge spec: calibrated (default), rule, or llm:backend=NAME,<backend options>.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Output folder (bundle/, bundle.zip, state/)."
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N cases (in id order).")
@click.option("--sample", help="stratified:N (N cases per family) or limit:N.")
@click.option("--sample-seed", type=click.IntRange(min=0), help="Seed of the stratified draw (recorded; default 0).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Work items in flight (default 16).")
@click.option("--executor", help="Executor spec: local (default) or ray[:address=...,batch=N].")
@click.option("--sandbox", help="Sandbox spec for the stages that use one (default local).")
@click.option(
    "--max-model-calls",
    type=click.IntRange(min=1),
    help="Agent-loop budget: model calls per task, shared by every condition (default: each case's own).",
)
@click.option(
    "--wall-time",
    type=click.FloatRange(min=0, min_open=True),
    help="Agent-loop budget: wall-clock seconds per task (default: each case's own).",
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    help="Agent-loop context policy: keep the task and the last N exchanges (default: full context).",
)
@click.option("--epochs", type=click.IntRange(min=1), help="Repetitions of every item (default 1).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Completion token budget per call (default 256).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in --out.")
@click.option(
    "--retry-errors",
    is_flag=True,
    help="With --resume: run the work items whose rows are error rows again (what succeeded is cached).",
)
@click.option(
    "--no-preflight",
    is_flag=True,
    help="Do not send each endpoint one request before the run (it stops a dead endpoint in seconds).",
)
@click.option(
    "--max-error-rate",
    type=click.FloatRange(min=0, max=1),
    help="Share of an endpoint's rows that may be error rows; beyond it the run exits 1 (default 0.1).",
)
@click.option(
    "--save",
    "save_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the effective settings to this run file (comments in an existing file are kept) and exit.",
)
@click.option("--quiet", is_flag=True, help="No progress display.")
@click.pass_context
def run_command(ctx: click.Context, /, run_file: Path | None, **options: Any) -> None:
    """Run a pack against endpoints; write a sealed, validated bundle.

    Settings come from RUN_FILE (YAML or JSON, keys as the long options with
    underscores, lists for endpoints/defenses/seeds/stages) and/or the options;
    options win.
    """
    from ..engine.run import RunSettings, execute_run
    from ..health import DEFAULT_MAX_ERROR_RATE

    stage_options = _stage_options(ctx)
    data = _from_file(run_file, stage_options) if run_file else {}
    for key in (
        "pack",
        "judge",
        "out",
        "max_error_rate",
        "limit",
        "sample",
        "sample_seed",
        "concurrency",
        "executor",
        "epochs",
        "max_tokens",
        "sandbox",
        "max_model_calls",
        "wall_time",
        "context_window",
        *stage_options,
    ):
        if options.get(key) is not None:
            data[key] = options[key]
    if options["endpoints"]:
        data["endpoints"] = list(options["endpoints"])
    if options["defenses"]:
        data["defenses"] = list(options["defenses"])
    if options["seeds"]:
        data["seeds"] = _int_list(options["seeds"], "--seeds")
    if options["stages"]:
        data["stages"] = [s.strip() for s in options["stages"].split(",") if s.strip()]
    if options["save_path"] is not None:
        save_run_file(options["save_path"], data)
        click.echo(f"run settings written to {options['save_path']}")
        return
    for required in ("pack", "out"):
        if not data.get(required):
            raise UsageError(f"--{required} is required (or '{required}:' in the run file)")
    if isinstance(data.get("endpoints"), str):
        data["endpoints"] = [data["endpoints"]]
    settings = RunSettings(
        pack=str(data["pack"]),
        endpoints=list(data.get("endpoints") or []),
        out=Path(data["out"]),
        defenses=list(data.get("defenses") or []),
        seeds=[int(s) for s in data.get("seeds") or [0]],
        stages=data.get("stages"),
        judge=str(data.get("judge") or "calibrated"),
        limit=_maybe_whole(data, "limit"),
        sample=data.get("sample"),
        sample_seed=_whole(data, "sample_seed", 0),
        concurrency=_whole(data, "concurrency", 16),
        resume=options["resume"],
        executor=str(data.get("executor") or "local"),
        epochs=_whole(data, "epochs", 1),
        max_tokens=_whole(data, "max_tokens", 256),
        temperature=float(data.get("temperature") or 0.0),
        progress=not options["quiet"],
        sandbox=str(data.get("sandbox") or "local"),
        max_model_calls=int(data["max_model_calls"]) if data.get("max_model_calls") else None,
        wall_time_s=float(data["wall_time"]) if data.get("wall_time") else None,
        context_window=int(data["context_window"]) if data.get("context_window") else None,
        stage_options={name: str(data[name]) for name in stage_options if data.get(name) is not None},
        preflight=not options["no_preflight"],
        max_error_rate=_share(data.get("max_error_rate"), DEFAULT_MAX_ERROR_RATE),
        retry_errors=options["retry_errors"],
    )
    outcome = execute_run(settings, host=get_host(ctx))
    for issue in outcome.report.ordered():
        click.echo(issue.format())
    if outcome.excluded_cases:
        skipped = ", ".join(f"{n} {family}" for family, n in sorted(outcome.excluded_cases.items()))
        click.echo(f"note: cases with no stage in this run were left out: {skipped}", err=True)
    verdict = "valid" if outcome.report.ok else "INVALID"
    retried = f", {outcome.retried_rows} retried" if outcome.retried_rows else ""
    click.echo(
        f"bundle: {outcome.bundle} ({outcome.rows} rows, {outcome.error_rows} error rows, "
        f"{outcome.resumed_rows} resumed{retried}; {verdict})"
    )
    click.echo(f"archive: {outcome.archive}")
    for warning in outcome.warnings:
        if warning not in outcome.failures:
            click.echo(f"warning: {warning}", err=True)
    if outcome.failures:
        # The bundle is a faithful record and stays; the exit status says it measured too little to use.
        click.echo(f"assay: error: {outcome.failures[0]}", err=True)
        click.echo(
            "assay: the run failed its error-rate check; fix what its first error names (an endpoint, a plugin), "
            "then run the same command with --resume --retry-errors",
            err=True,
        )
        ctx.exit(1)
    ctx.exit(0 if outcome.report.ok else 1)


def _whole(data: dict[str, Any], key: str, default: int) -> int:
    """A whole-number setting (option or run file); a value that is not one is a usage error, never replaced."""
    value = data.get(key)
    if value is None:
        return default
    return _as_whole(key, value)


def _maybe_whole(data: dict[str, Any], key: str) -> int | None:
    """As :func:`_whole`, for a setting that may be absent."""
    value = data.get(key)
    return None if value is None else _as_whole(key, value)


def _as_whole(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().lstrip("-").isdigit():
        raise UsageError(f"{key.replace('_', '-')} {value!r}: expected a whole number")
    return int(value)


def _share(value: Any, default: float) -> float:
    """A share between 0 and 1 (option or run file)."""
    if value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UsageError(f"max-error-rate {value!r}: expected a share between 0 and 1") from None
