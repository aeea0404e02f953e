"""Does every rule earn its place (issue 52, item 4)? The diagnosis benchmark's runs, re-diagnosed with each
judgement module of ``otel_verl/analysis/findings/`` switched off in turn, scored by the benchmark's own code.

    uv run --frozen python -m benchmarks.bench_ablation [--quick] [--runs N] [--seed S] [--classes [LIST]]
        [--keep DIR] [--only MODULE,...] [--json FILE]

Each run is built as :mod:`benchmarks.bench_diagnosis` builds it (same plan, same seeds, so the same runs and the
same ground truth) and written once (under ``--keep``, reused when already there: ``bench_diagnosis --keep DIR``
writes the same layout). Its steps are read once and kept in memory; then :func:`~otel_verl.analysis.pipeline.
write_parts` (what ``analyze`` runs on a path) diagnoses them once as the code is, and once per ablation with one
module's entry points swapped for a neutral stand-in (:data:`ABLATIONS`: "finds nothing", "changes nothing",
"keeps everything"). Every name bound to the original function in any loaded module is swapped, so callers that
imported it directly see the stand-in too. The plumbing and the pipeline's own stages (:data:`STAGES`) are not
rules: without them there is no diagnosis to compare, so they are listed and skipped.

The table says, per module, in how many runs findings.json's findings changed, which goals of the benchmark
moved (before → after) and how many lines of the benchmark's tables changed. Method and results:
docs/notes/rule-ablation.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.bench_diagnosis import RunSpec, class_list, formats_for, plan, plan_classes
from benchmarks.diagnosis import async_tables, class_tables, tables
from benchmarks.diagnosis.async_classes import ASYNC_CLASSES
from benchmarks.diagnosis.async_model import AsyncRun
from benchmarks.diagnosis.class_scoring import score_class_run
from benchmarks.diagnosis.classes import build_class_run
from benchmarks.diagnosis.run_model import build_run
from benchmarks.diagnosis.scoring import score_run
from benchmarks.diagnosis.shape import SEED
from benchmarks.diagnosis.write_async import write_async
from benchmarks.diagnosis.write_otlp import write_spool
from benchmarks.diagnosis.write_seed import write_seed

F = "otel_verl.analysis.findings."
Stand_in = Callable[[Callable[..., Any]], Callable[..., Any]]
"""Given the original function, the neutral one that replaces it."""


def _returns(value: Any) -> Stand_in:
    return lambda _orig: lambda *a, **kw: value() if callable(value) else value


def _first_arg(_orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda first, *a, **kw: first


def _empty_frame(orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *a, **kw: orig(*a, **kw).iloc[:0]


def _last_arg(_orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *a, **kw: a[-1]


def _unfolded(_orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda findings, stragglers, shifts, explained: [*findings, *shifts]


def _sync_wait(_orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, reqs, cost, details: (a.step, cost)


def _always_warning(_orig: Callable[..., Any]) -> Callable[..., Any]:
    from otel_verl.analysis.findings.causes.severity import Judgement

    return lambda per_step_s, median_step_s, chance, th: Judgement("warning", 0.0, False, True, None)


def _first_judgement(_orig: Callable[..., Any]) -> Callable[..., Any]:
    return lambda step_judgement, *a, **kw: step_judgement


ABLATIONS: dict[str, dict[str, Stand_in]] = {
    "patterns.aborted_waste": {"find_aborted_waste": _returns(list)},
    "patterns.behaviour_shift": {"find_behaviour_shifts": _returns(lambda: ([], []))},
    "patterns.bound": {"find_bound": _returns(list)},
    "patterns.long_tail": {"long_tail": _returns(None)},
    "patterns.run_cost": {"persistent": _always_warning, "shifted": _first_judgement},
    "patterns.stragglers": {"find_stragglers": _returns(lambda: ([], []))},
    "patterns.trends": {"find_trends": _returns(list)},
    "quality.engine_orphans": {"find_engine_orphans": _returns(list), "merge_engine_orphans": _returns(list)},
    "quality.missing_data": {"find_missing_data": _returns(list)},
    "quality.worker_absent_from_step": {"find_missing_workers": _returns(list)},
    "quality.worker_died_mid_step": {"find_incomplete_workers": _returns(list)},
    "causes.fold_patterns": {"fold": _unfolded},
    "causes.warm_up": {"mark_warm_up": _returns(None)},
    "causes.waited_for": {"waited_for": _sync_wait, "dispatch_words": _returns("")},
    "causes.phase_causes": {"phase_spreads": _returns(dict)},
    "causes.severity": {"carrying": _returns(set)},
    "account.stalls": {"with_stalls": _last_arg},
    "account.short_run": {"short_run_shifts": _empty_frame},
    "account.one_row": {"one_row_each": _first_arg},
    "steps.quiet": {"quiet_windows": _empty_frame},
    "steps.paused_gaps": {"with_pauses": _first_arg},
    "steps.async_account": {"async_accounts": _returns(dict)},
    "steps.step_metrics": {"step_metrics": _returns(dict)},
    "verdict": {"verdict": _returns(""), "headlines": _returns(list)},
}
"""Module (under ``findings``) → {its entry point: the stand-in}. ``severity`` is ablated in part (no cause
carries its step's being slow) and ``phase_causes`` in part (a phase judged without its own spread): their other
entry points build the records the stages pass on."""

STAGES: dict[str, str] = {
    "diagnose": "the pipeline itself",
    "steps.step_summary": "stage: each step reduced",
    "steps.segments": "stage: request segments",
    "steps.step_statistics": "stage: per-step statistics",
    "account.baselines": "stage: the run's norms",
    "account.anomalies": "stage: what moved",
    "account.anomaly_rows": "record: an anomaly's row",
    "account.step_account": "stage: each step's account",
    "account.peel": "stage: the rollout's critical path",
    "account.account_json": "output: findings.json's steps",
    "causes.naming": "stage: causes named",
    "causes.cause": "record: a cause",
    "causes.messages": "output: a finding's words",
    "common.chance": "helper",
    "common.group_sums": "helper",
    "common.histograms": "helper",
    "common.kinds": "names",
    "common.record": "record: a finding",
    "common.row_codes": "helper",
    "common.series": "helper",
    "common.step_cause": "helper",
    "common.thresholds": "settings",
}
"""Modules that are plumbing or a stage of the pipeline, not a rule: skipped, with why."""


@contextlib.contextmanager
def switched_off(module: str) -> Iterator[None]:
    """Every name bound to one of ``module``'s entry points, in every loaded module, bound to its stand-in."""
    mod = importlib.import_module(F + module)
    swapped: list[tuple[object, str, object]] = []
    for name, stand_in in ABLATIONS[module].items():
        orig = getattr(mod, name)
        new = stand_in(orig)
        for m in list(sys.modules.values()):
            for attr, value in list(vars(m).items()) if m is not None else ():
                if value is orig:
                    swapped.append((m, attr, orig))
                    setattr(m, attr, new)
    try:
        yield
    finally:
        for m, attr, orig in reversed(swapped):
            setattr(m, attr, orig)


def built(spec: RunSpec) -> tuple[Any, Any]:
    """(the run, what its class expects or None), as the diagnosis benchmark builds them."""
    if spec.cls:
        return build_class_run(spec.seed, spec.fmt, spec.cls, spec.max_spans)
    return build_run(spec.seed, spec.fmt, spec.plants, spec.kinds or None, spec.max_spans), None


def written(spec: RunSpec, run: Any, keep: Path) -> Path:
    """The run's data folder under ``keep`` (bench_diagnosis's layout), written unless it is there."""
    data = keep / f"run_{spec.index:03d}_{spec.fmt}" / "data"
    if not data.exists():
        if isinstance(run, AsyncRun):
            write_async(run, data)
        else:
            (write_seed if spec.fmt == SEED else write_spool)(run, data)
    return data


def diagnosed(parts: list[Any], stats: Any, source: str) -> dict[str, Any]:
    """findings.json of the parts, as ``analyze(source, figures=False, html_report=False)`` writes it."""
    from otel_verl.analysis.pipeline import write_parts

    with tempfile.TemporaryDirectory(prefix="ablation_") as out:
        try:
            write_parts(iter(parts), out, None, stats=stats, html_report=False, figures=False, source=source)
            return json.loads((Path(out) / "findings.json").read_text())
        except Exception as exc:  # as the benchmark: a crash is a diagnosis that named nothing
            return {"findings": [], "error": f"{type(exc).__name__}: {exc}"[:300]}


def scored(spec: RunSpec, run: Any, expect: Any, document: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    if expect is not None:
        record, plants = score_class_run(run, expect, document), []
    else:
        record, plants = score_run(run, document)
    record.update(index=spec.index, error=document.get("error"), spans=(document.get("summary") or {}).get("spans"))
    return record, plants


@contextlib.contextmanager
def reused(tables: dict[int, Any], summaries: dict[int, Any] | None) -> Iterator[None]:
    """Each part's tables (and, unless ``summaries`` is None, its step summaries) built once per run and reused
    by every configuration: the rules downstream only read them (checked: the code as it is gives the same
    findings with and without the reuse, :func:`ablate`)."""
    from otel_verl.analysis.stream import collect

    real_tables, real_summarize = collect.Tables, collect.summarize_steps

    class Reused:
        @staticmethod
        def build(spans: Any) -> Any:
            if id(spans) not in tables:
                tables[id(spans)] = (spans, real_tables.build(spans))
            return tables[id(spans)][1]

    def summarize(t: Any) -> Any:
        if summaries is None:
            return real_summarize(t)
        if id(t) not in summaries:
            summaries[id(t)] = (t, real_summarize(t))
        return summaries[id(t)][1]

    collect.Tables, collect.summarize_steps = Reused, summarize
    try:
        yield
    finally:
        collect.Tables, collect.summarize_steps = real_tables, real_summarize


def ablate(
    specs: list[RunSpec], keep: Path, modules: list[str], partial: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Per configuration ("" for the code as it is, else the module switched off): its run and plant records
    and each run's findings (kind, severity, steps), for the comparison; ``partial``: the table so far, rewritten
    after each run (a long run on a busy machine still leaves its table)."""
    from otel_verl.analysis.read.stats import LoadStats
    from otel_verl.analysis.read.step_stream import iter_steps

    configs = ["", *modules, "(reused)"]
    out: dict[str, dict[str, Any]] = {c: {"runs": [], "plants": [], "told": []} for c in configs}
    for i, spec in enumerate(specs, start=1):
        run, expect = built(spec)
        data = written(spec, run, keep)
        stats = LoadStats()
        parts = list(iter_steps(data, None, stats=stats))
        tabled: dict[int, Any] = {}
        summed: dict[int, Any] = {}
        for c in configs:
            cached = c != "" and not c.startswith("steps.")  # the first run is the code as it is, nothing reused
            off = switched_off(c) if c in ABLATIONS else contextlib.nullcontext()
            with reused(tabled, summed if cached else None) if c else contextlib.nullcontext(), off:
                t0 = time.process_time()
                document = diagnosed(parts, stats, str(data))
                out[c]["cpu_s"] = out[c].get("cpu_s", 0.0) + time.process_time() - t0
            record, plants = scored(spec, run, expect, document)
            told = [(f.get("kind"), f.get("severity"), f.get("steps")) for f in document.get("findings", [])]
            out[c]["runs"].append(record)
            out[c]["plants"] += plants
            out[c]["told"].append(told)
        print(f"  {i}/{len(specs)} runs ({spec.cls or spec.fmt})", file=sys.stderr, flush=True)
        if partial:
            partial.write_text(f"{i} of {len(specs)} runs\n\n{table(out)}\n")
    return out


def rows(got: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(goal name → value, the benchmark's table lines) of one configuration."""
    runs, plants = got["runs"], got["plants"]
    plain = [r for r in runs if "class" not in r]
    sync = [r for r in runs if r.get("class") and r["class"] not in ASYNC_CLASSES]
    asyn = [r for r in runs if r.get("class") in ASYNC_CLASSES]
    goals, lines = {}, []
    if plain:
        goals |= {g.name: g.value for g in tables.goals(plain, plants)}
        lines += tables.markdown(plain, plants, "").splitlines()
    if sync:
        goals |= {g.name: g.value for g in class_tables.class_goals(sync)}
        lines += class_tables.markdown(sync, "").splitlines()
    if asyn:
        goals |= {g.name: g.value for g in async_tables.async_goals(asyn)}
        lines += async_tables.markdown(asyn, "").splitlines()
    return goals, lines


def _v(x: Any) -> str:
    return "—" if x is None else f"{x:.3g}"


def table(got: dict[str, dict[str, Any]]) -> str:
    """The markdown table: per module, runs whose findings changed, goals moved, table lines changed."""
    base_goals, base_lines = rows(got[""])
    out = [
        "| module | runs whose findings changed | goals moved (before → after) | table lines changed |",
        "|---|---|---|---|",
    ]
    for c, g in got.items():
        if not c:
            continue
        goals, lines = rows(g)
        changed = sum(a != b for a, b in zip(g["told"], got[""]["told"], strict=True))
        moved = [f"{n} {_v(base_goals.get(n))} → {_v(v)}" for n, v in goals.items() if v != base_goals.get(n)]
        errors = sum(bool(r.get("error")) for r in g["runs"])
        diff = sum(a != b for a, b in zip(lines, base_lines, strict=False)) + abs(len(lines) - len(base_lines))
        crash = f" ({errors} runs crashed)" if errors else ""
        c = "(none off, tables and summaries reused: the check)" if c == "(reused)" else c
        out.append(f"| {c} | {changed}/{len(g['told'])}{crash} | {'; '.join(moved) or 'none'} | {diff} |")
    out += [f"| {m} | skipped: {why} | | |" for m, why in STAGES.items()]
    return "\n".join(out)


def pytest_configure(config: Any) -> None:
    """As a pytest plugin (``OTEL_VERL_ABLATE=patterns.bound pytest -p benchmarks.bench_ablation tests/...``): the
    tests run with that module switched off, for the table's "tests that fail" column."""
    import os

    module = os.environ.get("OTEL_VERL_ABLATE")
    if module:
        _SESSION.append(switched_off(module))  # held: a context collected would restore the original
        _SESSION[-1].__enter__()  # for the whole session: every later import sees the stand-in


_SESSION: list[contextlib.AbstractContextManager[None]] = []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="simulated runs (default 200; --quick: 24); per class")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="24 runs")
    p.add_argument("--classes", nargs="?", const="all", default=None, metavar="LIST",
                   help="judgement classes instead (as bench_diagnosis; default all)")  # fmt: skip
    p.add_argument("--keep", type=Path, default=None, help="the runs' folder (reused; default: a temporary one)")
    p.add_argument("--only", default=None, help="comma-separated modules under findings/ (default: every rule)")
    p.add_argument("--json", type=Path, default=None, help="write every configuration's records to FILE")
    p.add_argument("--partial", type=Path, default=None, help="rewrite the table so far to FILE after each run")
    a = p.parse_args(argv)
    modules = a.only.split(",") if a.only else list(ABLATIONS)
    unknown = [m for m in modules if m not in ABLATIONS]
    if unknown:
        p.error(f"--only: {unknown[0]!r} is no rule here (rules: {', '.join(ABLATIONS)})")
    formats = formats_for("both", None)
    if a.classes:
        specs = plan_classes(40 if a.runs == 200 else a.runs, a.seed, formats, class_list(a.classes))
    else:
        specs = plan(24 if a.quick and a.runs == 200 else a.runs, a.seed, formats)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ablation_runs_") as tmp:
        keep = a.keep or Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        got = ablate(specs, keep, modules, a.partial)
    print(f"{len(specs)} runs × {len(modules) + 1} configurations in {(time.perf_counter() - t0) / 60:.1f} min")
    print(table(got))
    if a.json:
        a.json.write_text(json.dumps(got, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
