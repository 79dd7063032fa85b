"""The ``assay`` command line.

Commands are plugins: the group asks the plugin host for them (built-ins are
registered by :mod:`assay.default_plugins.commands`). Only this package turns
:class:`assay.errors.AssayError` into messages and exit codes: 0 success,
1 invalid input or failed check, 2 usage. Set ``ASSAY_TRACEBACK=1`` (or pass
``--traceback``) to see the traceback of an error instead of its one line.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .. import __version__
from ..errors import AssayError, UsageError
from ..plugins import PluginHost, load_plugins

__all__ = ["AssayGroup", "cli", "describe_os_error", "get_host", "main", "one_line"]


def get_host(ctx: click.Context) -> PluginHost:
    """The plugin host of this invocation, loaded on first use."""
    root = ctx.find_root()
    root.ensure_object(dict)
    if "host" not in root.obj:
        root.obj["host"] = load_plugins()
    host: PluginHost = root.obj["host"]
    return host


class AssayGroup(click.Group):
    """A click group whose commands come from the ``register_commands`` hook."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Names of every registered command, sorted."""
        return get_host(ctx).registry.names("commands")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The registered command of that name, or None."""
        return get_host(ctx).registry.get("commands", cmd_name)


@click.group(cls=AssayGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="assay", message="%(prog)s %(version)s")
@click.option("--traceback", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, traceback: bool) -> None:
    """assay: an open standard and engine for agent-safety benchmarks."""
    # --traceback is read from the arguments by main(), which alone prints errors; nothing global is set.
    ctx.ensure_object(dict)


def _wants_traceback(argv: list[str]) -> bool:
    return "--traceback" in argv or os.environ.get("ASSAY_TRACEBACK", "") not in ("", "0")


def one_line(text: str) -> str:
    """``text`` as one line: its first non-empty line, with a note of how many lines followed.

    Errors can carry a child's whole stderr (a jail that could not be built);
    the CLI prints one line per error, and ``--traceback`` shows the rest.
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    more = len(lines) - 1
    return (
        lines[0] if not more else f"{lines[0]} (and {more} more line{'s' if more > 1 else ''}; --traceback shows all)"
    )


def describe_os_error(exc: OSError) -> str:
    """An operating-system error as ``PATH: reason``, the way a user reads it."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    names = [name for name in (exc.filename, exc.filename2) if name is not None]
    return f"{' -> '.join(os.fsdecode(name) for name in names)}: {reason}" if names else reason


def interrupted(args: list[str]) -> str:
    """What to say on Ctrl-C: for ``assay run``, the exact command that resumes it (the finished rows are kept)."""
    import shlex

    words = [arg for arg in args if arg != "--traceback"]
    if words[:1] != ["run"]:
        return "assay: interrupted"
    resume = words if "--resume" in words else [*words, "--resume"]
    return f"assay: interrupted; the finished rows are kept, resume with: {shlex.join(['assay', *resume])}"


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``assay`` script; returns the process exit code.

    Every error a user can cause ends here as one line on stderr and an exit
    status: 2 for usage errors, 1 for invalid input or a failed check (each
    :class:`~assay.errors.AssayError` says its own, ``exit_code``), 130 for
    Ctrl-C (with the command that resumes an interrupted run). Operating-
    system errors (a missing or unreadable file, a full disk) are reported the
    same way. ``--traceback`` (or ``ASSAY_TRACEBACK=1``) re-raises instead.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return cli.main(args=args, prog_name="assay", standalone_mode=False) or 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:  # Ctrl-C (click turns KeyboardInterrupt into Abort)
        click.echo(interrupted(args), err=True)
        return 130
    except click.UsageError as exc:
        click.echo(f"assay: usage: {one_line(exc.format_message())}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"assay: error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except AssayError as exc:
        if _wants_traceback(args):
            raise
        label = "usage" if isinstance(exc, UsageError) else "error"
        for finding in getattr(exc, "findings", ()):  # one line per problem the error stands for (PackInvalid)
            click.echo(finding, err=True)
        click.echo(f"assay: {label}: {one_line(str(exc))}", err=True)
        return exc.exit_code
    except OSError as exc:
        if _wants_traceback(args):
            raise
        click.echo(f"assay: error: {one_line(describe_os_error(exc))}", err=True)
        return 1
