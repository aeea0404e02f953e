"""Issue 31: the whole ``otel-verl analyze`` a step at a time at real-run size: peak memory flat as the run grows
(1M → 4M → 16M spans of the same per-step size, within 15 %, ≤ 4 GiB), time linear, µs per span (target ≤ 6 µs
per span of OTLP/JSON on 2 cores), for a spool and for seed logs of the same size.

    uv run --frozen python -m benchmarks.bench_analyze_stream [--quick]      # every row (benchmarks/run.py too)
    ... --measure spool:6,24,96 seed:6,24,96     # single runs by step count, one JSON line each
    ... --profile spool:6                        # where the CPU goes, phase by phase (benchmarks/_phases.py)

What is measured: ``otel-verl analyze SOURCE --out DIR`` exactly as a user runs it (findings.json, every figure's
PNG, report.html), each run its own child process timed from spawn to exit (interpreter start and imports
included). Memory: the larger of the PSS summed over the child's process tree sampled every 0.1 s (its forked
readers and figure worker included) and the largest single process's ``ru_maxrss``. CPU: user + system of the
child and every process it forked and waited for (``wait4``): the figure a busy shared machine barely moves, where
wall time depends on the other users' load (the load average is printed with each run).

Data: the runs of :mod:`benchmarks.bench_stream` (cached under ~/.cache/otel_verl/bench/stream-*, generated once):
4,096 trajectories × 8 turns = ~167k spans and ~100 MB of OTLP/JSON a step; seed logs of ~162k spans a step.
The 1M and 4M runs are the first 6 and 24 steps of the 16M run (96 steps), hard-linked.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks._table import Result
from benchmarks.bench_analyzer_scale import _tree_rss
from benchmarks.bench_stream import (
    FLAT,
    LIMIT_GIB,
    LINEAR_SLACK,
    QUICK_SIZES,
    SIZES,
    TARGET_US,
    _steps,
    seed_run,
    spool_run,
)


@dataclass
class Run:
    source: str
    spans: int
    steps: int
    wall_s: float
    cpu_s: float
    peak_gib: float
    load: float
    """The 1-minute load average when the run ended (the machine is shared)."""
    findings: int

    @property
    def us_per_span(self) -> float:
        return self.wall_s / self.spans * 1e6

    @property
    def cpu_us_per_span(self) -> float:
        return self.cpu_s / self.spans * 1e6


def measure(source: str, path: Path) -> Run:
    """One ``otel-verl analyze PATH --out DIR`` in a child process."""
    with tempfile.TemporaryDirectory(prefix="bench_analyze_stream_") as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-c", "from otel_verl.cli import main; main()", "analyze", str(path), "--out", str(out)]
        log = Path(tmp) / "log"
        with log.open("wb") as fh:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            stop, peak = threading.Event(), [0]
            sampler = threading.Thread(target=_tree_rss, args=(proc.pid, stop, peak), daemon=True)
            sampler.start()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            stop.set()
            sampler.join()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"analyze {path} exited {os.waitstatus_to_exitcode(status)}: {log.read_text()[-800:]}")
        doc = json.loads((out / "findings.json").read_text())
    return Run(
        source,
        int(doc["summary"]["spans"]),
        len(doc["summary"]["steps"]),
        wall,
        usage.ru_utime + usage.ru_stime,
        max(peak[0], usage.ru_maxrss * 1024) / 2**30,
        os.getloadavg()[0],
        len(doc["findings"]),
    )


def _path(what: str, steps: int) -> Path:
    longest = _steps(SIZES[-1])
    return (spool_run if what == "spool" else seed_run)(steps, longest)


def rows(runs: list[Run], label: str) -> list[Result]:
    small, big = runs[0], runs[-1]
    flat = big.peak_gib / small.peak_gib
    cpu = [r.cpu_us_per_span for r in runs]
    growth = max(b / a for a, b in itertools.pairwise(cpu)) if len(runs) > 1 else 1.0
    sizes = " / ".join(
        f"{r.spans / 1e6:.1f}M: {r.peak_gib:.2f} GiB, {r.cpu_us_per_span:.1f} µs CPU, {r.us_per_span:.1f} µs wall "
        f"(load {r.load:.0f})"
        for r in runs
    )
    return [
        Result(
            f"31. analyze {label}: peak memory flat as the run grows",
            f"≤ {FLAT:.2f}× from {small.spans / 1e6:.0f}M to {big.spans / 1e6:.0f}M spans, ≤ {LIMIT_GIB:.0f} GiB",
            f"{flat:.2f}×, {big.peak_gib:.2f} GiB",
            flat <= FLAT and big.peak_gib <= LIMIT_GIB,
            f"{sizes} (PSS of the process tree or the largest process)",
        ),
        Result(
            f"31. analyze {label}: µs per span, linear",
            f"≤ {TARGET_US:.0f} µs/span on 2 cores, CPU µs/span growth ≤ {LINEAR_SLACK}×",
            f"{big.us_per_span:.1f} µs/span wall, {big.cpu_us_per_span:.1f} µs/span CPU",
            big.us_per_span <= TARGET_US and growth <= LINEAR_SLACK,
            f"{big.steps} steps in {big.wall_s:.0f} s at load {big.load:.0f}, CPU {big.cpu_s:.0f} s (both cores); "
            f"CPU µs/span growth {growth:.2f}×; {big.findings} findings",
        ),
    ]


def run(quick: bool) -> list[Result]:
    steps = [_steps(s) for s in (QUICK_SIZES if quick else SIZES)]
    spool = [measure("spool", _path("spool", n)) for n in steps]
    seed = [measure("seed", _path("seed", n)) for n in steps]
    return [*rows(spool, "spool"), *rows(seed, "seed logs")]


def _specs(args: list[str]) -> list[tuple[str, int]]:
    return [(what, int(n)) for spec in args for what, counts in [spec.split(":")] for n in counts.split(",")]


if __name__ == "__main__":
    if "--measure" in sys.argv:
        for what, n in _specs(sys.argv[sys.argv.index("--measure") + 1 :]):
            r = measure(what, _path(what, n))
            extra = {"us_per_span": r.us_per_span, "cpu_us_per_span": r.cpu_us_per_span}
            print(json.dumps({**asdict(r), **extra}), flush=True)
    elif "--profile" in sys.argv:
        from benchmarks._phases import profile

        for what, n in _specs(sys.argv[sys.argv.index("--profile") + 1 :]):
            with tempfile.TemporaryDirectory(prefix="bench_profile_") as tmp:
                got = profile(_path(what, n), Path(tmp) / "out")
            n_spans = got["spans"]
            print(f"{what} {n} steps, {n_spans} spans, wall {got['wall_s']:.1f} s, load {os.getloadavg()[0]:.1f}, "
                  f"store {got['store_bytes'] / 2**20:.0f} MiB")  # fmt: skip
            cpu = {"readers (forked; parse, build parts)": got["readers_cpu_s"], **got["phases"]}
            for phase, s in cpu.items():
                print(f"  {phase:42s} {s:8.2f} s  {s / n_spans * 1e6:6.2f} µs/span")
            total = sum(cpu.values())
            print(f"  {'total':42s} {total:8.2f} s  {total / n_spans * 1e6:6.2f} µs/span", flush=True)
    else:
        for row in run("--quick" in sys.argv):
            print(row)
