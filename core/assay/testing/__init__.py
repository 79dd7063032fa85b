"""Test and benchmark helpers that need no model and no network beyond loopback.

:mod:`assay.testing.openai_server` is a small OpenAI-compatible chat-completions
server with deterministic replies and scheduled faults. Import it directly;
this package deliberately re-exports nothing, because importing the submodule
here would make ``python -m assay.testing.openai_server`` warn that the module
was already imported before it ran.
"""

from __future__ import annotations

__all__: list[str] = []
