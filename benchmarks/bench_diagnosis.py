"""Accuracy of the diagnosis (issue 29, must-have 5): simulated runs with planted causes, analyzed, scored.

    uv run --frozen python -m benchmarks.bench_diagnosis [--runs 200] [--seed 0] [--jobs 2]
        [--format seed|otlp|both] [--quick] [--keep DIR] [--only-kind KIND] [--write] [--json FILE] [--figures]

Each run is drawn at random (shape, lengths, tool times, format; :mod:`benchmarks.diagnosis.shape`), gets
0 (a quarter of the runs: clean) to 5 planted causes of random kinds, places and sizes
(:mod:`benchmarks.diagnosis.planting`), is written as our spool (with or without the engine's spans) or as
the seed's logs, analyzed in-process by :func:`otel_verl.analysis.analyze`, and its ``findings.json`` is
scored against the ground truth (:mod:`benchmarks.diagnosis.scoring`). Prints the tables and, with
``--write``, replaces its section of benchmarks/RESULTS.md. Method: docs/diagnosis-benchmark.md.

By default the report's figures are not drawn (the figures never feed the diagnosis: tests/test_layout.py
keeps them apart), which makes a run ~5× faster; ``--figures`` runs ``analyze`` exactly as the CLI does.
Generated runs go to a temporary directory, deleted after scoring unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._table import Result
from benchmarks.diagnosis import async_tables, class_tables, tables
from benchmarks.diagnosis.async_classes import ASYNC_CLASSES
from benchmarks.diagnosis.async_model import AsyncRun
from benchmarks.diagnosis.class_scoring import score_class_run
from benchmarks.diagnosis.classes import CLASSES, build_class_run
from benchmarks.diagnosis.classes import describe as describe_expect
from benchmarks.diagnosis.effects import ENGINE_SPAN_KINDS
from benchmarks.diagnosis.planting import KINDS
from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.scoring import score_run
from benchmarks.diagnosis.shape import FORMATS, MAX_SPANS_PER_RUN, OTLP, OTLP_ENGINE, SEED
from benchmarks.diagnosis.write_async import write_async
from benchmarks.diagnosis.write_otlp import write_spool
from benchmarks.diagnosis.write_seed import write_seed
from otel_verl.analysis.findings.common import kinds as k

HERE = Path(__file__).resolve().parent
CLEAN_EVERY = 4
"""Every fourth run of each format is clean."""


@dataclass(frozen=True)
class RunSpec:
    index: int
    seed: int
    fmt: str
    plants: int | None
    """0 for a clean run, None for 1-5 at random."""
    kinds: tuple[str, ...] = ()
    max_spans: int = MAX_SPANS_PER_RUN
    cls: str = ""
    """A judgement class (:mod:`benchmarks.diagnosis.classes`), or "" for the suite's random plants."""


def plan(runs: int, seed: int, formats: Sequence[str], kinds: Sequence[str] = ()) -> list[RunSpec]:
    """``runs`` runs, formats in turn, every :data:`CLEAN_EVERY`-th of a format clean."""
    out = []
    for i in range(runs):
        fmt = formats[i % len(formats)]
        clean = (i // len(formats)) % CLEAN_EVERY == CLEAN_EVERY - 1
        out.append(RunSpec(i, seed * 1_000_003 + i, fmt, 0 if clean else None, tuple(kinds)))
    return out


def plan_classes(
    runs_per_class: int, seed: int, formats: Sequence[str], classes: Sequence[str] = CLASSES
) -> list[RunSpec]:
    """``runs_per_class`` runs of each judgement class, formats in turn."""
    out = []
    for c, cls in enumerate(classes):
        # the asynchronous classes (issue 50) write our spool only; their seeds sit apart from the other classes'
        mine = [f for f in formats if f != SEED] or [OTLP] if cls in ASYNC_CLASSES else formats
        offset = 700_000 + 1_000 * ASYNC_CLASSES.index(cls) if cls in ASYNC_CLASSES else 500_000 + c * runs_per_class
        for i in range(runs_per_class):
            index = c * runs_per_class + i
            out.append(RunSpec(index, seed * 1_000_003 + offset + i, mine[i % len(mine)], None, cls=cls))
    return out


def class_list(choice: str) -> list[str]:
    """``--classes``: names, ``async`` for every asynchronous class, ``all`` for every class."""
    out: list[str] = []
    for name in choice.split(","):
        out += {"async": ASYNC_CLASSES, "all": (*CLASSES, *ASYNC_CLASSES)}.get(name, (name,))
    unknown = [c for c in out if c not in CLASSES and c not in ASYNC_CLASSES]
    if unknown:
        raise SystemExit(f"--classes: unknown class {unknown[0]!r} (known: {', '.join((*CLASSES, *ASYNC_CLASSES))})")
    return out


def formats_for(choice: str, kind: str | None) -> list[str]:
    formats = {"seed": [SEED], "otlp": [OTLP, OTLP_ENGINE], "both": list(FORMATS)}[choice]
    if kind in ENGINE_SPAN_KINDS:
        formats = [f for f in formats if f == OTLP_ENGINE]
    elif kind == k.SLOW_PHASE:
        formats = [f for f in formats if f != SEED]
    return formats


def analyze_findings(source: Path, out: Path, figures: bool = False) -> dict[str, Any]:
    """``findings.json`` of ``otel_verl.analysis.analyze(source, out)`` (read back from the file: the contract);
    without ``figures``, ``analyze(..., figures=False)`` (no figure is computed or drawn)."""
    from otel_verl.analysis import analyze

    os.environ["OTEL_VERL_ANALYZE_JOBS"] = "1"  # no forked figure worker inside a pool's worker
    analyze(source, out, html_report=False, figures=figures)
    return json.loads((out / "findings.json").read_text())


def evaluate(spec: RunSpec, keep: Path | None = None, figures: bool = False) -> dict[str, Any]:
    """Build, write, analyze and score one run: {"run": record, "plants": records}."""
    t0 = time.perf_counter()
    expect = None
    if spec.cls:
        run, expect = build_class_run(spec.seed, spec.fmt, spec.cls, spec.max_spans)
    else:
        run = build_run(spec.seed, spec.fmt, spec.plants, spec.kinds or None, spec.max_spans)
    t1 = time.perf_counter()
    base = keep / f"run_{spec.index:03d}_{spec.fmt}" if keep else Path(tempfile.mkdtemp(prefix="bench_diagnosis_"))
    shutil.rmtree(base, ignore_errors=True)
    try:
        data = base / "data"
        if isinstance(run, AsyncRun):
            write_async(run, data)
        else:
            (write_seed if spec.fmt == SEED else write_spool)(run, data)
        t2 = time.perf_counter()
        try:
            document = analyze_findings(data, base / "analysis", figures)
        except Exception as exc:  # a crash is a diagnosis that named nothing: scored, counted, shown
            document = {"findings": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
        t3 = time.perf_counter()
        if expect is not None:
            record, plants = score_class_run(run, expect, document), []
        else:
            record, plants = score_run(run, document)
        record["error"] = document.get("error")
        if keep:
            truth = run.truth() | ({"expect": describe_expect(expect)} if expect is not None else {})
            (base / "truth.json").write_text(json.dumps(truth, indent=1))
            (base / "score.json").write_text(json.dumps({"run": record, "plants": plants}, indent=1))
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    spans = (document.get("summary") or {}).get("spans")
    record.update(index=spec.index, spans=spans, build_s=t1 - t0, write_s=t2 - t1, analyze_s=t3 - t2)
    for p in plants:
        p.update(index=spec.index, seed=spec.seed)
    return {"run": record, "plants": plants}


def _evaluate(args: tuple[RunSpec, Path | None, bool]) -> dict[str, Any]:
    return evaluate(*args)


def bench(
    specs: list[RunSpec], jobs: int = 2, keep: Path | None = None, figures: bool = False, progress: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every run of ``specs`` (a process pool of ``jobs``): (run records, plant records), in run order."""
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    work = [(s, keep, figures) for s in specs]
    if jobs <= 1:
        iterator: Iterator[dict[str, Any]] = map(_evaluate, work)
    else:
        pool = ProcessPoolExecutor(max_workers=jobs)
        iterator = pool.map(_evaluate, work)
    try:
        for i, res in enumerate(iterator, start=1):
            results.append(res)
            if progress and (i % 10 == 0 or i == len(specs)):
                print(f"  {i}/{len(specs)} runs", file=sys.stderr, flush=True)
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    runs = [r["run"] for r in results]
    plants = [p for r in results for p in r["plants"]]
    return runs, plants


def header(
    specs: list[RunSpec],
    runs: list[dict[str, Any]],
    plants: list[dict[str, Any]],
    seconds: float,
    jobs: int,
    load: float,
) -> str:
    """The line above the tables: when, where, what was run, how long it took."""
    try:
        git = ["git", "rev-parse", "--short", "HEAD"]
        commit = subprocess.run(git, capture_output=True, text=True, cwd=HERE, check=False).stdout.strip() or "?"
    except OSError:
        commit = "?"
    formats = ", ".join(f"{f} {sum(r['format'] == f for r in runs)}" for f in dict.fromkeys(s.fmt for s in specs))
    spans = sorted(r["spans"] for r in runs if r.get("spans"))
    per_run = sum(r["analyze_s"] for r in runs) / max(1, len(runs))
    where = f"{platform.machine()}, {os.cpu_count()} CPUs (load average {load:.1f} at the start)"
    return (
        f"Measured {time.strftime('%Y-%m-%d')} at commit {commit} on {where}, CPython {platform.python_version()}: "
        f"{len(runs)} runs (--seed {specs[0].seed // 1_000_003 if specs else 0}; {formats}; "
        f"{sum(r['clean'] for r in runs)} clean), {len(plants)} planted steps, "
        f"{sum(p['slow'] for p in plants)} of them slow (cost ≥ 2× spread); spans per run: median "
        f"{spans[len(spans) // 2] if spans else 0:,}, at most {spans[-1] if spans else 0:,}; {seconds / 60:.1f} min "
        f"with --jobs {jobs} ({per_run:.1f} s of analysis per run). Method and matching rules: "
        "docs/diagnosis-benchmark.md."
    )


def class_header(specs: list[RunSpec], runs: list[dict[str, Any]], seconds: float, jobs: int, load: float) -> str:
    """The line above the judgement classes' tables."""
    where = f"{platform.machine()}, {os.cpu_count()} CPUs (load average {load:.1f} at the start)"
    per_class = ", ".join(f"{c} {sum(r['class'] == c for r in runs)}" for c in dict.fromkeys(s.cls for s in specs))
    per_run = sum(r["analyze_s"] for r in runs) / max(1, len(runs))
    return (
        f"Measured {time.strftime('%Y-%m-%d')} on {where}, CPython {platform.python_version()}: {len(runs)} runs "
        f"(--seed {specs[0].seed // 1_000_003 if specs else 0}; {per_class}; formats in turn), {seconds / 60:.1f} min "
        f"with --jobs {jobs} ({per_run:.1f} s of analysis per run). What each class plants and asks: "
        "benchmarks/diagnosis/classes.py, docs/diagnosis-scoring.md."
    )


def run(quick: bool) -> list[Result]:
    """For ``python -m benchmarks.run``: the goal rows; a full run also replaces the section in RESULTS.md."""
    specs = plan(24 if quick else 200, 0, FORMATS)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    runs, plants = bench(specs, jobs=2)
    seconds = time.perf_counter() - t0
    if not quick:
        tables.update_results(
            HERE / "RESULTS.md", tables.markdown(runs, plants, header(specs, runs, plants, seconds, 2, load))
        )
    detail = f"{len(runs)} simulated runs, {len(plants)} planted steps; tables in the diagnosis accuracy section"
    return [
        Result(f"29.5 diagnosis: {g.name}", g.goal, g.measured, g.ok, f"over {g.over}; {detail}")
        for g in tables.goals(runs, plants)
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="simulated runs (default 200; --quick: 24)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    p.add_argument("--format", choices=("seed", "otlp", "both"), default="both")
    p.add_argument("--quick", action="store_true", help="24 runs (a couple of minutes)")
    p.add_argument("--keep", type=Path, default=None, help="keep each run (data, analysis, truth.json) under DIR")
    p.add_argument("--only-kind", choices=sorted(KINDS), default=None, help="plant only this kind")
    p.add_argument("--classes", nargs="?", const=",".join(CLASSES), default=None, metavar="LIST",
                   help=f"judgement classes instead ({','.join(CLASSES)}; async: {','.join(ASYNC_CLASSES)}; "
                        "all); --runs per class (40)")  # fmt: skip
    p.add_argument("--figures", action="store_true", help="draw the report's figures too (as the CLI does)")
    p.add_argument("--write", nargs="?", const=HERE / "RESULTS.md", type=Path, default=None, metavar="FILE",
                   help="replace the section in FILE (default benchmarks/RESULTS.md)")  # fmt: skip
    p.add_argument("--json", type=Path, default=None, help="write every run and plant record to FILE")
    a = p.parse_args(argv)
    n = 24 if a.quick and a.runs == 200 else a.runs
    formats = formats_for(a.format, a.only_kind)
    if not formats:
        p.error(f"--only-kind {a.only_kind} cannot be planted in --format {a.format}")
    if a.classes:
        specs = plan_classes(40 if a.runs == 200 else a.runs, a.seed, formats, class_list(a.classes))
    else:
        specs = plan(n, a.seed, formats, [a.only_kind] if a.only_kind else ())
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    runs, plants = bench(specs, a.jobs, a.keep, a.figures)
    seconds = time.perf_counter() - t0
    sections = []
    if a.classes:
        sync = [r for r in runs if r["class"] not in ASYNC_CLASSES]
        asyn = [r for r in runs if r["class"] in ASYNC_CLASSES]
        if sync:
            sync_specs = [s for s in specs if s.cls not in ASYNC_CLASSES]
            text = class_tables.markdown(sync, class_header(sync_specs, sync, seconds, a.jobs, load))
            sections.append((class_tables.update, text))
        if asyn:
            async_specs = [s for s in specs if s.cls in ASYNC_CLASSES]
            text = async_tables.markdown(asyn, class_header(async_specs, asyn, seconds, a.jobs, load))
            sections.append((async_tables.update, text))
    else:
        text = tables.markdown(runs, plants, header(specs, runs, plants, seconds, a.jobs, load))
        sections.append((tables.update_results, text))
    for update, text in sections:
        print(text)
        if a.write:
            update(a.write, text)
            print(f"written to {a.write}", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"runs": runs, "plants": plants}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
