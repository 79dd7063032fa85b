"""Component specs on the command line: ``plugin[:key=value,key=value]``.

``openai:model=gpt-x,base_url=http://127.0.0.1:8000/v1`` names the ``openai``
backend with two options. A value may contain ``=`` and ``:``; commas separate
options, so a value with a comma is written with a backslash (``\\,``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

__all__ = ["ComponentSpec", "parse_spec"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ComponentSpec:
    """A plugin name with string options, and the text it was parsed from."""

    plugin: str
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form for run files and manifests."""
        return {"plugin": self.plugin, "options": dict(self.options)}


def _split_options(text: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part]


def parse_spec(text: str, *, what: str = "component") -> ComponentSpec:
    """Parse ``plugin[:key=value,...]``; raises UsageError with the offending text."""
    plugin, _, rest = text.partition(":")
    if not _NAME.match(plugin):
        raise UsageError(f"{what} spec {text!r}: expected PLUGIN[:key=value,...]")
    options: dict[str, str] = {}
    for part in _split_options(rest):
        key, eq, value = part.partition("=")
        if not eq or not key:
            # A bare word after the colon is the plugin's "mode" (scripted:comply).
            if "mode" in options or eq:
                raise UsageError(f"{what} spec {text!r}: option {part!r} is not key=value")
            options["mode"] = part
            continue
        if key in options:
            raise UsageError(f"{what} spec {text!r}: option {key!r} is given twice")
        options[key.strip()] = value.strip()
    return ComponentSpec(plugin, options, text)
