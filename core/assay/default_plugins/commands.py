"""The generic CLI commands, registered through ``register_commands`` like any plugin's (a design registers its own)."""

from __future__ import annotations

from ..hookspecs import Register, hookimpl


@hookimpl
def register_commands(register: Register) -> None:
    """Register the built-in commands."""
    # Imported here so that loading plugins does not import click commands
    # until commands are actually wanted.
    from ..cli.compare_cmd import compare_command
    from ..cli.export_cmd import export_command
    from ..cli.hash_cmd import hash_command
    from ..cli.leaderboard_cmd import leaderboard_command
    from ..cli.pack_cmd import pack_command
    from ..cli.packs_cmd import packs_command
    from ..cli.plugins_cmd import plugins_command
    from ..cli.registry_cmd import registry_command
    from ..cli.report_cmd import report_command
    from ..cli.run_cmd import run_command
    from ..cli.schema_cmd import schema_command
    from ..cli.sign_cmd import keygen_command, sign_command
    from ..cli.validate_cmd import validate_command

    for command in (
        compare_command,
        export_command,
        hash_command,
        keygen_command,
        leaderboard_command,
        pack_command,
        packs_command,
        plugins_command,
        registry_command,
        report_command,
        run_command,
        schema_command,
        sign_command,
        validate_command,
    ):
        register(command)
