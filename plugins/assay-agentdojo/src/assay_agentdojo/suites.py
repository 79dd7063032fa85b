"""AgentDojo's suites as the installed ``agentdojo`` package defines them.

Nothing here imports ``agentdojo`` until a suite is asked for: loading the
plugin (every assay command does) costs no more than reading one small file of
the installed distribution.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.metadata
import inspect
import types
from typing import Any

__all__ = [
    "BENCHMARK_VERSION",
    "FROZEN_NOW",
    "NAMESPACE",
    "SUITES",
    "agentdojo_version",
    "freeze_clock",
    "installed_fingerprint",
    "source_digest",
    "suite",
]

#: The four suites of AgentDojo, each one pack (``agentdojo-<suite>``).
SUITES = ("workspace", "travel", "banking", "slack")
#: The benchmark version the packs are generated from: AgentDojo's own default (``--benchmark-version``).
BENCHMARK_VERSION = "v1.2.2"
#: The plugin's namespace in extension names (``x-agentdojo.task``) and in case and condition ``extensions``.
NAMESPACE = "x-agentdojo"
#: What the tools that stamp the current time (a sent email, a created file) stamp during an assay run, so that
#: the same run gives the same bytes: after every date in the suites' data, as a real clock would be.
FROZEN_NOW = datetime.datetime(2025, 1, 1, 9, 0, 0)


def agentdojo_version() -> str:
    """The installed agentdojo's version."""
    return importlib.metadata.version("agentdojo")


def installed_fingerprint() -> str:
    """sha256 over the installed agentdojo distribution's RECORD, which lists every file it installed with that
    file's own sha256: any change to a suite's data or code gives another fingerprint."""
    record = importlib.metadata.distribution("agentdojo").read_text("RECORD") or ""
    return hashlib.sha256(record.encode("utf-8")).hexdigest()


@functools.cache
def suite(name: str) -> Any:
    """The installed agentdojo's suite ``name`` at :data:`BENCHMARK_VERSION` (imported on first use)."""
    from agentdojo.task_suite.load_suites import get_suite

    if name not in SUITES:
        raise KeyError(f"unknown AgentDojo suite {name!r} (known: {', '.join(SUITES)})")
    return get_suite(BENCHMARK_VERSION, name)


def source_digest(task: Any) -> str:
    """sha256 of a task class's source: its prompt, ground truth and checks, so a changed check changes the pack."""
    try:
        text = inspect.getsource(type(task))
    except (OSError, TypeError):  # no source shipped: fall back to what the class defines
        text = repr(sorted((k, repr(v)) for k, v in vars(type(task)).items() if not k.startswith("__")))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class _FrozenDatetime(datetime.datetime):
    """``datetime.datetime`` whose ``now()`` is :data:`FROZEN_NOW`."""

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> Any:
        """The frozen instant (in ``tz`` when given)."""
        return FROZEN_NOW if tz is None else FROZEN_NOW.replace(tzinfo=tz)


@functools.cache
def freeze_clock() -> None:
    """Make AgentDojo's tools stamp :data:`FROZEN_NOW` instead of the wall clock.

    ``send_email``, ``create_file`` and ``append_to_file`` stamp ``datetime.datetime.now()`` into what they
    return, which the agent reads: with the wall clock, the same scripted run would give other bytes every time.
    Their modules' ``datetime`` is replaced by a copy whose ``datetime.now()`` is frozen; AgentDojo's checks
    compare no stamp with the clock, and AgentDojo's own runner, in the same process, sees the same clock.
    Called when the first environment is made, never when the plugin loads.
    """
    from agentdojo.default_suites.v1.tools import cloud_drive_client, email_client
    from agentdojo.default_suites.v1.tools import types as email_types

    shim = types.ModuleType("datetime")
    shim.__dict__.update(datetime.__dict__)
    setattr(shim, "datetime", _FrozenDatetime)  # noqa: B010  (a module object: no attribute to type-check)
    for module in (cloud_drive_client, email_client):
        module.datetime = shim
    # An email made without a timestamp gets one from its model's default factory, bound to the real clock.
    email_types.Email.model_fields["timestamp"].default_factory = _FrozenDatetime.now
    email_types.Email.model_rebuild(force=True)
