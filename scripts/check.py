"""`make check`: the fast tier a developer runs after every change, timed step by step.

Lint (``ruff check``), format (``ruff format --check``), types (``mypy``, run
alongside the tests: both are single-threaded and the machine has two cores)
and every test of the fast tier: the tests with none of the tier markers that
``tests/conftest.py`` derives from the fixtures a test uses (no jail, no local
model, no Ray, no child process, no scratch installs). Property tests run
with the ``check`` Hypothesis profile (fewer examples); ``make test`` runs
everything at full strength.

Prints each step's time and the total against the budget; exits 0 only if
every step passed. Extra arguments go to pytest (``make check ARGS=-x``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

#: The fast tier: tests with none of the markers tests/conftest.py applies.
FAST_TIER = "not (jail or model or ray or subprocess or slow)"
#: What `make check` may take on the 2-core reference machine.
BUDGET_S = 60.0

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    """A tool installed next to this interpreter (the project's .venv)."""
    return str(BIN / name)


def main(argv: list[str]) -> int:
    """Run every step; return 0 when all passed."""
    started = time.perf_counter()
    results: list[tuple[str, int, float]] = []

    def run(name: str, command: list[str]) -> int:
        began = time.perf_counter()
        code = subprocess.run(command, cwd=ROOT).returncode
        results.append((name, code, time.perf_counter() - began))
        return code

    run("ruff check", [_tool("ruff"), "check", "."])
    run("ruff format", [_tool("ruff"), "format", "--check", "--quiet", "."])
    types_began = time.perf_counter()
    types = subprocess.Popen([_tool("mypy")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    report: list[str] = []
    took: list[float] = []

    def collect_types() -> None:
        # Read mypy's report as it comes (a long one must not fill the pipe) and note when mypy itself ended.
        report.append(types.communicate()[0])
        took.append(time.perf_counter() - types_began)

    reader = threading.Thread(target=collect_types)
    reader.start()
    env = {**os.environ, "HYPOTHESIS_PROFILE": "check"}
    began = time.perf_counter()
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", FAST_TIER, *argv], cwd=ROOT, env=env).returncode
    results.append(("fast tests", tests, time.perf_counter() - began))
    reader.join()
    # mypy's report comes after the tests' so the two never interleave.
    sys.stdout.write(report[0])
    results.append(("mypy", types.returncode, took[0]))

    total = time.perf_counter() - started
    print()
    for name, code, seconds in results:
        print(f"  {'ok  ' if code == 0 else 'FAIL'} {name:<12} {seconds:6.1f} s")
    failed = [name for name, code, _ in results if code != 0]
    verdict = "passed" if not failed else f"FAILED ({', '.join(failed)})"
    print(f"make check: {verdict} in {total:.1f} s (budget {BUDGET_S:.0f} s)")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
