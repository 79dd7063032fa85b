"""``assay permissions``: the permission runtime from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click

from ...errors import UsageError
from ...permissions.model import PermissionSet


@click.group("permissions")
def permissions_command() -> None:
    """The permission runtime: see what commands really read, write and execute."""


@permissions_command.command("trace", context_settings={"ignore_unknown_options": True})
@click.option(
    "--env",
    "case_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Run inside this case's environment jail (a kind: permission case file).",
)
@click.option(
    "--cwd",
    metavar="DIR",
    default=None,
    help="Working directory: a jail path with --env (default /), else a host path (default: here).",
)
@click.option(
    "--include-implicit", is_flag=True, help="Keep the runtime's implicit accesses (libraries, locale, /tmp...)."
)
@click.option(
    "--timeout",
    "timeout_s",
    metavar="SECONDS",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds before the command is killed.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def trace_command(
    case_path: Path | None, cwd: str | None, include_implicit: bool, timeout_s: float, command: tuple[str, ...]
) -> None:
    """Run COMMAND under strace and print the paths it read, wrote and executed as JSON.

    Put -- before the command, as in: assay permissions trace -- sh -c 'cat
    /etc/hostname > /tmp/x'. With --env the command runs in the case's
    environment (no policy, no network) and paths are jail paths; without it,
    it runs here, on the host. The command's own output goes to stderr.
    Exit 0 when the command succeeded, 1 when it failed or timed out (the
    JSON is printed all the same), 2 for usage errors such as a missing strace.
    """
    from ...permissions.trace import StraceNotFound
    from .jail import RUNTIME_IMPLICIT

    try:
        if case_path is not None:
            accessed, code, output = _trace_in_jail(case_path, list(command), cwd or "/", timeout_s)
        else:
            accessed, code, output = _trace_on_host(list(command), cwd, timeout_s)
    except StraceNotFound as exc:
        raise UsageError(str(exc)) from None
    if output:
        click.echo(output, err=True, nl=not output.endswith("\n"))
    if not include_implicit:
        accessed = accessed.without(RUNTIME_IMPLICIT)
    click.echo(json.dumps(accessed.to_mapping(), indent=2))
    if code != 0:
        click.echo(f"assay: the command {'timed out' if code is None else f'exited with {code}'}", err=True)
        raise click.exceptions.Exit(1)


def _trace_on_host(command: list[str], cwd: str | None, timeout_s: float) -> tuple[PermissionSet, int | None, str]:
    from ...permissions.trace import STRACE_OPTIONS, find_strace, parse_strace, with_interpreters

    strace = find_strace()
    directory = os.path.abspath(cwd or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="assay-trace-") as scratch:
        log = Path(scratch) / "strace.log"
        try:
            result = subprocess.run(
                [strace, *STRACE_OPTIONS, "-o", str(log), "--", *command],
                cwd=directory, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                timeout=timeout_s,
            )  # fmt: skip
            code: int | None = result.returncode
            output = result.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as exc:
            code, output = None, (exc.stdout or b"").decode("utf-8", "replace")
        except OSError as exc:
            raise click.ClickException(f"cannot run strace: {exc}") from None
        text = log.read_text(encoding="utf-8", errors="surrogateescape") if log.exists() else ""
    accessed, _ = parse_strace(text, cwd=directory)
    return with_interpreters(accessed, lambda path: _head(Path("/"), path)), code, output


def _trace_in_jail(
    case_path: Path, command: list[str], cwd: str, timeout_s: float
) -> tuple[PermissionSet, int | None, str]:
    from ...documents import DocumentError, load_document
    from ...permissions.trace import with_interpreters
    from ...sandboxes.box import box_dir, remove_box_dir
    from .environment import EnvironmentSpecError, materialize
    from .jail import JailError, run_in_jail

    try:
        case = load_document(case_path).data
    except DocumentError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise click.ClickException(f"{case_path}{line}: {exc.message}") from None
    environment: Any = case.get("environment") if isinstance(case, dict) else None
    scratch = box_dir("assay-jail-")
    try:
        layout = materialize(environment or {}, _pack_root(case_path), scratch / "root")
        result = run_in_jail(layout, command, policy=None, trace=True, timeout_s=timeout_s, cwd=cwd)
        accessed = with_interpreters(result.accessed or PermissionSet(), lambda path: _head(layout.host_root, path))
    except (EnvironmentSpecError, JailError, ValueError) as exc:
        raise click.ClickException(f"{case_path}: {exc}") from None
    finally:
        remove_box_dir(scratch)
    return accessed, result.exit_code, result.output


_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")


def _head(root: Path, path: str) -> bytes | None:
    """The first bytes of a jail path: the environment's copy, else the host's for the system directories.

    The environment's copy is read without following any link in it (the
    traced command could have swapped one in); host paths are read only
    under the read-only system directories the jail binds.
    """
    from ...sandboxes.beneath import Beneath, UnsafePath

    with Beneath(root) as tree:
        try:
            return tree.read_head(path, 256)
        except (OSError, UnsafePath):
            pass
    if path.startswith(_SYSTEM_PREFIXES):
        try:
            with open(path, "rb") as handle:
                return handle.read(256)
        except OSError:
            return None
    return None


def _pack_root(case_path: Path) -> Path | None:
    """The pack directory holding ``case_path`` (where fixtures are found), or None."""
    from ...packs import find_manifest

    for directory in case_path.resolve().parents:
        if find_manifest(directory) is not None:
            return directory
    return None
