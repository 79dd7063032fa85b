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

__all__ = ["AssayGroup", "cli", "get_host", "main"]


def get_host(ctx: click.Context) -> PluginHost:
    """The plugin host of this invocation, loaded on first use."""
    root = ctx.find_root()
    root.ensure_object(dict)
    if "host" not in root.obj:
        root.obj["host"] = load_plugins()
    return root.obj["host"]


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
    ctx.ensure_object(dict)
    if traceback:
        os.environ["ASSAY_TRACEBACK"] = "1"


def _wants_traceback(argv: list[str]) -> bool:
    return "--traceback" in argv or os.environ.get("ASSAY_TRACEBACK", "") not in ("", "0")


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``assay`` script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return cli.main(args=args, prog_name="assay", standalone_mode=False) or 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("assay: aborted", err=True)
        return 1
    except click.UsageError as exc:
        click.echo(f"assay: usage: {exc.format_message()}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"assay: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except UsageError as exc:
        if _wants_traceback(args):
            raise
        click.echo(f"assay: usage: {exc}", err=True)
        return 2
    except AssayError as exc:
        if _wants_traceback(args):
            raise
        click.echo(f"assay: error: {exc}", err=True)
        return 1
