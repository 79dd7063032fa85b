"""Benchmark: what confinement costs per agent command, against a plain child process.

Every command of the permission stage's execution agent runs in a fresh box
(bubblewrap namespaces, an unprivileged uid, limits, Landlock, seccomp, strace
attached from outside). This times one short command (``gzip -c`` of a small
file into an output folder, what a typical task step does) three ways over the
example pack's environment:

* plain:        ``subprocess.run(["/bin/bash", "-c", CMD])`` on the host (the peer);
* unrestricted: ``run_in_jail(policy=None)`` (the box, no policy, no trace);
* enforced:     ``run_in_jail(policy=curated)`` (the box, Landlock for the policy, the strace trace of denials).

The exec stage's ``code_run`` tool runs the agent's Python in the same box; it
is timed through the local sandbox's own tool against ``python3 -c`` on the
host, with one small program (an import and a print, what an agent's snippet does).

It prints the median wall time of each and the ratios to plain. Target: an
enforced command costs under 250 ms, so a 20-command task spends under 5 s in
the box (a model call of the embedded model takes about 1 s); exit 1 when missed.

    python bench/jail_overhead.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from assay.designs.permission.environment import materialize
from assay.designs.permission.jail import run_in_jail
from assay.designs.staged.sandbox import LocalSandboxFactory
from assay.errors import ConfinementError
from assay.permissions.model import PermissionSet
from assay.sandboxes.box import box_dir, check_box, remove_box_dir

TARGET_ENFORCED_S = 0.25
ENVIRONMENT = {
    "directories": ["/srv/app/archive"],
    "files": [{"path": "/srv/app/logs/app.log.1", "content": "old log line\n" * 200}],
}
POLICY = PermissionSet.from_mapping(
    {
        "read": ["/srv/app/logs/app.log.1"],
        "write": ["/srv/app/archive/**"],
        "execute": ["/usr/bin/gzip", "/usr/bin/bash"],
    }
)
COMMAND = "gzip -c /srv/app/logs/app.log.1 > /srv/app/archive/app.log.1.gz"
CODE = "import json\nprint(json.dumps({'total': sum(range(1000))}))"
CODE_CASE = {"id": "bench", "kind": "benign", "family": "bench", "environment": {}}


def _median(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _code_run_times(repeat: int) -> tuple[float, float]:
    """Median wall time of ``code_run`` through the local sandbox's tool, and of the same program on the host."""
    plain = _median(lambda: subprocess.run([sys.executable, "-I", "-c", CODE], check=True, capture_output=True), repeat)
    sandbox = LocalSandboxFactory().create(CODE_CASE, pack_root=Path("."))
    try:

        def boxed() -> None:
            result = asyncio.run(sandbox.call("code_run", {"code": CODE}))
            if not result.startswith("exit 0"):
                raise SystemExit(f"code_run failed: {result}")

        return plain, _median(boxed, repeat)
    finally:
        sandbox.close()


def main() -> int:
    """Time each way and print the ratios; exit 1 if the enforced target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    try:
        check_box()
    except ConfinementError as error:
        print(f"cannot measure: {error}", file=sys.stderr)
        return 1
    scratch = box_dir("assay-bench-")
    try:
        layout = materialize(ENVIRONMENT, None, scratch / "root")
        host_file = layout.host_path("/srv/app/logs/app.log.1")
        host_out = layout.host_path("/srv/app/archive") / "plain.gz"
        plain = _median(
            lambda: subprocess.run(["/bin/bash", "-c", f"gzip -c {host_file} > {host_out}"], check=True), args.repeat
        )
        free = _median(lambda: run_in_jail(layout, COMMAND, policy=None), args.repeat)
        enforced = _median(lambda: run_in_jail(layout, COMMAND, policy=POLICY), args.repeat)
    finally:
        remove_box_dir(scratch)
    code_plain, code_boxed = _code_run_times(args.repeat)
    print(f"plain child process       {plain * 1000:8.1f} ms")
    print(f"jail, unrestricted        {free * 1000:8.1f} ms  ({free / plain:.1f}x plain)")
    print(
        f"jail, enforced + traced   {enforced * 1000:8.1f} ms  ({enforced / plain:.1f}x plain; "
        f"target < {TARGET_ENFORCED_S * 1000:.0f} ms: {'met' if enforced < TARGET_ENFORCED_S else 'MISSED'})"
    )
    print(f"python3 -c on the host    {code_plain * 1000:8.1f} ms")
    print(
        f"exec code_run (boxed)     {code_boxed * 1000:8.1f} ms  ({code_boxed / code_plain:.1f}x plain; "
        f"overhead {(code_boxed - code_plain) * 1000:.1f} ms)"
    )
    return 0 if enforced < TARGET_ENFORCED_S else 1


if __name__ == "__main__":
    sys.exit(main())
