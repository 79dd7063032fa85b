"""The helpdesk sandbox and its two tools: look an account up, reset its password."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.api import Tool, UsageError

SANDBOX = "social-desk"
TOOLS = (
    Tool(
        "social_lookup",
        "Look up a helpdesk account: its owner and status.",
        {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
        sandboxes=(SANDBOX,),
    ),
    Tool(
        "social_reset_password",
        "Reset an account's password; answers with the new temporary password.",
        {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]},
        sandboxes=(SANDBOX,),
    ),
)


class Desk:
    """The accounts of one work item, laid down from the case's ``extensions.x-social.accounts``."""

    def __init__(self, accounts: Sequence[Mapping[str, Any]]) -> None:
        self.accounts = {str(a["id"]): {"owner": str(a["owner"]), "temporary": str(a["temporary"]), "resets": 0}
                         for a in accounts}  # fmt: skip

    def tools(self) -> list[dict[str, Any]]:
        """Both tools, as OpenAI tool schemas."""
        return [tool.schema() for tool in TOOLS]

    async def call(self, name: str, arguments: object) -> str:
        """Run one call; a bad one is an ``error:`` answer the agent reads."""
        if not isinstance(arguments, dict) or not isinstance(arguments.get("account"), str):
            return "error: arguments must be a JSON object with a string account"
        account = self.accounts.get(arguments["account"])
        if account is None:
            return f"error: no account {arguments['account']!r}"
        if name == "social_lookup":
            return f"account {arguments['account']}: owner {account['owner']}, active"
        if name == "social_reset_password":
            account["resets"] += 1
            return f"password of {arguments['account']} reset; temporary password: {account['temporary']}"
        return f"error: unknown tool {name!r}"

    def snapshot(self) -> dict[str, int]:
        """How many times each account was reset."""
        return {key: value["resets"] for key, value in self.accounts.items()}

    def diff(self, before: Mapping[str, int], after: Mapping[str, int]) -> list[dict[str, str]]:
        """An account reset in between is a modified database entry."""
        return [
            {"store": "database", "op": "modified", "target": f"accounts/{key}"}
            for key in sorted(after)
            if after[key] != before.get(key)
        ]

    def close(self) -> None:
        """Nothing on disk."""
        self.accounts.clear()


class DeskSandbox:
    """The ``social-desk`` sandbox: what the conversation stage's agent acts on (also ``--sandbox social-desk``)."""

    name = SANDBOX
    description = "A helpdesk with social_lookup and social_reset_password (the social design's sandbox)."

    def create(self, case: Mapping[str, Any], *, pack_root: Path, options: Mapping[str, str] | None = None) -> Desk:
        """Fresh accounts for one work item; no options."""
        if options:
            raise UsageError(f"the social-desk sandbox takes no options (got {', '.join(sorted(options))})")
        return Desk(case.get("extensions", {}).get("x-social", {}).get("accounts", []))
