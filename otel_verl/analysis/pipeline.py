"""One analysis end to end, a part of the run at a time: each part's tables, summaries and figure parts as the
run streams by (:class:`~otel_verl.analysis.stream.collect.RunCollector`), then the diagnosis beside the figures,
then findings.json, the PNGs and report.html (:func:`write_parts`; the facade's ``analyze`` calls it with the
parts of a source read step by step, :func:`write_analysis` with those of a run already in memory)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.figures import outliers, step_account_bars
from otel_verl.analysis.figures.catalog import FIGURES
from otel_verl.analysis.figures.rendering import BackgroundFigures, Rendered, draw, parallel_figures
from otel_verl.analysis.findings.account.account_json import accounts_json
from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import diagnose_summaries
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.allocator import release_memory
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.read.step_split import own_positions, owner_steps, split_by_step, take_rows
from otel_verl.analysis.read.step_stream import StepSpans
from otel_verl.analysis.read.window import no_spans_message
from otel_verl.analysis.report.page import write_html
from otel_verl.analysis.report.step_rows import add_step_rows
from otel_verl.analysis.stream.collect import RunCollector
from otel_verl.analysis.stream.store import PartStore
from otel_verl.analysis.tables import Tables


@dataclass
class Analysis:
    """Everything ``analyze`` produced, for the CLI summary and for tests."""

    findings: list[Finding]
    summary: dict[str, Any]
    frames: dict[str, pd.DataFrame]
    files: list[Path]
    steps: list[dict[str, Any]]
    """findings.json's ``steps``: every step's account."""


def write_findings(path: Path, findings: list[Finding], summary: dict[str, Any], steps: list[dict[str, Any]]) -> Path:
    with writing(path):
        path.write_text(
            json.dumps(
                {"findings": [f.to_json() for f in findings], "steps": steps, "summary": summary},
                indent=2,
                default=str,
            )
        )
    return path


def named_requests(findings: list[Finding]) -> list[str]:
    """The requests the findings point at, most severe first (the outlier figure shows each): their span ids, where
    a finding has them (verl's request ids repeat: ``full_determinism``'s ``det-N``), else their request ids."""
    keys = [_named_keys(f) for f in findings]
    ids = [k[0] for f, k in zip(findings, keys, strict=True) if f.request_id and k]
    ids += [x for k in keys for x in k[:3]]
    return list(dict.fromkeys(ids))


def _named_keys(f: Finding) -> list[str]:
    spans = f.details.get("request_spans") or []
    if spans and all(isinstance(s, str) for s in spans):
        return list(spans)
    return [x for x in [f.request_id, *f.details.get("request_ids", [])] if isinstance(x, str)]


def write_analysis(
    run: Tables | pd.DataFrame,
    out: str | Path,
    thresholds: Thresholds | None = None,
    steps: range | None = None,
    window: int = 1,
    baseline: str | range = "run",
    **options: Any,
) -> Analysis:
    """:func:`write_parts` of a run in memory (its tables or its span table): the span table split by step
    (``read/step_split.py``, the rule the step-at-a-time read follows), so a run in memory and the same run read
    step by step are analysed alike; ``steps``/``window``/``baseline`` as :func:`read_plan` takes them."""
    read, report = read_plan(steps, baseline)
    spans = run.spans if isinstance(run, Tables) else run
    return write_parts(_parts_of(spans, read, window), out, thresholds, report=report, **options)


def read_plan(steps: range | None, baseline: str | range = "run") -> tuple[range | None, range | None]:
    """(the steps to read, the steps to report) for ``--steps`` and ``--baseline``: ``steps`` selects what is
    reported; the baseline they are judged against is the whole run (``"run"``, the default: every step is read,
    the others only summarized), only themselves (``"selected"``) or another range (read too)."""
    if steps is None:
        return None, None
    if baseline == "selected":
        return steps, None
    if baseline == "run":
        return None, steps
    if not isinstance(baseline, range):
        raise AnalysisInputError(f"baseline {baseline!r}: 'run', 'selected' or a range of steps")
    lo, hi = min(steps.start, baseline.start), max(steps.stop, baseline.stop)
    return range(lo, hi), steps


def _parts_of(spans: pd.DataFrame, steps: range | None, window: int) -> Iterator[StepSpans]:
    """The table's steps (in ``steps`` only, when given), then its spans of no step (without ``steps``); a table
    without steps as one part."""
    spans = own_positions(spans)
    if spans.empty or "step" not in spans or "trace_id" not in spans:
        yield StepSpans((), spans)
        return
    if steps is not None:
        owner = owner_steps(spans)
        spans = take_rows(spans, np.flatnonzero((owner >= steps.start) & (owner < steps.stop)))  # NaN: neither
    yield from split_by_step(spans, window)


def write_parts(
    parts: Iterable[StepSpans],
    out: str | Path,
    thresholds: Thresholds | None = None,
    stats: LoadStats | None = None,
    html_report: bool = True,
    top_requests: int = outliers.DEFAULT_TOP,
    trace_url: str | None = None,
    timeline_steps: tuple[int, ...] = (),
    source: str | None = None,
    figures: bool = True,
    spill_dir: str | None = None,
    report: range | None = None,
) -> Analysis:
    """Analyse a run given as parts (each step's span table, in step order, then the spans of no step) and write
    the outputs under ``out``: ``findings.json``, one PNG per figure, ``report.html`` (unless ``html_report`` is
    false). Each part is dropped once analysed; what the end needs of it waits in a temporary directory under
    ``spill_dir`` (default ``$TMPDIR``; about 40 % of the part's OTLP/JSON bytes), removed at the end.

    ``top_requests``: how many of the slowest requests the outlier figure breaks down (besides every request a
    finding names). ``figures=False``: findings.json only (no PNG; the report without figures). ``report``: only
    these steps are reported (counted, drawn, told); the others only judge them (:func:`read_plan`).
    ``trace_url``/``timeline_steps``/``source``: see :func:`otel_verl.analysis.report.page.write_html`.
    """
    out = prepare_dir(out)
    th = thresholds or Thresholds()
    with PartStore(spill_dir) as store:
        run = RunCollector(store, th, figures=figures, top_requests=top_requests, timeline_steps=timeline_steps)
        read_s, any_shown = 0.0, False
        it = iter(parts)
        while True:
            t0 = time.perf_counter()
            part = next(it, None)
            read_s += time.perf_counter() - t0
            if part is None:
                break
            shown = report is None or any(step in report for step in part.steps)
            if shown or part.steps:  # spans of no step go with the reported steps only when every step is
                run.add(part, reported=shown)
            any_shown = any_shown or (shown and bool(part.steps))
            del part  # the part's table goes before the next one is read
        if report is not None and not any_shown:  # `--steps 5` of a 3-step run: said as export-perfetto says it
            raise AnalysisInputError(no_spans_message(source or "the run", steps=report))
        # what the last steps freed goes back to the OS before the figure worker forks (it would copy those
        # pages as it wrote into them); during the read, every few steps (read/step_stream.py RELEASE_EVERY)
        release_memory()
        if stats is not None:
            stats.seconds = read_s  # the reader's own time, not the per-step analysis it waited for
        specs = [spec for spec in FIGURES if spec[0] != "outliers"] if figures else []
        # every figure but the outliers (it shows the requests the findings name) renders beside the diagnosis
        parallel = parallel_figures(run.counts.spans)
        with BackgroundFigures(specs, run.figure_frame, out, html_report, parallel) as background:
            diagnosis = diagnose_summaries(run.summaries, th, run.quality(), stats, baseline=run.baseline)
            findings = diagnosis.findings
            summary = run.counts.summary(diagnosis, th, stats)
            steps = add_step_rows(accounts_json(diagnosis.accounts), findings, th)
            files = [write_findings(out / "findings.json", findings, summary, steps)]
            rendered: dict[str, Rendered] = {}
            if figures:
                (outliers_spec,) = [spec for spec in FIGURES if spec[0] == "outliers"]
                frame = run.outliers.frame(named_requests(findings))
                rendered["outliers"] = draw(outliers_spec, frame, out, html_report)
            rendered.update(background.results())
        timelines = run.timelines.timelines()
    frames: dict[str, pd.DataFrame] = {}
    if steps and figures:
        frames["step_account"] = step_account_bars.compute_step_account(steps)
        with writing(out / "step_account.png"):
            files.append(step_account_bars.plot_step_account(frames["step_account"], out / "step_account.png"))
    fragments: list[tuple[str, str]] = []
    for name, *_ in FIGURES:
        if name not in rendered:
            continue
        df, png, fragment = rendered[name]
        frames[name] = df
        files.append(png)
        if fragment is not None:
            fragments.append((name, fragment))
    if html_report:
        files.append(
            write_html(
                out / "report.html",
                findings,
                summary,
                frames,
                fragments,
                timelines=timelines,
                trace_url=trace_url,
                accounts=steps,
                source=source,
            )
        )
    return Analysis(findings, summary, frames, files, steps)
