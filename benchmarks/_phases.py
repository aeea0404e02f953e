"""Where a streamed ``analyze`` spends its time and memory, stage by stage (``bench_analyze_stream --profile``).

The pipeline's stages are wrapped with timers for one in-process run: CPU (``time.process_time`` of this process),
wall (``time.perf_counter``), and the process's resident memory right after each call (the largest over the
run's calls: which stage the memory is high after). The forked readers' CPU comes from ``RUSAGE_CHILDREN``; their
wall overlaps this process's, so it is not split. Figures are drawn in-line (``OTEL_VERL_ANALYZE_JOBS=1``) so
their CPU is counted here. Timers cost ~2 µs a call, a few thousand calls a run: nothing at this scale.
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

READ = "read (assembly in this process)"
PHASES = (
    READ,
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
STAGES = {
    "read": (READ,),
    "tables": ("tables",),
    "per-step summaries (to the store)": ("summaries", "summaries to the store", "data quality", "counts"),
    "diagnosis": ("diagnosis (baselines, accounts, causes)",),
    "figures (parts, holds, drawing)": ("figure parts", "outlier and timeline holds", "figures (combine, PNG, plotly)"),
    "report": ("report.html",),
}
"""The issue's stages (read → tables → diagnosis → figures → report), each a sum of timed phases."""
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


class _Timers:
    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self.rss: dict[str, int] = defaultdict(int)
        self.depth = 0

    def timed(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:  # a timed phase inside another: the outer one counts it
                return fn(*args, **kwargs)
            self.depth += 1
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                self.cpu[phase] += time.process_time() - c0
                self.wall[phase] += time.perf_counter() - w0
                self.rss[phase] = max(self.rss[phase], _rss())

        return timed


def profile(source: str | Path, out: str | Path) -> dict[str, Any]:
    """One streamed analysis of ``source`` with every phase timed: {"spans", "wall_s", "main_cpu_s",
    "readers_cpu_s", "store_bytes", "peak_rss", "phases": {phase: {"cpu_s", "wall_s", "rss"}}}; ``rss`` is
    the largest resident size right after a call of the phase (the read's: the peak of the whole run)."""
    os.environ["OTEL_VERL_ANALYZE_JOBS"] = "1"
    from otel_verl.analysis import pipeline
    from otel_verl.analysis.figures import catalog
    from otel_verl.analysis.read.allocator import use_system_allocator
    from otel_verl.analysis.stream import collect, held, store

    use_system_allocator()
    timers = _Timers()
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, name: str, phase: str) -> None:
        raw = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        fn = getattr(owner, name)
        wrapped = timers.timed(fn, phase)
        setattr(owner, name, staticmethod(wrapped) if isinstance(raw, classmethod | staticmethod) else wrapped)
        undo.append(lambda: setattr(owner, name, raw))

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
        catalog.PARTS[name] = (timers.timed(part, "figure parts"), combine)
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
    phases = {p: {"cpu_s": timers.cpu[p], "wall_s": timers.wall[p], "rss": timers.rss[p]} for p in PHASES}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    phases[READ] = {
        "cpu_s": main - sum(timers.cpu.values()),
        "wall_s": wall - sum(timers.wall.values()),
        "rss": peak,
    }
    return {
        "spans": result.summary["spans"],
        "wall_s": wall,
        "main_cpu_s": main,
        "readers_cpu_s": children.ru_utime + children.ru_stime,
        "store_bytes": bytes_written[0],
        "peak_rss": peak,
        "phases": phases,
    }


def stages(got: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The profile's phases summed into :data:`STAGES`; the forked readers' CPU goes to "read"."""
    out = {}
    for stage, phases in STAGES.items():
        cpu = sum(got["phases"][p]["cpu_s"] for p in phases)
        wall = sum(got["phases"][p]["wall_s"] for p in phases)
        rss = max(got["phases"][p]["rss"] for p in phases)
        out[stage] = {"cpu_s": cpu, "wall_s": wall, "rss": rss}
    out["read"]["cpu_s"] += got["readers_cpu_s"]
    return out
