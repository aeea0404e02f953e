"""Issue 31: the whole ``otel-verl analyze`` a step at a time at real-run size: peak memory flat as the run grows
(1M → 4M → 16M spans of the same per-step size, within 15 %, ≤ 4 GiB), time linear, µs per span (target ≤ 6 µs
per span of OTLP/JSON on 2 cores), for a spool and for seed logs of the same size; beside it the whole-run
analysis (everything loaded, tables built once) where it fits in memory, and where the time goes, stage by stage.

    uv run --frozen python -m benchmarks.bench_analyze_stream [--quick]      # every row (benchmarks/run.py too)
    ... --measure spool:6,24,96 seed:6,24,96 whole-spool:6   # single runs by step count, one JSON line each
    ... --measure spool-engine:6,24,96           # the spool with vLLM's own spans in no_step/ (+20 % spans)
    ... --profile spool:6                        # time and memory stage by stage (benchmarks/_phases.py)
    ... --rows FILE                              # the tables and rows from saved --measure/--profile lines

What is measured: ``otel-verl analyze SOURCE --out DIR`` exactly as a user runs it (findings.json, every figure's
PNG, report.html), each run its own child process timed from spawn to exit (interpreter start and imports included,
from bytecode caches written by one small warm-up run, as a user's second run). Memory: the larger of the PSS summed
over the child's process tree sampled every 0.1 s (its forked readers and figure worker included) and the largest
single process's ``ru_maxrss``. CPU: user + system of the child and every process it forked and waited for
(``wait4``): the figure a busy shared machine barely moves, where wall time depends on the other users' load (the
load average is printed with each run). ``whole-``: the analysis as it was before it went step by step
(``tests/analysis/whole_run.py``, the reference the equality tests compare with): ``load_spans`` of the whole
source, ``Tables.build`` once, ``diagnose_run``, every figure and the report.
The stage table is one in-process streamed run with each stage timed (figures drawn in-line).

Data: the runs of :mod:`benchmarks.bench_stream` (cached under ~/.cache/otel_verl/bench/stream-*, generated once):
4,096 trajectories × 8 turns = ~167k spans and ~100 MB of OTLP/JSON a step; seed logs of ~162k spans a step.
The 1M and 4M runs are the first 6 and 24 steps of the 16M run (96 steps), hard-linked.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks._child import PerSpan, run_child
from benchmarks._table import Result
from benchmarks.bench_stream import (
    FLAT,
    LIMIT_GIB,
    LINEAR_SLACK,
    QUICK_SIZES,
    SIZES,
    TARGET_US,
    _steps,
    seed_run,
    spool_engine_run,
    spool_run,
)

STREAM = ["-c", "from otel_verl.cli import main; main()", "analyze"]
WHOLE = """
import json, sys
from pathlib import Path
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.allocator import use_system_allocator
from tests.analysis.whole_run import whole_run
use_system_allocator()
doc, _ = whole_run(load_spans(sys.argv[1]), Path(sys.argv[2]), source=sys.argv[1])
(Path(sys.argv[2]) / "findings.json").write_text(json.dumps(doc))
"""
PROFILE = """
import json, sys
from benchmarks._phases import profile
print(json.dumps(profile(sys.argv[1], sys.argv[2])))
"""
ROOT = Path(__file__).resolve().parents[1]
PYCACHE = Path.home() / ".cache" / "otel_verl" / "bench" / "pycache"
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {
    "PYTHONPYCACHEPREFIX": str(PYCACHE)
}
"""Children run with bytecode caches, as an installed package does from its second import on: with
``PYTHONDONTWRITEBYTECODE`` set (CI shells, this machine) every run recompiled pandas, pyarrow, matplotlib and
plotly, 1.2 s of CPU that is no part of the analysis (1.2 µs/span of a 1M-span run)."""
_warm: list[bool] = []


def _warm_up() -> None:
    """One small ``analyze`` first, once per benchmark process: it writes the bytecode caches."""
    if _warm:
        return
    with tempfile.TemporaryDirectory(prefix="bench_analyze_warm_") as tmp:
        path = spool_run(1, _steps(SIZES[-1]))
        cmd = [sys.executable, *STREAM, str(path), "--out", str(Path(tmp) / "out")]
        subprocess.run(cmd, capture_output=True, check=True, cwd=ROOT, stdin=subprocess.DEVNULL, env=CHILD_ENV)
    _warm.append(True)


@dataclass
class Run(PerSpan):
    source: str
    """``spool``/``seed`` streamed, ``whole-spool``/``whole-seed`` the whole-run analysis."""
    spans: int
    steps: int
    wall_s: float
    cpu_s: float
    peak_gib: float
    load: float
    """The 1-minute load average when the run ended (the machine is shared)."""
    findings: int
    engine_joined: int = 0
    """vLLM ``llm_request`` spans found under their engine call (``spool-engine``: every one of them)."""
    engine_spans: int = 0


def measure(source: str, path: Path) -> Run:
    """One ``otel-verl analyze PATH --out DIR`` (or the whole-run analysis) in a child process."""
    _warm_up()
    with tempfile.TemporaryDirectory(prefix="bench_analyze_stream_") as tmp:
        out = Path(tmp) / "out"
        args = (
            ["-c", WHOLE, str(path), str(out)]
            if source.startswith("whole")
            else [*STREAM, str(path), "--out", str(out)]
        )
        log = Path(tmp) / "log"
        with log.open("wb") as fh:
            child = run_child([sys.executable, *args], stdout=fh, cwd=ROOT, env=CHILD_ENV)
        if child.exit_code != 0:
            raise RuntimeError(f"analyze {path} exited {child.exit_code}: {log.read_text()[-800:]}")
        doc = json.loads((out / "findings.json").read_text())
    return Run(
        source,
        int(doc["summary"]["spans"]),
        len(doc["summary"]["steps"]),
        child.wall_s,
        child.cpu_s,
        child.peak_bytes / 2**30,
        os.getloadavg()[0],
        len(doc["findings"]),
        int(doc["summary"].get("engine", {}).get("joined", 0)),
        int(doc["summary"].get("engine", {}).get("llm_request_spans", 0)),
    )


def profile(what: str, steps: int) -> dict[str, Any]:
    """The stage-by-stage profile (:mod:`benchmarks._phases`) of one streamed run, in a child process."""
    _warm_up()
    with tempfile.TemporaryDirectory(prefix="bench_profile_") as tmp:
        cmd = [sys.executable, "-c", PROFILE, str(_path(what, steps)), str(Path(tmp) / "out")]
        done = subprocess.run(
            cmd, capture_output=True, text=True, check=True, cwd=ROOT, stdin=subprocess.DEVNULL, env=CHILD_ENV
        )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {"profile": what, "steps": steps, "load": os.getloadavg()[0], **got}


def _path(what: str, steps: int) -> Path:
    longest = _steps(SIZES[-1])
    runs = {"spool": spool_run, "seed": seed_run, "spool-engine": spool_engine_run}
    return runs[what.removeprefix("whole-")](steps, longest)


def size_table(runs: list[Run]) -> str:
    """Markdown: one line per run."""
    lines = [
        "| source | spans | steps | wall s | wall µs/span | CPU µs/span | peak GiB | load | findings |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(
            f"| {r.source} | {r.spans / 1e6:.2f}M | {r.steps} | {r.wall_s:.0f} | {r.us_per_span:.1f} | "
            f"{r.cpu_us_per_span:.1f} | {r.peak_gib:.2f} | {r.load:.0f} | {r.findings} |"
        )
    return "\n".join(lines)


def stage_table(got: dict[str, Any]) -> str:
    """Markdown: the profile's stages, CPU and wall µs per span and the memory right after each."""
    from benchmarks._phases import stages

    n = got["spans"]
    lines = [
        f"{got['profile']}, {got['steps']} steps, {n / 1e6:.2f}M spans, wall {got['wall_s']:.0f} s at load "
        f"{got['load']:.0f}, part store {got['store_bytes'] / 2**20:.0f} MiB, peak RSS "
        f"{got['peak_rss'] / 2**30:.2f} GiB (this process; readers apart)",
        "",
        "| stage | CPU µs/span | wall µs/span | RSS after (GiB) |",
        "| --- | ---: | ---: | ---: |",
    ]
    rows = stages(got)
    for stage, v in rows.items():
        lines.append(f"| {stage} | {v['cpu_s'] / n * 1e6:.2f} | {v['wall_s'] / n * 1e6:.2f} | {v['rss'] / 2**30:.2f} |")
    cpu = sum(v["cpu_s"] for v in rows.values())
    lines.append(f"| total | {cpu / n * 1e6:.2f} | {got['wall_s'] / n * 1e6:.2f} | |")
    return "\n".join(lines)


def rows(runs: list[Run], label: str, letters: str) -> list[Result]:
    """Two rows: memory flat as the run grows, and µs per span (wall gated, CPU in the detail)."""
    small, big = runs[0], runs[-1]
    flat = big.peak_gib / small.peak_gib
    cpu = [r.cpu_us_per_span for r in runs]
    growth = max(b / a for a, b in itertools.pairwise(cpu)) if len(runs) > 1 else 1.0
    sizes = " / ".join(
        f"{r.spans / 1e6:.1f}M: {r.peak_gib:.2f} GiB, {r.cpu_us_per_span:.1f} µs CPU, {r.us_per_span:.1f} µs wall "
        f"(load {r.load:.0f})"
        for r in runs
    )
    engine = f"; vLLM spans under their call {big.engine_joined:,} of {big.engine_spans:,}" if big.engine_spans else ""
    return [
        Result(
            f"31{letters[0]}. analyze {label}: peak memory flat as the run grows",
            f"≤ {FLAT:.2f}× from {small.spans / 1e6:.1f}M to {big.spans / 1e6:.1f}M spans, ≤ {LIMIT_GIB:.0f} GiB",
            f"{flat:.2f}×, {big.peak_gib:.2f} GiB",
            flat <= FLAT and big.peak_gib <= LIMIT_GIB,
            f"{sizes} (PSS of the process tree or the largest process)",
        ),
        Result(
            f"31{letters[1]}. analyze {label}: µs per span, linear",
            f"≤ {TARGET_US:.0f} µs/span on 2 cores, CPU µs/span growth ≤ {LINEAR_SLACK}×",
            f"{big.us_per_span:.1f} µs/span wall (load {big.load:.0f}), {big.cpu_us_per_span:.1f} µs/span CPU",
            big.us_per_span <= TARGET_US and growth <= LINEAR_SLACK,
            f"{big.steps} steps in {big.wall_s:.0f} s, CPU {big.cpu_s:.0f} s of both cores (≥ "
            f"{big.cpu_us_per_span / 2:.1f} µs/span wall on two idle cores); CPU µs/span growth {growth:.2f}×; "
            f"{big.findings} findings{engine}",
        ),
    ]


def single_row(r: Run, label: str, letter: str) -> Result:
    """Information: one size only (a busy machine's time allowed no more)."""
    return Result(
        f"31{letter}. analyze {label} {r.spans / 1e6:.1f}M spans (info; one size)",
        f"≤ {LIMIT_GIB:.0f} GiB; ≤ {TARGET_US:.0f} µs/span on 2 cores",
        f"{r.peak_gib:.2f} GiB, {r.cpu_us_per_span:.1f} µs/span CPU, "
        f"{r.us_per_span:.1f} µs/span wall (load {r.load:.0f})",
        r.peak_gib <= LIMIT_GIB and r.us_per_span <= TARGET_US,
        f"{r.steps} steps in {r.wall_s:.0f} s, CPU {r.cpu_s:.0f} s of both cores "
        f"(≥ {r.cpu_us_per_span / 2:.1f} µs/span wall on two idle cores); {r.findings} findings",
    )


def whole_row(stream: Run, whole: Run, letter: str) -> Result:
    """Information: the streamed analysis beside the whole-run one on the same input."""
    return Result(
        f"31{letter}. analyze {stream.source} {stream.spans / 1e6:.1f}M spans: streamed vs whole-run (info)",
        "streamed peak < whole-run peak",
        f"{stream.peak_gib:.2f} vs {whole.peak_gib:.2f} GiB",
        stream.peak_gib < whole.peak_gib,
        f"CPU {stream.cpu_us_per_span:.1f} vs {whole.cpu_us_per_span:.1f} µs/span, wall {stream.us_per_span:.1f} vs "
        f"{whole.us_per_span:.1f} µs/span (load {stream.load:.0f} / {whole.load:.0f}); findings {stream.findings} "
        f"vs {whole.findings}",
    )


def stage_row(got: dict[str, Any], letter: str) -> Result:
    """Information: CPU µs/span by stage, and the largest."""
    from benchmarks._phases import stages

    n = got["spans"]
    by = {stage: v["cpu_s"] / n * 1e6 for stage, v in stages(got).items()}
    top = max(by, key=by.__getitem__)
    return Result(
        f"31{letter}. analyze {got['profile']} {n / 1e6:.1f}M spans: CPU by stage (info)",
        "where the time goes",
        f"{sum(by.values()):.1f} µs/span CPU, most in {top}",
        True,
        "; ".join(f"{stage} {us:.2f}" for stage, us in by.items()) + " (µs/span CPU; read includes forked readers)",
    )


def assemble(lines: list[dict[str, Any]]) -> tuple[str, list[Result]]:
    """The printed tables and the RESULTS.md rows from measured runs and profiles."""
    runs = [Run(**{k: v for k, v in d.items() if k in Run.__dataclass_fields__}) for d in lines if "source" in d]
    profiles = [d for d in lines if "profile" in d]
    text = [size_table(runs), *(stage_table(p) for p in profiles)]
    results: list[Result] = []
    letters = iter("fghijklmnopqrstu")  # 31a-31e are bench_decode's (the batch decoder, on main)
    for what, label in (("spool", "spool"), ("seed", "seed logs"), ("spool-engine", "spool with vLLM's spans")):
        streamed = sorted((r for r in runs if r.source == what), key=lambda r: r.spans)
        if len(streamed) > 1:
            results += rows(streamed, label, next(letters) + next(letters))
        elif streamed:  # one size: no growth to judge
            results.append(single_row(streamed[0], label, next(letters)))
    for whole in (r for r in runs if r.source.startswith("whole-")):
        same = [r for r in runs if r.source == whole.source.removeprefix("whole-") and r.steps == whole.steps]
        if same:
            results.append(whole_row(same[0], whole, next(letters)))
    for p in profiles:
        results.append(stage_row(p, next(letters)))
    return "\n\n".join(text), results


def run(quick: bool) -> list[Result]:
    steps = [_steps(s) for s in (QUICK_SIZES if quick else SIZES)]
    lines: list[dict[str, Any]] = []
    for what in ("spool", "seed"):
        lines += [asdict(measure(what, _path(what, n))) for n in steps]
        lines.append(asdict(measure(f"whole-{what}", _path(what, steps[0]))))
    lines.append(profile("spool", steps[0]))
    text, results = assemble(lines)
    print(text, file=sys.stderr)
    return results


def _specs(specs: list[str]) -> list[tuple[str, int]]:
    return [(what, int(n)) for spec in specs for what, counts in [spec.split(":")] for n in counts.split(",")]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the smaller sizes (every row)")
    parser.add_argument("--measure", nargs="+", metavar="WHAT:STEPS", help="single runs, one JSON line each")
    parser.add_argument("--profile", nargs="+", metavar="WHAT:STEPS", help="time and memory stage by stage")
    parser.add_argument("--rows", type=Path, metavar="FILE", help="the tables from saved --measure/--profile lines")
    return parser.parse_args()


if __name__ == "__main__":
    args = _args()
    for what, n in _specs(args.measure or []):
        print(json.dumps(asdict(measure(what, _path(what, n)))), flush=True)
    for what, n in _specs(args.profile or []):
        print(json.dumps(profile(what, n)), flush=True)
    if args.rows:
        saved = args.rows.read_text().splitlines()
        text, results = assemble([json.loads(line) for line in saved if line.startswith("{")])
        print(text + "\n")
        print(
            "\n".join(
                f"| {r.label} | {r.goal} | {r.measured} | {'✅' if r.ok else '❌'} | {r.detail} |" for r in results
            )
        )
    if not (args.measure or args.profile or args.rows):
        for row in run(args.quick):
            print(row)
