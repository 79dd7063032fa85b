"""Benchmark: what the permission jail costs per agent command, against a plain child process.

Every command of the permission stage's execution agent runs in a fresh jail
(new namespaces, read-only binds, pivot_root, Landlock, strace). This times
one short command (``gzip -c`` of a small file into an output folder, what a
typical task step does) three ways over the example pack's environment:

* plain:        ``subprocess.run(["/bin/bash", "-c", CMD])`` on the host (the peer);
* unrestricted: ``run_in_jail(policy=None)`` (namespaces, no Landlock, no trace);
* enforced:     ``run_in_jail(policy=curated)`` (Landlock plus the strace trace of denials).

It prints the median wall time of each and the ratios to plain. Target: an
enforced command costs under 250 ms, so a 20-command task spends under 5 s in
the jail (a model call of the embedded model takes about 1 s).

    python bench/jail_overhead.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from assay.permissions.environment import materialize
from assay.permissions.jail import landlock_available, run_in_jail
from assay.permissions.model import PermissionSet

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


def _median(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    """Time the three ways and print the ratios; exit 1 if the enforced target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    if not landlock_available():
        print("this kernel has no Landlock: nothing to measure", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        layout = materialize(ENVIRONMENT, None, Path(scratch) / "root")
        host_file = layout.host_path("/srv/app/logs/app.log.1")
        host_out = layout.host_path("/srv/app/archive") / "plain.gz"
        plain = _median(
            lambda: subprocess.run(["/bin/bash", "-c", f"gzip -c {host_file} > {host_out}"], check=True), args.repeat
        )
        free = _median(lambda: run_in_jail(layout, COMMAND, policy=None), args.repeat)
        enforced = _median(lambda: run_in_jail(layout, COMMAND, policy=POLICY), args.repeat)
    print(f"plain child process       {plain * 1000:8.1f} ms")
    print(f"jail, unrestricted        {free * 1000:8.1f} ms  ({free / plain:.1f}x plain)")
    print(
        f"jail, enforced + traced   {enforced * 1000:8.1f} ms  ({enforced / plain:.1f}x plain; "
        f"target < {TARGET_ENFORCED_S * 1000:.0f} ms: {'met' if enforced < TARGET_ENFORCED_S else 'MISSED'})"
    )
    return 0 if enforced < TARGET_ENFORCED_S else 1


if __name__ == "__main__":
    sys.exit(main())
