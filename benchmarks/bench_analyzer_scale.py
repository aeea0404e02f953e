"""Target 4: the full ``otel-verl analyze`` (figures + findings + HTML) on a 2M-span spool in ≤ 60 s with
≤ 4 GiB peak RSS, and loading that scales linearly (0.5M, 1M, 2M spans).

Spools come from :func:`benchmarks.gen_spool.cached_spool` (the spool format, 8 workers × 224
requests per step, 25/50/100 steps; generated once under ~/.cache/otel_verl/bench, ~1.3 GB for
2M spans). Each analyze runs as its own child process, exactly the CLI a user runs, timed from spawn
to exit (interpreter start and imports included). Memory is measured two ways: ``ru_maxrss`` of the
child from ``os.wait4`` (the largest single process: the analyzer, one of the load workers or the
figure worker it forks) and the sum of PSS over the child's whole process tree sampled every 0.1 s
(the tree's physical memory: a page the forked figure worker shares copy-on-write with the analyzer
counts once; a sum of RSS would count the 2M-span table twice). The goal is judged on the larger of
the two.
Load seconds are the analyzer's own (``summary.load.seconds`` in findings.json).

``--quick`` runs 0.1M/0.2M/0.4M spans and extrapolates time and memory to 2M linearly from the two
largest runs (the fixed cost, imports and figures, is not multiplied); the rows say so.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._child import run_child
from benchmarks._table import Result
from benchmarks.gen_spool import cached_spool

SIZES = (500_000, 1_000_000, 2_000_000)
QUICK_SIZES = (100_000, 200_000, 400_000)
TARGET_SPANS = 2_000_000
LIMIT_S = 60.0
LIMIT_GIB = 4.0
LINEAR_SLACK = 1.25
"""Seconds per span may grow at most this much from one size to the next (quadratic would double it)."""


@dataclass
class Run:
    spans: int
    wall_s: float
    load_s: float
    maxrss_gib: float
    tree_rss_gib: float
    html_mb: float
    findings: int


def analyze_once(spool: Path, spans: int, out: Path) -> Run:
    """One ``otel-verl analyze SPOOL --out OUT`` in a child process; wall time and peak memory."""
    cmd = [sys.executable, "-c", "from otel_verl.cli import main; main()", "analyze", str(spool), "--out", str(out)]
    log = out.parent / f"{out.name}.log"
    with log.open("wb") as fh:
        child = run_child(cmd, stdout=fh)
    if child.exit_code != 0:
        raise RuntimeError(f"analyze exited {child.exit_code}: {log.read_text()[-500:]}")
    summary = json.loads((out / "findings.json").read_text())
    return Run(
        spans=spans,
        wall_s=child.wall_s,
        load_s=float(summary["summary"]["load"]["seconds"]),
        maxrss_gib=child.maxrss_bytes / 2**30,
        tree_rss_gib=child.tree_bytes / 2**30,
        html_mb=(out / "report.html").stat().st_size / 1e6,
        findings=len(summary["findings"]),
    )


def _extrapolate(small: float, large: float, n_small: int, n_large: int, n: int) -> float:
    """Linear in spans through the two largest runs (keeps the fixed cost fixed)."""
    slope = (large - small) / (n_large - n_small)
    return large + slope * (n - n_large)


def run(quick: bool) -> list[Result]:
    sizes = QUICK_SIZES if quick else SIZES
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench_analyzer_") as tmp:
        for size in sizes:
            spool, spans = cached_spool(size)
            runs.append(analyze_once(spool, spans, Path(tmp) / f"out_{size}"))
    big = runs[-1]
    shape = "8 workers × 224 requests/step"
    if quick:
        a, b = runs[-2], runs[-1]
        wall = _extrapolate(a.wall_s, b.wall_s, a.spans, b.spans, TARGET_SPANS)
        mem = _extrapolate(
            max(a.tree_rss_gib, a.maxrss_gib), max(b.tree_rss_gib, b.maxrss_gib), a.spans, b.spans, TARGET_SPANS
        )
        note = f" (quick: extrapolated from {a.spans / 1e6:.1f}M and {b.spans / 1e6:.1f}M spans)"
        time_measured, mem_measured = f"~{wall:.1f} s{note}", f"~{mem:.2f} GiB{note}"
    else:
        wall, mem = big.wall_s, max(big.tree_rss_gib, big.maxrss_gib)
        time_measured, mem_measured = f"{wall:.1f} s", f"{mem:.2f} GiB"
    per_span = [r.load_s / r.spans for r in runs]
    growth = [b / a for a, b in itertools.pairwise(per_span)]
    scaling = " / ".join(f"{r.spans / 1e6:.2f}M: {r.load_s:.1f} s" for r in runs)
    totals = " / ".join(f"{r.spans / 1e6:.2f}M: {r.wall_s:.1f} s" for r in runs)
    return [
        Result(
            "4. analyzer: analyze 2M spans (figures + findings + HTML)",
            f"≤ {LIMIT_S:.0f} s",
            time_measured,
            wall <= LIMIT_S,
            f"{big.spans} spans ({shape}), load {big.load_s:.1f} s, wall incl. interpreter start; "
            f"{big.findings} findings, report.html {big.html_mb:.1f} MB",
        ),
        Result(
            "4. analyzer: peak RSS of that run",
            f"≤ {LIMIT_GIB:.0f} GiB",
            mem_measured,
            mem <= LIMIT_GIB,
            f"larger of: PSS summed over the process tree sampled every 0.1 s ({big.tree_rss_gib:.2f} GiB, load and "
            f"figure workers included) and the largest single process ({big.maxrss_gib:.2f} GiB, ru_maxrss)",
        ),
        Result(
            "4. analyzer: load scaling" + (" (quick sizes)" if quick else ""),
            f"linear: s/span grows ≤ {LINEAR_SLACK}× per doubling",
            scaling,
            all(g <= LINEAR_SLACK for g in growth),
            f"s/span growth {', '.join(f'{g:.2f}×' for g in growth)}; full analyze {totals}",
        ),
    ]


if __name__ == "__main__":  # python -m benchmarks.bench_analyzer_scale [--quick]
    for row in run("--quick" in sys.argv):
        print(row)
