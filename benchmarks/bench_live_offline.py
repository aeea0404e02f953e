"""How far the live account's numbers stray from ``otel-verl analyze``'s over the same window (docs/live.md,
"Live and offline").

The live account values a step once, when it is the newest, and judges it among the earlier steps as they were
valued then; ``analyze --steps N-7:N --baseline selected`` values the window's steps all against the same
baselines. Runs: the diagnosis benchmark's simulated runs (random shapes, 0-5 planted causes of random kinds and
places, a quarter clean; our spool with and without the engine's spans), each step fed to
:class:`~otel_verl.live.account.LiveAccount` in turn and compared with ``diagnose_summaries`` (the function
``analyze`` ends with) over the window's summaries. Usage::

    python -m benchmarks.bench_live_offline [--runs 30] [--seed 11]     # ~8 min on 2 cores
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_diagnosis import plan
from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE
from benchmarks.diagnosis.write_otlp import write_spool
from otel_verl.analysis.findings.account.account_json import account_json
from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import diagnose_summaries
from otel_verl.analysis.findings.steps.step_summary import summarize_steps
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.step_split import split_by_step
from otel_verl.analysis.tables import Tables
from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS, LiveAccount
from otel_verl.live.metrics import cause_place, own_numbers, step_metrics, top_cause


def _warns(cause: dict[str, Any] | None) -> bool:
    return cause is not None and cause["severity"] in ("warning", "critical")


def compare_run(spool: Path) -> list[dict[str, Any]]:
    """Per step: live and offline numbers side by side (what differs, how much)."""
    spans = load_spans(spool)
    th, live, out = Thresholds(), LiveAccount(), []
    summaries = []
    for part in split_by_step(spans):
        if not part.steps:  # the spans of no step come last
            continue
        (step,) = part.steps
        tables = Tables.build(part.spans)
        got = live.add_tables(tables, step)
        summaries += [s for s in summarize_steps(tables) if s.step == step]
        if got is None:
            continue
        window = summaries[-WINDOW_STEPS:]
        d = diagnose_summaries(window, th)
        account = next(a for a in d.accounts if a.step == step)
        cause = top_cause([f.to_json() for f in d.findings], step, tuple(kinds.CAUSES))
        offline = step_metrics(account_json(account), cause)
        live_cause = got.texts.get(n.CAUSE)
        offline_cause = f"{cause['kind']} @ {cause_place(cause)}" if cause is not None else None
        severity = {v: k for k, v in n.SEVERITY_LEVEL.items()}.get(int(got.metrics[n.CAUSE_SEVERITY]))
        out.append(
            {
                "window": len(window),
                "own_same": own_numbers(got.metrics) == own_numbers(offline),
                "usual_gap": abs(got.metrics.get(n.USUAL_S, 0.0) - offline.get(n.USUAL_S, 0.0)) / offline[n.STEP_S],
                "cause_same": live_cause == offline_cause,
                "severity_same": severity == (cause["severity"] if cause is not None else None),
                "warning_same": (severity in ("warning", "critical")) == _warns(cause),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="otel-verl-live-offline-") as tmp:
        for spec in plan(args.runs, args.seed, (OTLP, OTLP_ENGINE)):
            spool = Path(tmp) / f"run{spec.index}"
            write_spool(build_run(spec.seed, spec.fmt, spec.plants, None, 15_000), spool)
            rows += compare_run(spool)
            print(f"run {spec.index + 1}/{args.runs}: {len(rows)} steps so far", file=sys.stderr, flush=True)
    judged = [r for r in rows if r["window"] >= 2]
    gaps = sorted(r["usual_gap"] for r in judged)

    def rate(key: str) -> str:
        return f"{sum(r[key] for r in judged) / len(judged):.1%}"

    print(f"{args.runs} runs (seed {args.seed}), {len(judged)} steps with a step before them\n")
    print("| live vs `analyze` over the same window | measured |\n| --- | --- |")
    print(f"| a step's own numbers the same (time, rollout, each part) | {rate('own_same')} |")
    print(f"| usual the same | {sum(g < 2e-6 for g in gaps) / len(gaps):.1%} |")
    print(
        f"| usual's difference, share of the step: median / 95th percentile / max | {statistics.median(gaps):.2%} / "
        f"{gaps[int(0.95 * (len(gaps) - 1))]:.2%} / {gaps[-1]:.2%} |"
    )
    print(f"| top cause the same (kind and place) | {rate('cause_same')} |")
    print(f"| top cause's severity the same | {rate('severity_same')} |")
    print(f"| warning or worse, or not, the same | {rate('warning_same')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
