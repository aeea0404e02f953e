"""Issue 31: the analyzer a step at a time at real-run size: peak memory flat as the run grows (1M → 4M → 16M
spans of the same per-step size, within 15 %, ≤ 4 GiB), time linear, µs per span (target for the whole analysis
≤ 6 µs/span on 2 cores), for a spool, its collector-archive form and seed logs.

What is measured (for now, until the analysis itself goes step by step): ``iter_steps(SOURCE)`` and, for each
step, ``Tables.build`` of its span table, then the table is dropped: the read and the tables a per-step
analysis starts from. Each run is its own child process, timed from spawn to exit (imports included); memory as
in bench_analyzer_scale: the larger of ``ru_maxrss`` (the largest single process) and the PSS summed over the
child's process tree (its forked readers included) sampled every 0.1 s.

Data (generated once under ~/.cache/otel_verl/bench/stream-*, keyed by the parameters): the real per-step size of
a multi-turn run, 4,096 trajectories × 8 turns = ~167k spans a step (``gen_spool.generate(turns=8)``, 8 workers ×
512 requests; ~105 MB of OTLP/JSON a step) and seed logs of ~160k spans a step (8 workers × 768 requests of the
seed generator's turn mix). Only the longest run is generated; the shorter ones are its first steps, hard-linked
(same files, same per-step size, no extra disk). The collector archive is the spool's lines, each step's worker
files interleaved line by line, in 256 MB rotated files as the collector's ``file/archive`` exporter writes them.

``--quick``: 0.5M/1M/2M spans (3/6/12 steps).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._child import PerSpan, run_child
from benchmarks._table import Result

CACHE = Path.home() / ".cache" / "otel_verl" / "bench"
SPOOL_SHAPE = {"workers": 8, "requests": 512, "turns": 8}
SPANS_PER_STEP = 167_000
SEED_SHAPE = {"workers": 8, "requests": 768}
SIZES = (1_000_000, 4_000_000, 16_000_000)
QUICK_SIZES = (500_000, 1_000_000, 2_000_000)
FLAT = 1.15
"""Peak memory may grow at most this much from the smallest run to the largest."""
LIMIT_GIB = 4.0
TARGET_US = 6.0
LINEAR_SLACK = 1.25
ARCHIVE_FILE_BYTES = 256 << 20
VERSION = 1
BASE_STEPS = 1
"""Steps really generated; the runs repeat them with fresh ids, step numbers and times (generating 16M spans
of OTLP/JSON in Python takes longer than this machine's time for the whole benchmark)."""


def _steps(spans: int) -> int:
    return max(1, round(spans / SPANS_PER_STEP))


def _link_subset(full: Path, dest: Path, steps: int, pattern: str) -> Path:
    """``dest`` with the first ``steps`` step directories of ``full`` as hard links (no copy)."""
    marker = dest / ".complete"
    if marker.exists():
        return dest
    for step in range(1, steps + 1):
        for src in sorted(full.glob(pattern.format(step=step))):
            target = dest / src.relative_to(full)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(src, target)
    marker.write_text("ok")
    return dest


_ID = re.compile(rb'("(?:traceId|spanId|parentSpanId)":")[0-9a-f]{4}')
_STEP_ATTR = re.compile(rb'("key":"verl\.step","value":\{"intValue":")-?\d+"')
_SEED_STEP = re.compile(rb'"step": -?\d+')


def _replicate(base_steps: list[Path], dest: Path, steps: int, rewrite) -> None:
    """``steps`` step directories under ``dest``: the base steps over and over, each copy made distinct by
    ``rewrite(data, step, copy)`` (ids and step numbers), so every span of the long run is its own. Times are
    kept (steps of different copies overlap in time: nothing a step-by-step read looks at; shifting them in
    Python cost 3x the rest of the copy)."""
    for step in range(1, steps + 1):
        copy, src = divmod(step - 1, len(base_steps))
        out = dest / f"step_{step}"
        files = sorted(base_steps[src].glob("*.jsonl"))
        if out.is_dir() and len(list(out.glob("*.jsonl"))) == len(files):
            continue  # written by an earlier, interrupted run (the last file of a step is written last)
        out.mkdir(parents=True, exist_ok=True)
        for f in files:
            (out / f.name).write_bytes(rewrite(f.read_bytes(), step, copy))


def _rewrite_spool(data: bytes, step: int, copy: int) -> bytes:
    data = _ID.sub(rb"\g<1>" + f"{copy:04x}".encode(), data)
    return _STEP_ATTR.sub(rb"\g<1>" + str(step).encode() + b'"', data)


def _rewrite_seed(data: bytes, step: int, copy: int) -> bytes:
    return _SEED_STEP.sub(b'"step": ' + str(step).encode(), data)


def _base(kind: str) -> Path:
    """A few steps really generated (gen_spool / gen_seed_logs), the pattern the long runs repeat."""
    if kind == "spool":
        from benchmarks.gen_spool import generate

        base = CACHE / f"stream-spool-{'x'.join(str(v) for v in SPOOL_SHAPE.values())}-base"
        if not (base / "bench" / f"step_{BASE_STEPS}" / "trainer.jsonl").exists():
            generate(base, steps=BASE_STEPS, seed=0, progress=True, **SPOOL_SHAPE)
        return base / "bench"
    from benchmarks.gen_seed_logs import write_seed_logs

    base = CACHE / f"stream-seed-{'x'.join(str(v) for v in SEED_SHAPE.values())}-base"
    if not (base / f"step_{BASE_STEPS}").exists():
        write_seed_logs(base, steps=BASE_STEPS, seed=0, **SEED_SHAPE)
    return base


def _run(kind: str, steps: int, max_steps: int) -> Path:
    """The first ``steps`` of the ``max_steps`` run (written as far as needed, resumable), as their own directory."""
    base = _base(kind)
    base_steps = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: int(p.name[5:]))[:BASE_STEPS]
    shape = SPOOL_SHAPE if kind == "spool" else SEED_SHAPE
    full = CACHE / f"stream-{kind}-{'x'.join(str(v) for v in shape.values())}-{max_steps}steps-v{VERSION}"
    inner = "bench/" if kind == "spool" else ""
    rewrite = _rewrite_spool if kind == "spool" else _rewrite_seed
    if not (full / ".complete").exists():
        print(f"writing {full} (steps 1-{steps} of {max_steps})", file=sys.stderr)
        _replicate(base_steps, full / inner, steps, rewrite)
        if steps == max_steps:
            (full / ".complete").write_text("ok")
    if steps == max_steps:
        return full
    return _link_subset(full, full.with_name(f"{full.name}-first{steps}"), steps, inner + "step_{step}/*.jsonl")


def spool_run(steps: int, max_steps: int) -> Path:
    return _run("spool", steps, max_steps)


def seed_run(steps: int, max_steps: int) -> Path:
    return _run("seed", steps, max_steps)


def spool_engine_run(steps: int, max_steps: int) -> Path:
    """The spool run's first ``steps`` with the engine's own spans beside them (:mod:`benchmarks.gen_engine_spans`):
    the step directories hard-linked, and ``no_step/`` with one file per engine process for the whole run, each
    step's engine spans appended in step order. Each step's are made from that step's own files (its ids and
    times: the cached copies of the base step differ in both), once, under ``<run>-engine/step_<n>/``."""
    from benchmarks.gen_engine_spans import engine_lines

    spool = spool_run(steps, max_steps)
    full = spool.with_name(spool.name.removesuffix(f"-first{steps}"))
    dest = full.with_name(f"{full.name}-engine{steps}")
    if (dest / ".complete").exists():
        return dest
    made = full.with_name(f"{full.name}-engine")  # may be removed once the runs are written
    for step in range(1, steps + 1):
        out = made / f"step_{step}"
        if not (out / ".complete").exists():
            out.mkdir(parents=True, exist_ok=True)
            for replica, data in engine_lines(full / "bench" / f"step_{step}").items():
                (out / f"server_{50_000 + replica}.jsonl").write_bytes(data)
            (out / ".complete").write_text("ok")
    _link_subset(spool, dest, steps, "bench/step_{step}/*.jsonl")
    (dest / ".complete").unlink()
    no_step = dest / "bench" / "no_step"
    no_step.mkdir(parents=True, exist_ok=True)
    for name in sorted(p.name for p in (made / "step_1").glob("*.jsonl")):
        with (no_step / name).open("wb") as fh:
            for step in range(1, steps + 1):
                fh.write((made / f"step_{step}" / name).read_bytes())
    (dest / ".complete").write_text("ok")
    return dest


def archive_run(spool: Path) -> Path:
    """The spool as a collector would have archived it: lines of a step's files interleaved, rotated files."""
    dest = spool.with_name(f"{spool.name}-archive")
    if (dest / ".complete").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    index, size, out = 0, 0, None
    steps = sorted((p for p in (spool / "bench").iterdir() if p.is_dir()), key=lambda p: int(p.name[5:]))
    try:
        for step_dir in steps:
            files = [f.read_bytes().splitlines(keepends=True) for f in sorted(step_dir.glob("*.jsonl"))]
            for row in range(max(len(f) for f in files)):
                for lines in files:
                    if row < len(lines):
                        if out is None or size >= ARCHIVE_FILE_BYTES:
                            if out is not None:
                                out.close()
                            index += 1
                            out, size = (dest / f"traces-{index:04d}.jsonl").open("wb"), 0
                        out.write(lines[row])
                        size += len(lines[row])
    finally:
        if out is not None:
            out.close()
    (dest / ".complete").write_text("ok")
    return dest


CHILD = """
import json, sys, time
t0 = time.perf_counter()
from otel_verl.analysis.read import LoadStats
from otel_verl.analysis.read.allocator import use_system_allocator
from otel_verl.analysis.read.step_stream import iter_steps
from otel_verl.analysis.tables import Tables
use_system_allocator()
stats, steps, largest = LoadStats(), 0, 0
for part in iter_steps(sys.argv[1], stats=stats):
    Tables.build(part.spans)
    steps += 1
    largest = max(largest, len(part.spans))
print(json.dumps({"spans": stats.spans, "steps": steps, "largest": largest, "seconds": time.perf_counter() - t0}))
"""


@dataclass
class Run(PerSpan):
    source: str
    spans: int
    steps: int
    largest: int
    wall_s: float
    peak_gib: float
    cpu_s: float
    """User + system CPU of the child and its forked readers (``wait4``): what load on the machine barely moves."""


def measure(source: str, path: Path) -> Run:
    """One step-at-a-time read + per-step tables in a child process: wall time and peak memory of its tree."""
    with tempfile.TemporaryFile() as out:
        child = run_child([sys.executable, "-c", CHILD, str(path)], stdout=out)
        if child.exit_code != 0:
            raise RuntimeError(f"{source} read of {path} exited {child.exit_code}")
        out.seek(0)
        got = json.loads(out.read().decode().strip().splitlines()[-1])
    return Run(source, got["spans"], got["steps"], got["largest"], child.wall_s, child.peak_bytes / 2**30, child.cpu_s)


def rows(runs: list[Run], label: str, per_step: str) -> list[Result]:
    small, big = runs[0], runs[-1]
    flat = big.peak_gib / small.peak_gib
    per_span = [r.us_per_span for r in runs]
    growth = max(b / a for a, b in itertools.pairwise(per_span)) if len(runs) > 1 else 1.0
    sizes = " / ".join(f"{r.spans / 1e6:.1f}M: {r.peak_gib:.2f} GiB, {r.us_per_span:.1f} µs" for r in runs)
    return [
        Result(
            f"31. {label}: peak memory flat as the run grows",
            f"≤ {FLAT:.2f}× from {small.spans / 1e6:.0f}M to {big.spans / 1e6:.0f}M spans, ≤ {LIMIT_GIB:.0f} GiB",
            f"{flat:.2f}×, {big.peak_gib:.2f} GiB",
            flat <= FLAT and big.peak_gib <= LIMIT_GIB,
            f"{per_step}; {sizes} (PSS of the process tree or largest process, µs/span wall incl. start)",
        ),
        Result(
            f"31. {label}: µs per span, linear",
            f"≤ {TARGET_US:.0f} µs/span (whole analysis), growth ≤ {LINEAR_SLACK}×",
            f"{big.us_per_span:.1f} µs/span",
            big.us_per_span <= TARGET_US and growth <= LINEAR_SLACK,
            f"read + Tables.build per step, {big.steps} steps in {big.wall_s:.0f} s, "
            f"CPU {big.cpu_us_per_span:.1f} µs/span (both cores); µs/span growth {growth:.2f}× "
            "(the per-step analysis is not there yet: its per-step summaries add to this)",
        ),
    ]


def run(quick: bool) -> list[Result]:
    sizes = QUICK_SIZES if quick else SIZES
    step_counts = [_steps(s) for s in sizes]
    longest = _steps(SIZES[-1])  # quick runs are the first steps of the same long run
    spool, seed, archive = [], [], []
    for steps in step_counts:
        spool.append(measure("spool", spool_run(steps, longest)))
        seed.append(measure("seed", seed_run(steps, longest)))
    for steps in step_counts[:2]:  # the archive doubles the disk: its two smaller sizes
        archive.append(measure("archive", archive_run(spool_run(steps, longest))))
    for r in spool + seed + archive:
        print(r, f"{r.us_per_span:.2f} µs/span, {r.cpu_us_per_span:.2f} µs CPU/span", file=sys.stderr)
    shape = "8 workers × 512 requests × 8 turns"
    load = f"load average {os.getloadavg()[0]:.1f} at the end"
    return [
        *rows(spool, "spool", f"{shape}, {spool[-1].largest} spans/step; {load}"),
        *rows(seed, "seed logs", f"8 workers × 768 requests, {seed[-1].largest} spans/step; {load}"),
        *rows(archive, "collector archive", f"the spool's lines in 256 MB files, {archive[-1].largest} spans/step"),
    ]


def measure_named(what: str, steps: int) -> Run:
    longest = _steps(SIZES[-1])
    if what == "archive":
        return measure(what, archive_run(spool_run(steps, longest)))
    return measure(what, (spool_run if what == "spool" else seed_run)(steps, longest))


if __name__ == "__main__":
    # python -m benchmarks.bench_stream [--quick]: every row (benchmarks/run.py runs it this way too);
    # --generate: only write the cached runs; --measure spool:6,24,96 seed:6 archive:6: single runs by step
    # count, one JSON line each as it finishes (for a busy machine, where the whole suite takes hours)
    if "--generate" in sys.argv:
        n = _steps(SIZES[-1])
        spool_run(n, n)
        seed_run(n, n)
    elif "--measure" in sys.argv:
        for spec in sys.argv[sys.argv.index("--measure") + 1 :]:
            what, counts = spec.split(":")
            for steps in counts.split(","):
                r = measure_named(what, int(steps))
                print(json.dumps({**r.__dict__, "us_per_span": r.us_per_span, "cpu_us_per_span": r.cpu_us_per_span,
                                  "load": os.getloadavg()[0]}), flush=True)  # fmt: skip
    else:
        for row in run("--quick" in sys.argv):
            print(row)
