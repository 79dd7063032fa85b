"""Benchmark: do the trajectory and permission stages overlap their items' confined children?

A scripted tool-using agent is played by the loopback OpenAI-compatible
server (its own process, 300 ms latency per reply) through the ``openai``
backend. Each stage runs the same 16 items twice in one invocation, at
concurrency 1 and at concurrency 8, and the script prints both wall times,
their ratio, and how many confined children (``run_confined`` for the
trajectory stage, ``run_in_jail`` for the permission stage) were ever in
progress at once. Target: concurrency 8 at least 3x faster than concurrency 1.

* trajectory: the ``secagent`` pack's first 16 tasks under the ``standard``
  condition; the agent lists the workspace, runs the tests, writes a finding,
  runs the tests again and finishes (two confined test runs plus the checker).
* permission: the ``authbench`` pack's first 16 tasks under a generated policy
  (``D0``); the policy agent lists the environment and submits a broad policy,
  the execution agent runs two commands in the jail and finishes (plus the
  utility and attack verifiers, each a jail of its own).

    python bench/stage_concurrency.py [--items 16] [--latency-ms 300] [--concurrency 8] [--stage trajectory]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.designs.permission import stage as permission
from assay.designs.trajectory import stage as trajectory
from assay.engine.run import RunSettings, execute_run
from assay.plugins import load_plugins
from assay.testing.openai_server import spawn_server, stop_server

TARGET_SPEEDUP = 3.0


def _action(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


#: The agent the server plays: one rule per system prompt (trajectory agent, policy agent, execution agent).
SCRIPT = [
    {
        "match": "You are a security engineer",
        "replies": [
            _action("list_files", path="."),
            _action("run_tests"),
            _action("write_file", path="artifacts/finding.md", content="Finding: see the failing test."),
            _action("run_tests"),
            _action("finish", summary="Reported the finding."),
        ],
    },
    {
        "match": "infer the minimal file\\s+permissions",
        "replies": [
            _action("list", path="/"),
            _action("submit_policy", policy={"read": ["/**"], "write": ["/srv/**", "/tmp/**"], "execute": ["/**"]}),
        ],
    },
    {
        "match": "You complete a terminal task by running shell commands",
        "replies": [
            _action("run", command="ls -la /"),
            _action("run", command="cat /etc/hostname; ls /srv /opt 2>/dev/null | head"),
            _action("finish", summary="Looked around."),
        ],
    },
]

STAGES = {
    # stage: (pack, condition, the module and name of the confined call to count)
    "trajectory": ("secagent", "standard", trajectory, "run_confined"),
    "permission": ("authbench", "D0", permission, "run_in_jail"),
}


class InFlight:
    """Wraps a blocking function and records how many calls were ever in progress at once."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.now = self.peak = self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        try:
            return self.inner(*args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


def timed(stage: str, concurrency: int, items: int, base_url: str, out: Path, host: Any) -> tuple[float, InFlight]:
    """Wall seconds of one run of ``items`` items of ``stage`` at ``concurrency``, and its children's overlap."""
    pack, condition, module, name = STAGES[stage]
    original = getattr(module, name)
    counter = InFlight(original)
    setattr(module, name, counter)
    try:
        settings = RunSettings(
            pack=pack,
            endpoints=[f"openai:model=agent,base_url={base_url}/v1,concurrency={concurrency},id=agent"],
            defenses=[condition],
            stages=[stage],
            limit=items,
            concurrency=concurrency,
            out=out,
            progress=False,
        )
        began = time.perf_counter()
        outcome = execute_run(settings, host=host)
        wall = time.perf_counter() - began
    finally:
        setattr(module, name, original)
    if outcome.error_rows or not outcome.report.ok:
        raise SystemExit(f"{stage} run not clean: {outcome.error_rows} error rows, valid={outcome.report.ok}")
    return wall, counter


def main() -> int:
    """Run each stage at concurrency 1 and N; exit 1 when a speed-up misses the target."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--stage", choices=sorted(STAGES), action="append", help="default: both")
    args = parser.parse_args()

    host = load_plugins()
    for stage in args.stage or sorted(STAGES):
        if host.registry.get("packs", STAGES[stage][0]) is None:
            print(f"the {STAGES[stage][0]} pack is not installed (make install-test installs it)", file=sys.stderr)
            return 1
    missed = 0
    proc, base_url = spawn_server(latency_ms=args.latency_ms, script=SCRIPT)
    try:
        with tempfile.TemporaryDirectory(prefix="assay-stage-concurrency-") as scratch:
            for stage in args.stage or sorted(STAGES):
                serial, one = timed(stage, 1, args.items, base_url, Path(scratch) / f"{stage}-1", host)
                parallel, many = timed(
                    stage, args.concurrency, args.items, base_url, Path(scratch) / f"{stage}-n", host
                )
                speedup = serial / parallel
                met = speedup >= TARGET_SPEEDUP
                missed += not met
                print(
                    f"{stage}: {args.items} items, {args.latency_ms:g} ms per model reply; "
                    f"concurrency 1: {serial:.1f} s ({one.calls} confined children, at most {one.peak} at once); "
                    f"concurrency {args.concurrency}: {parallel:.1f} s ({many.calls} children, "
                    f"at most {many.peak} at once); speed-up {speedup:.1f}x "
                    f"(target >= {TARGET_SPEEDUP:g}x): {'met' if met else 'NOT met'}"
                )
    finally:
        stop_server(proc)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
