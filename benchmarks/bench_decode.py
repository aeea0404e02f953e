"""Issue 31, the read: CPU µs per span of each stage from a real-size step's files to its tables, before → after.

One step of the real per-step size (bench_stream's base runs under ~/.cache/otel_verl/bench/: the spool's step 1,
166,948 spans in 9 files of OTLP/JSON, 4,096 trajectories × 8 turns; the seed logs' step 1, 161,736 spans),
read in one process (no forked readers: their CPU would not show in ``process_time``), each stage timed with
``time.process_time`` and the best of ``--reps`` runs kept (the machine is shared: CPU time, not wall, and the
best run is the one least disturbed by the other engineers' load; the load average is printed).

Stages: ``parse`` the JSON alone (the general decoder's orjson, the batch decoder's msgspec; informational:
it is part of ``read``), ``read`` every line into compact parts (``read_files``: parse + columns), ``frame``
the span table from the parts, ``tree`` (duplicates and the tree: ``filter_and_dedupe`` + ``resolve_hierarchy``),
``tables`` (``Tables.build``); for seed logs ``read`` is the seed converter (``convert._convert``).

``--before DIR`` runs the same stages with the ``otel_verl`` of another checkout (e.g. a worktree of main) in a
child process, and prints both: ``python -m benchmarks.bench_decode --before /work/main``. ``--general`` reads
OTLP with this checkout's general decoder (``SpanColumns.batch_decoder = False``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CACHE = Path.home() / ".cache" / "otel_verl" / "bench"
SPOOL_STEP = CACHE / "stream-spool-8x512x8-base" / "bench" / "step_1"
SEED_STEP = CACHE / "stream-seed-8x768-base" / "step_1"
STAGES = ("parse", "read", "frame", "tree", "tables")

CHILD = r"""
import gc, json, os, pickle, sys, time
from pathlib import Path
import orjson
from otel_verl.analysis.read.allocator import release_memory, use_system_allocator
from otel_verl.analysis.read.spool.files import read_files
from otel_verl.analysis.read.hierarchy import resolve_hierarchy
from otel_verl.analysis.read.otlp.documents import SpanColumns, frame_from_parts  # also a checkout before span_frame
from otel_verl.analysis.read.sources import filter_and_dedupe
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.tables import Tables

use_system_allocator()  # as the command line does
kind, step, reps, general = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
if general:
    SpanColumns.batch_decoder = False
batch = getattr(SpanColumns, "batch_decoder", False)
files = sorted(step.glob("*.jsonl"))
clock = time.process_time
best = {}

def lap(name, seconds):
    best[name] = min(best.get(name, float("inf")), seconds)

for _ in range(reps):
    gc.collect()
    if kind == "spool":
        gc.disable()  # as read_files does: the cyclic GC would rescan every decoded dict
        t0 = clock()
        if batch:
            from otel_verl.analysis.read.otlp.structs import LINE_DECODER
            for f in files:
                with f.open("rb") as fh:
                    for line in fh:
                        LINE_DECODER.decode(line)
        else:
            for f in files:
                with f.open("rb") as fh:
                    for line in fh:
                        orjson.loads(line)
        lap("parse", clock() - t0)
        gc.enable()
        t0 = clock()
        cols = SpanColumns()
        read_files(files, cols, LoadStats(), False, lambda n: None)
        parts = cols.take_parts()
    else:
        from otel_verl.analysis.read.seed import convert
        t0 = clock()
        res = convert._convert(files, step.parent, "legacy", False, True, None, False)
        parts = res.parts
    lap("read", clock() - t0)
    # as in iter_steps: parts come from forked readers (pickled), the read's temporaries are handed back
    parts = pickle.loads(pickle.dumps(parts, protocol=5))
    gc.collect()
    release_memory()
    t0 = clock()
    frame = frame_from_parts(parts)
    lap("frame", clock() - t0)
    del parts
    t0 = clock()
    frame, unique = filter_and_dedupe(frame, None, None, None, LoadStats())
    frame = resolve_hierarchy(frame.reset_index(drop=True), unique_span_ids=unique or None)
    lap("tree", clock() - t0)
    t0 = clock()
    Tables.build(frame)
    lap("tables", clock() - t0)
    n = len(frame)
    del frame
print(json.dumps({"spans": n, "batch": batch, **{k: v / n * 1e6 for k, v in best.items()}}))
"""


def measure(kind: str, step: Path, reps: int, general: bool, checkout: str) -> dict:
    """The stages with the ``otel_verl`` of ``checkout`` (run from there: ``-c`` puts the working directory
    first on ``sys.path``, before the editable install)."""
    env = {**os.environ, "PYTHONPATH": checkout}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(step), str(reps), "1" if general else "0"],
        env=env, cwd=checkout, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[tuple[str, dict, dict | None]]) -> str:
    head = "| source | stage | " + ("before | after | gain |" if rows[0][2] is not None else "µs CPU/span |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for source, after, before in rows:
        stages = [s for s in STAGES if s in after]
        for stage in [*stages, "total"]:
            a = sum(after[s] for s in stages if s != "parse") if stage == "total" else after[stage]
            if before is None:
                lines.append(f"| {source} | {stage} | {a:.2f} |")
                continue
            b = sum(before.get(s, 0.0) for s in stages if s != "parse") if stage == "total" else before.get(stage)
            gain = f"{b / a:.1f}×" if b and stage != "parse" else ""
            was = f"{b:.2f}" if b else "—"
            lines.append(f"| {source} | {stage} | {was} | {a:.2f} | {gain} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="a checkout whose otel_verl gives the 'before' column")
    parser.add_argument("--general", action="store_true", help="this checkout's general OTLP decoder")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", choices=("spool", "seed"))
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[1])
    rows = []
    for kind, step in (("spool", SPOOL_STEP), ("seed", SEED_STEP)):
        if args.only and kind != args.only:
            continue
        if not step.is_dir():
            print(f"{step}: missing; write it with: python -m benchmarks.bench_stream --generate", file=sys.stderr)
            continue
        before = measure(kind, step, args.reps, False, args.before) if args.before else None
        after = measure(kind, step, args.reps, args.general, here)
        label = f"{kind} ({after['spans']} spans)"
        rows.append((label, after, before))
    load = os.getloadavg()
    print(table(rows))
    print(f"\nbest of {args.reps}, one process, CPU time; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")


if __name__ == "__main__":
    main()
