"""Helpers the red-team tests share: lay out a jail environment, run Python in it, read the denials, call a tool."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from conftest import EXAMPLE_PACK

from assay.designs.permission.environment import Layout, materialize
from assay.designs.staged.sandbox import LocalSandboxFactory
from assay.sandboxes.box import box_dir, remove_box_dir

#: The executables a policy grants so that attacks written in Python (or bash) can run at all.
PYTHON = ("/bin/bash", "/usr/bin/python3*")


@contextlib.contextmanager
def laid_out(environment: Mapping[str, Any]) -> Iterator[Layout]:
    """A permission-task environment materialized in a fresh box directory, removed afterwards."""
    root = box_dir("assay-test-")
    try:
        yield materialize(environment, None, root / "root")
    finally:
        remove_box_dir(root)


def python(code: str) -> list[str]:
    """The argv that runs ``code`` (dedented) with the system Python, as a jailed command."""
    return ["/usr/bin/python3", "-c", textwrap.dedent(code)]


def denied(result: Any) -> set[tuple[str, str]]:
    """(op, path) of every denial a jail run recorded."""
    return {(d.op, d.path) for d in result.denials}


@contextlib.contextmanager
def example_sandbox(case: Mapping[str, Any]) -> Iterator[Any]:
    """A local exec sandbox for ``case`` over the example pack, closed afterwards."""
    box = LocalSandboxFactory().create(case, pack_root=EXAMPLE_PACK)
    try:
        yield box
    finally:
        box.close()


def call(box: Any, name: str, **arguments: Any) -> str:
    """One tool call, as the agent would make it."""
    return asyncio.run(box.call(name, arguments))


def hostile_run(out: Path, rules: list[dict[str, Any]], **settings: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``assay run`` (in this process) of the example pack against a loopback model that answers as ``rules`` say.

    ``rules`` is the test server's script (``{"match": REGEX, "replies": [...]}``, one reply per turn of the agent
    whose prompt matches); ``settings`` are :class:`~assay.engine.run.RunSettings` members (``stages``,
    ``defenses``, ...). Returns the run's outcome and its rows.
    """
    import json

    from assay.engine.run import RunSettings, execute_run
    from assay.testing.openai_server import LoopbackServer, parse_script

    server = LoopbackServer().start()
    server.server.script = parse_script(rules)
    try:
        endpoint = f"openai:model=hostile,base_url={server.openai_base_url}"
        outcome = execute_run(
            RunSettings(pack=str(EXAMPLE_PACK), endpoints=[endpoint], out=out, progress=False, **settings)
        )
    finally:
        server.close()
    rows = [json.loads(line) for line in (outcome.bundle / "rows.jsonl").read_text().splitlines()]
    return outcome, rows


def terminal_agent(*commands: str) -> list[dict[str, Any]]:
    """The script of a permission-stage execution agent that runs ``commands``, one a turn, then finishes."""
    import json

    steps = [json.dumps({"tool": "run", "arguments": {"command": command}}) for command in commands]
    steps.append(json.dumps({"tool": "finish", "arguments": {"summary": "done"}}))
    return [{"match": "^You complete a terminal task", "replies": steps}]


def finishes(function: Any, *args: Any, within: float = 300.0, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, asserting it returns at all: run in a thread and waited for ``within`` seconds.

    For defences against a hang (a FIFO that blocks a reader forever, a query that never ends): the bound is far
    beyond any loaded machine's slowness, so the test never depends on how fast the machine is, and a broken
    defence fails it instead of hanging the suite.
    """
    import threading

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's own thread below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), f"{getattr(function, '__name__', function)} did not return within {within:g} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def row_skeleton(**stages: Any) -> dict[str, Any]:
    """A schema-valid result row holding ``stages``: what a plugin is handed to spoil in the row-settling attacks."""
    return {
        "spec_version": "1.1",
        "key": {"case_id": "c", "endpoint": "e", "condition": "D0", "seed": 0, "epoch": 0, "protocol": "p"},
        "case_digest": "sha256:" + "0" * 64,
        "scripted": True,
        "transcript": {"messages": []},
        "final_output": None,
        "stages": stages,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "model_calls": 0, "wall_time_s": 0.0},
        "errors": [],
    }
