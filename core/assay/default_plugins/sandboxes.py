"""The built-in ``local`` sandbox and the tools it implements."""

from __future__ import annotations

from ..components import Sandbox, Tool
from ..hookspecs import Register, hookimpl
from ..sandboxes.local import TOOL_SCHEMAS, LocalSandboxFactory


@hookimpl
def register_sandboxes(register: Register) -> None:
    """Register the local sandbox."""
    sandbox: Sandbox = LocalSandboxFactory()  # typed as the protocol so that mypy checks it satisfies it
    register(sandbox)


@hookimpl
def register_tools(register: Register) -> None:
    """Register the local sandbox's tools (files, email, database, memory, web, code)."""
    for schema in TOOL_SCHEMAS:
        function = schema["function"]
        register(Tool(function["name"], function["description"], function["parameters"], sandboxes=("local",)))
