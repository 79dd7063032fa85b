"""Benchmark: how a run's memory and CPU grow with its size (the throughput workload at several sizes).

For each size it writes the synthetic single-turn pack of ``engine_throughput.py``, then runs it through the
``openai`` backend against the loopback server (its own process, so its CPU and memory are not counted) at
concurrency 64, with the rule judge, the audit stage, sealing and the run's own validation; then it validates
and reports the largest bundle and a 12,000-row one. Every step runs in a child process of its own, which
reports its wall time, its CPU and its peak resident memory (``VmHWM``: the child's own, never its parent's).

Targets (issue 17): peak RSS of the largest run <= 1.5 x the smallest's, and CPU per case no worse than at the
smallest size (within 10%); the same RSS ratio for validating the largest bundle, reporting it (JSON, and the
Markdown and HTML pages with the case browser of every row) and comparing two endpoints over it (every row
copied under a second endpoint), against the 12,000-row one. Prints each figure, the ratios, and "met" or "MISSED".

    python bench/engine_scale.py [--sizes 2000,20000,200000] [--latency-ms 50] [--big-latency-ms 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RSS_RATIO = 1.5
#: What is measured of the largest bundle against the reference one: validation, the JSON report, the Markdown and
#: HTML pages (the case browser of every row), and a paired comparison.
STEPS = ("validate", "report", "report-pages", "compare")
CPU_SLACK = 1.10
REFERENCE_ROWS = 12_000
HERE = Path(__file__).resolve()


def _peak_kib() -> int:
    """This process's own peak resident set (VmHWM), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(step: str, *arguments: str) -> dict[str, float]:
    """Run one step in a child process and return what it measured."""
    result = subprocess.run(
        [sys.executable, str(HERE), "--step", step, *arguments], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"engine_scale: step {step} {' '.join(arguments)} failed:\n{result.stderr[-2000:]}")
    measured: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    if measured.get("exit", 0) != 0:
        raise SystemExit(f"engine_scale: {step} {' '.join(arguments)} exited {measured['exit']:g}")
    return measured


def _step(step: str, arguments: list[str]) -> None:
    """One measured step, in this (child) process: prints its figures as one JSON line."""
    sys.path.insert(0, str(HERE.parent))
    import jsonschema  # noqa: F401  (imported before timing: the engine imports them lazily)
    import scipy.stats  # noqa: F401

    cpu, wall = _cpu(), time.perf_counter()
    extra: dict[str, float] = {}
    if step == "pack":
        from engine_throughput import write_pack

        from assay.plugins import load_plugins
        from assay.validate import require_valid_pack

        pack = write_pack(Path(arguments[1]), int(arguments[0]))
        # A run validates its pack first, once per pack digest (the verdict is remembered): done here, so the run's
        # figures are the run's. The validation's own time and peak are this step's.
        require_valid_pack(
            pack.root, str(pack.claimed_digest), load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
        )
    elif step == "run":
        from assay.engine.run import RunSettings, execute_run
        from assay.plugins import load_plugins

        pack, out, base_url, concurrency = arguments
        host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
        endpoint = f"openai:model=echo,base_url={base_url}/v1,concurrency={concurrency},id=echo"
        outcome = execute_run(
            RunSettings(pack=pack, endpoints=[endpoint], stages=["semantic", "audit"], concurrency=int(concurrency),
                        progress=False, max_tokens=64, out=Path(out)),
            host=host,
        )  # fmt: skip
        if not outcome.report.ok or outcome.error_rows:
            raise SystemExit(f"run not clean: {outcome.error_rows} error rows; valid={outcome.report.ok}")
    elif step == "scripted":
        from assay.engine.run import RunSettings, execute_run
        from assay.plugins import load_plugins

        pack, out, executor, resume = arguments
        host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
        outcome = execute_run(
            RunSettings(pack=pack, endpoints=["scripted:mixed"], stages=["semantic", "audit"], concurrency=64,
                        progress=False, out=Path(out), executor=executor, resume=resume == "resume"),
            host=host,
        )  # fmt: skip
        if not outcome.report.ok or outcome.error_rows:
            raise SystemExit(f"run not clean: {outcome.error_rows} error rows; valid={outcome.report.ok}")
        extra["resumed"] = outcome.resumed_rows
    elif step in STEPS:
        from assay.cli import main

        bundle, pack = arguments  # the synthetic pack is installed nowhere: named by its folder
        with tempfile.TemporaryDirectory(prefix="assay-scale-report-") as scratch:
            pages = ["--markdown", f"{scratch}/report.md", "--html", f"{scratch}/report.html"]
            command = {
                "validate": ["validate", "--pack", pack, bundle],
                "report": ["report", "--json", "--pack", pack, bundle],
                "report-pages": ["report", *pages, "--pack", pack, bundle],
                "compare": ["compare", "--json", "--pack", pack, "--a", "endpoint=echo", "--b", "endpoint=echo-b",
                            "--resamples", "200", bundle],
            }[step]  # fmt: skip
            extra["exit"] = main(command)
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": _cpu() - cpu, "peak_kib": _peak_kib(), **extra}))


def _paired_copy(bundle: Path, out: Path) -> Path:
    """A copy of ``bundle`` whose every row is there twice, under endpoints echo and echo-b: what a paired
    comparison of two endpoints reads (the scale runs have one endpoint). Not sealed: compare does not check it."""
    import shutil

    import orjson

    out.mkdir(parents=True)
    for name in ("bundle.json", "run.json", "metrics.json"):
        shutil.copy(bundle / name, out / name)
    with open(bundle / "rows.jsonl", "rb") as source, open(out / "rows.jsonl", "wb") as target:
        for line in source:
            row = orjson.loads(line)
            target.write(line)
            row["key"]["endpoint"] = "echo-b"
            target.write(orjson.dumps(row, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))
    return out


def _digest(path: Path) -> str:
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _scripted_runs(work: Path, size: int) -> None:
    """The largest pack with the scripted agent: locally, on a local Ray cluster of several worker processes, and
    killed midway then resumed; the three bundles' rows must be byte for byte the same, and the resumed run's
    row log must hold each item once."""
    import os
    import signal

    pack = str(work / f"pack-{size}")
    local = _child("scripted", pack, str(work / "scripted-local"), "local", "fresh")
    ray = _child("scripted", pack, str(work / "scripted-ray"), "ray:num_cpus=4,batch=64", "fresh")
    # Killed midway: a child run that is sent SIGKILL once its row log holds half the items, then resumed.
    out = work / "scripted-killed"
    log = out / "state" / "rows.jsonl"
    argv = [sys.executable, str(HERE), "--step", "scripted", pack, str(out), "local", "fresh"]
    victim = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    row_bytes = 0
    while victim.poll() is None:
        if not row_bytes and log.exists() and log.stat().st_size:
            with open(log, "rb") as handle:
                row_bytes = len(handle.readline())
        if row_bytes and log.stat().st_size // row_bytes >= size // 2:
            os.kill(victim.pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    victim.wait()
    if victim.returncode != -signal.SIGKILL:
        raise SystemExit("engine_scale: the run to kill finished before it was killed; use a larger size")
    resumed = _child("scripted", pack, str(out), "local", "resume")
    with open(log, "rb") as handle:
        logged = sum(1 for _ in handle)
    rows = {name: _digest(work / name / "bundle" / "rows.jsonl") for name in ("scripted-local", "scripted-ray")}
    rows["scripted-killed"] = _digest(out / "bundle" / "rows.jsonl")
    same = len(set(rows.values())) == 1
    for name, measured in (("local", local), ("ray (4 workers)", ray)):
        print(
            f"scripted {size} cases, {name}: wall {measured['wall']:.1f} s, {size / measured['wall']:.0f} items/s, "
            f"driver CPU {measured['cpu'] / size * 1000:.3f} ms per case, driver peak RSS "
            f"{measured['peak_kib'] / 1024:.0f} MB"
        )
    ratio = resumed["peak_kib"] / local["peak_kib"]
    print(
        f"killed at {int(resumed['resumed'])} of {size} rows and resumed: peak RSS {resumed['peak_kib'] / 1024:.0f} MB "
        f"({ratio:.2f} x the uninterrupted run's, target <= {RSS_RATIO}: {'met' if ratio <= RSS_RATIO else 'MISSED'}); "
        f"row log {logged} lines for {size} items: {'met' if logged == size else 'MISSED'}"
    )
    print(f"rows of local, ray and resumed runs byte-identical: {'met' if same else 'MISSED'} ({rows})")


def main() -> int:
    """Measure every size, print the figures and whether the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,20000,200000", help="comma-separated case counts, smallest first")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="server latency up to 20,000 cases")
    parser.add_argument("--big-latency-ms", type=float, default=5.0, help="server latency above 20,000 cases")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reference", type=int, default=REFERENCE_ROWS, help="rows of the bundle validation and "
                        "reporting of the largest are compared with")  # fmt: skip
    parser.add_argument("--step", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.step:
        _step(args.step, rest)
        return 0

    from assay.testing.openai_server import spawn_server, stop_server

    sizes = sorted(int(size) for size in args.sizes.split(","))
    runs: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="assay-scale-") as scratch:
        work = Path(scratch)
        for size in sorted({*sizes, args.reference}):
            latency = args.latency_ms if size <= 20_000 else args.big_latency_ms
            _child("pack", str(size), str(work / f"pack-{size}"))
            proc, base_url = spawn_server(latency_ms=latency)
            try:
                runs[size] = _child("run", str(work / f"pack-{size}"), str(work / f"run-{size}"), base_url,
                                    str(args.concurrency))  # fmt: skip
            finally:
                stop_server(proc)
            measured = runs[size]
            if size in sizes:
                cpu_ms = measured["cpu"] / size * 1000
                print(
                    f"run {size:>7} cases (latency {latency:g} ms): wall {measured['wall']:.1f} s, "
                    f"CPU {cpu_ms:.3f} ms per case, peak RSS {measured['peak_kib'] / 1024:.0f} MB"
                )
        small, big = runs[sizes[0]], runs[sizes[-1]]
        rss_ratio = big["peak_kib"] / small["peak_kib"]
        cpu_ratio = (big["cpu"] / sizes[-1]) / (small["cpu"] / sizes[0])
        print(f"run RSS ratio {sizes[-1]}:{sizes[0]} = {rss_ratio:.2f} (target <= {RSS_RATIO}): "
              f"{'met' if rss_ratio <= RSS_RATIO else 'MISSED'}")  # fmt: skip
        print(f"run CPU per case ratio {sizes[-1]}:{sizes[0]} = {cpu_ratio:.2f} (target <= {CPU_SLACK}): "
              f"{'met' if cpu_ratio <= CPU_SLACK else 'MISSED'}")  # fmt: skip
        _scripted_runs(work, sizes[-1])
        for step in STEPS:
            bundles = {size: work / f"run-{size}" / "bundle" for size in (args.reference, sizes[-1])}
            if step == "compare":
                bundles = {size: _paired_copy(path, work / f"paired-{size}") for size, path in bundles.items()}
            reference = _child(step, str(bundles[args.reference]), str(work / f"pack-{args.reference}"))
            largest = _child(step, str(bundles[sizes[-1]]), str(work / f"pack-{sizes[-1]}"))
            ratio = largest["peak_kib"] / reference["peak_kib"]
            what = "rows" if step != "compare" else "cases x 2 endpoints"
            peak = largest["peak_kib"] / 1024
            print(
                f"{step} {sizes[-1]} {what}: wall {largest['wall']:.1f} s, peak RSS {peak:.0f} MB; "
                f"{args.reference}: {reference['peak_kib'] / 1024:.0f} MB; ratio {ratio:.2f} "
                f"(target <= {RSS_RATIO}): {'met' if ratio <= RSS_RATIO else 'MISSED'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
