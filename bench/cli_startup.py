"""Benchmark: how fast the command line starts.

Runs each command 5 times (after one warm-up run that fills the OS file
cache) and prints the median wall time, the ratio to a bare interpreter
(``python -c pass``, the floor any Python CLI pays) and whether the target
is met:

    assay --help                           target <= 0.3 s
    assay hash plugins/assay-pack-example  target <= 0.5 s
    assay schema case                      target <= 0.5 s

Heavy libraries (scipy, numpy, rich, aiohttp, compiled schemas) must be
imported only by the commands that use them; ``--imports`` lists which
of them each command loaded, from ``python -X importtime``.

    python bench/cli_startup.py [--runs 5] [--imports]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS: list[tuple[list[str], float]] = [
    (["--help"], 0.3),
    (["hash", "plugins/assay-pack-example"], 0.5),
    (["schema", "case"], 0.5),
]
HEAVY = ("scipy", "numpy", "rich", "aiohttp", "httpx", "jsonschema", "jsonschema_rs", "ruamel", "orjson")


def assay_command() -> list[str]:
    """The installed ``assay`` script next to this interpreter, else ``python -m assay.cli``."""
    script = Path(sys.executable).parent / "assay"
    return [str(script)] if script.exists() else [sys.executable, "-m", "assay.cli"]


def median_seconds(command: list[str], runs: int) -> float:
    """Median wall time of ``runs`` runs of ``command`` (after one warm-up run); fails if it exits non-zero."""
    times = []
    for attempt in range(runs + 1):
        began = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, capture_output=True)
        elapsed = time.perf_counter() - began
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
        if attempt:
            times.append(elapsed)
    return statistics.median(times)


def heavy_imports(arguments: list[str]) -> list[str]:
    """The heavy top-level packages a command imports, from ``-X importtime``."""
    code = f"import sys; sys.argv = ['assay', *{arguments!r}]; from assay.cli import main; main()"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], cwd=ROOT, capture_output=True, text=True, env=os.environ
    )
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    return sorted(loaded & set(HEAVY))


def main() -> int:
    """Measure every command; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--imports", action="store_true", help="also list the heavy packages each command imports")
    args = parser.parse_args()

    floor = median_seconds([sys.executable, "-c", "pass"], args.runs)
    print(f"python -c pass: {floor * 1000:.0f} ms (median of {args.runs})")
    missed = 0
    for arguments, target in COMMANDS:
        seconds = median_seconds([*assay_command(), *arguments], args.runs)
        met = seconds <= target
        missed += not met
        line = (
            f"assay {' '.join(arguments):<34} {seconds * 1000:5.0f} ms  {seconds / floor:4.1f}x python -c pass  "
            f"target {target * 1000:.0f} ms: {'met' if met else 'NOT met'}"
        )
        if args.imports:
            line += f"  heavy imports: {', '.join(heavy_imports(arguments)) or 'none'}"
        print(line)
    print("all targets met" if not missed else f"{missed} target(s) not met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
