"""Where a streamed ``analyze`` spends its CPU, phase by phase (``bench_analyze_stream --profile``).

The pipeline's stages are wrapped with CPU timers (``time.process_time`` of this process) for one in-process run;
the forked readers' CPU comes from ``RUSAGE_CHILDREN``. Figures are drawn in-line (``OTEL_VERL_ANALYZE_JOBS=1``)
so their CPU is counted here. Timers cost ~1 µs a call, a few thousand calls a run: nothing at this scale.
"""

from __future__ import annotations

import functools
import os
import resource
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHASES = (
    "read (assembly in this process)",
    "tables",
    "summaries",
    "summaries to the store",
    "data quality",
    "counts",
    "figure parts",
    "outlier and timeline holds",
    "diagnosis (baselines, accounts, causes)",
    "figures (combine, PNG, plotly)",
    "report.html",
)


def profile(source: str | Path, out: str | Path) -> dict[str, Any]:
    """One streamed analysis of ``source`` with every phase timed: {"spans", "wall_s", "main_cpu_s",
    "readers_cpu_s", "store_bytes", "phases": {phase: cpu seconds}}."""
    os.environ["OTEL_VERL_ANALYZE_JOBS"] = "1"
    from otel_verl.analysis import pipeline
    from otel_verl.analysis.figures import catalog
    from otel_verl.analysis.read.allocator import use_system_allocator
    from otel_verl.analysis.stream import collect, held, store

    use_system_allocator()
    acc: dict[str, float] = defaultdict(float)
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[phase] += time.process_time() - t0

        setattr(owner, name, timed)
        undo.append(lambda: setattr(owner, name, fn))

    wrap(collect.Tables, "build", "tables")
    wrap(collect, "summarize_steps", "summaries")
    wrap(collect.SpilledSummary, "__init__", "summaries to the store")
    wrap(collect, "part_quality", "data quality")
    wrap(collect.RunCounts, "add", "counts")
    wrap(held.OutlierHold, "add", "outlier and timeline holds")
    wrap(held.TimelineHold, "add", "outlier and timeline holds")
    wrap(pipeline, "diagnose_summaries", "diagnosis (baselines, accounts, causes)")
    wrap(pipeline.BackgroundFigures, "results", "figures (combine, PNG, plotly)")
    wrap(held.OutlierHold, "frame", "figures (combine, PNG, plotly)")
    wrap(pipeline, "draw", "figures (combine, PNG, plotly)")
    wrap(pipeline, "write_html", "report.html")
    parts = dict(catalog.PARTS)
    for name, (part, combine) in parts.items():
        catalog.PARTS[name] = (_timed(part, acc, "figure parts"), combine)
    bytes_written = [0]
    real_close = store.PartStore.close

    def close(self: Any) -> None:
        bytes_written[0] = self.bytes
        real_close(self)

    store.PartStore.close = close  # type: ignore[method-assign]
    try:
        from otel_verl.analysis import analyze
        from otel_verl.analysis.read import LoadStats

        stats = LoadStats()
        w0, c0 = time.perf_counter(), time.process_time()
        result = analyze(str(source), out, stats=stats)
        wall, main = time.perf_counter() - w0, time.process_time() - c0
    finally:
        for fn in reversed(undo):
            fn()
        catalog.PARTS.update(parts)
        store.PartStore.close = real_close  # type: ignore[method-assign]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    phases = {p: acc.get(p, 0.0) for p in PHASES}
    phases["read (assembly in this process)"] = main - sum(acc.values())
    return {
        "spans": result.summary["spans"],
        "wall_s": wall,
        "main_cpu_s": main,
        "readers_cpu_s": children.ru_utime + children.ru_stime,
        "store_bytes": bytes_written[0],
        "phases": phases,
    }


def _timed(fn: Callable[..., Any], acc: dict[str, float], phase: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[phase] += time.process_time() - t0

    return timed
