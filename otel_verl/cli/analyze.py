"""``otel-verl analyze``: diagnose a run from any trace source; the summary ``otel-verl demo`` prints too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.cli.common import (
    EXIT_CODES,
    SourceOptions,
    exit_fast_after,
    one_line_errors,
    parse_step_range,
    source_options,
)
from otel_verl.invocation import otel_verl_command

CLI = otel_verl_command()
"""``otel-verl`` as the user's shell runs it (``.venv/bin/otel-verl`` from a checkout): the help's examples run as
printed."""

ANALYZE_HELP = f"""Diagnose a run: `findings.json`, `report.html` (one file, opens anywhere) and each figure as a PNG
in `--out` (default: `./otel-verl-report/` and the run's name).

SOURCE is read by its kind (auto-detected; force it with `--source-type`): a spool dir (its newest run;
`--run NAME` picks another), a collector file exporter's file, Jaeger v2 (`--service`, `--lookback`), Tempo
(`--since`, `--until`), or the logs of verl's earlier profiler (SGLangLogManager: `step_<n>/worker_<rank>.jsonl`,
read directly or converted once with `import-legacy`):

    {CLI} analyze ./otel-verl-spool
    {CLI} analyze /var/otel/traces.jsonl --out report
    {CLI} analyze http://jaeger:16686 --lookback 2h
    {CLI} analyze http://tempo:3200 --since 2026-08-01T10:00

Link every trace id to Jaeger (HOST: where it runs):

    --trace-url 'http://HOST:16686/trace/{{trace_id}}'

The diagnosis's thresholds rarely need changing: see the last panel, and docs/analyzer.md for each one.

{EXIT_CODES}"""


THRESHOLDS_PANEL = "Thresholds (advanced)"


@source_options
@one_line_errors
def analyze(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="output dir: `findings.json`, `report.html`, PNGs (default: a folder per run under "
            "./otel-verl-report)",
            show_default=False,
        ),
    ] = None,
    *,  # SOURCE's options go here (source_options); a keyword-only `src` may follow --out's default
    src: SourceOptions,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="override one threshold (repeatable); names, defaults and meanings: docs/analyzer.md, "
            "Thresholds (an unknown name is an error listing them)",
            rich_help_panel=THRESHOLDS_PANEL,
        ),
    ] = None,
    thresholds_file: Annotated[
        Path | None,
        typer.Option(
            "--thresholds",
            help='JSON file of thresholds: `{"thresholds": {"warning_margin": 5}}`; `--set` wins',
            rich_help_panel=THRESHOLDS_PANEL,
        ),
    ] = None,
    top_requests: Annotated[
        int, typer.Option("--top-requests", min=1, help="slowest requests the outlier figure breaks down")
    ] = 8,
    no_html: Annotated[bool, typer.Option("--no-html", help="skip `report.html`")] = False,
    trace_url: Annotated[
        str | None,
        typer.Option(
            "--trace-url",
            help="link every trace id in report.html: a URL template with `{trace_id}` (Jaeger's: see above; its "
            "links add ?uiFind=<the finding's span>), optionally `{span_id}`",
        ),
    ] = None,
    timeline_step: Annotated[
        list[int] | None,
        typer.Option(
            "--timeline-step", metavar="STEP", help="also draw this step's timeline in report.html (repeatable)"
        ),
    ] = None,
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="report only these steps: `A:B` (both included), `A:`, `:B` or `N`; they are judged against the "
            "whole run (see `--baseline`); Jaeger/Tempo are asked for each step by its `verl.step` attribute",
        ),
    ] = None,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline",
            help="what `--steps` are judged against: `run` (every step of the run is read, the others only as the "
            "baseline), `selected` (only the reported steps are read: fastest, less evidence) or a range `A:B`",
        ),
    ] = "run",
) -> None:
    from otel_verl.analysis.output_paths import prepare_dir
    from otel_verl.analysis.read import LoadStats

    th = Thresholds().with_overrides(set_ or [], thresholds_file)
    step_range = parse_step_range(steps) if steps is not None else None
    against: str | range = baseline if baseline in ("run", "selected") else parse_step_range(baseline, "--baseline")
    out = out if out is not None else src.default_out()
    prepare_dir(out)  # before a load that may take minutes
    trace_url = trace_url or jaeger_trace_url(src)
    stats = LoadStats()
    started = time.monotonic()
    result = analyze_source(
        src,
        out,
        stats,
        steps=step_range,
        baseline=against,
        thresholds=th,
        html_report=not no_html,
        top_requests=top_requests,
        trace_url=trace_url,
        timeline_steps=tuple(timeline_step or ()),
    )
    took = time.monotonic() - started
    print_summary(result, stats, out, trace_url=trace_url, source=src.source, analysis_s=took)
    exit_fast_after()


def jaeger_trace_url(src: SourceOptions) -> str | None:
    """The ``--trace-url`` of a source that is a Jaeger (``http://host:16686``, its API paths too): its own
    ``/trace/{trace_id}`` page, else None. Why: analysing a Jaeger still ended with "once the traces are in a
    Jaeger … --trace-url 'http://JAEGER-HOST:16686/…'" (issue 51); the traces are there already."""
    if not src.source.startswith(("http://", "https://")) or src.source_type not in ("auto", "jaeger"):
        return None
    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.read.remote import fetch

    try:
        kind = src.source_type if src.source_type == "jaeger" else fetch.probe(src.source)
    except AnalysisInputError:  # the load says why, in its own words
        return None
    return f"{fetch.base_url(src.source)}/trace/{{trace_id}}" if kind == "jaeger" else None


def analyze_source(src: SourceOptions, out: Path, stats: Any, steps: range | None = None, **options: Any) -> Any:
    """``analysis.analyze`` of ``src`` read a step at a time (a progress bar when interactive); the load's
    warnings go to stderr."""
    import sys

    from otel_verl import analysis
    from otel_verl.analysis.read.allocator import use_system_allocator
    from otel_verl.analysis.read.progress import interactive

    use_system_allocator()  # before the first table is allocated
    result = analysis.analyze(
        src.source,
        out,
        stats=stats,
        steps=steps,
        source_name=src.source,
        load_options=src.load_options(progress=interactive()),
        **options,
    )
    for w in stats.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return result


def print_summary(
    result: Any,
    stats: Any,
    out: Path,
    *,
    trace_url: str | None = None,
    source: str | None = None,
    analysis_s: float | None = None,
) -> None:
    """Counts, what the input lacked (skipped lines, steps without workers or requests), the verdict and a
    headline per slow step, the causes worth reading first (warnings and worse, else the first at info) with the
    seconds each cost, their full trace ids (linked through ``trace_url``) or the command that opens their
    steps in ui.perfetto.dev, and where the files are. Words only: no Python dict is printed. ``analysis_s``: the
    whole analysis, load and report included (the summary told the load's 1.2 s of 40: issue 51)."""
    from rich.markup import escape
    from rich.table import Table

    from otel_verl.analysis.report import presenting
    from otel_verl.cli.consoles import console as make_console
    from otel_verl.cli.prose import Prose

    console = make_console()
    s = result.summary
    found = presenting.as_dicts(result.findings)
    counted = presenting.counted
    took = f"{stats.seconds:.1f} s to load"
    if analysis_s is not None:
        took = f"analyzed in {analysis_s:.1f} s, {stats.seconds:.1f} s of it to load"
    console.print(
        f"[bold]{counted(s['spans'], 'span')}[/] ({took}), {counted(len(s['steps']), 'step')}, "
        f"{counted(len(s['workers']), 'worker')}, {counted(s['requests'], 'request')}"
    )
    missing = presenting.missing_parts(s)
    if missing:
        console.print("[bold yellow]The input is incomplete; the analysis covers only what arrived:[/]")
        for line in missing:
            console.print(f"  [yellow]{escape(line)}[/]", soft_wrap=True)
    console.print(Prose(s["verdict"], "bold"))
    serious = [f for f in found if f.get("severity") != "info"]
    shown = serious[:10] or found[:5]
    for line in s["headlines"]:  # a cause's sentence is told once, in the causes table; a headline points at it
        ref = presenting.cause_reference(line, shown)
        line = line if ref is None else "".join(ref[:3])
        console.print(Prose(line, "bold red", indent="  ", hanging="    "))
    _print_steps(console, result.steps, s)
    if shown:
        # "cost", the word of the verdict ("costing"), the steps table and each message ("it cost the step")
        table = Table("#", "severity", "cost", "steps", "cause", show_lines=False, title="causes, ranked")
        for column in table.columns[:4]:
            column.no_wrap = True
        for i, f in enumerate(shown, 1):
            cost = presenting.seconds_words(f["seconds"]) if f.get("seconds") else ""
            sev = str(f.get("severity", "info"))
            steps = presenting.number_ranges(f["steps"])
            table.add_row(str(i), f"[{COLORS.get(sev, 'blue')}]{sev}[/]", cost, steps, Prose(str(f.get("message"))))
        console.print(table)
        _print_traces(console, shown, trace_url, source)
    files = f"{out / 'findings.json'}" + (f", {out / 'report.html'}" if (out / "report.html").exists() else "")
    hidden = found[len(shown) :]  # ranked: what is shown is the head of the list
    more = f"; {presenting.severity_counts(hidden)} more in findings.json and the report" if hidden else ""
    counts = f"{presenting.severity_counts(shown)} above{more}" if shown else "none"
    console.print(f"causes: {counts} → {files}", soft_wrap=True)


COLORS = {"critical": "red", "warning": "yellow", "info": "blue", "ok": "green"}
STEP_ROWS = 12
"""Steps the summary's table shows at most (the worst ones past that; every step is in findings.json)."""


def _print_steps(console: Any, accounts: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Each step: how long it took, its usual duration, the excess, its severity and top cause (findings.json
    ``steps``, :mod:`otel_verl.analysis.report.step_rows`)."""
    from rich.markup import escape
    from rich.table import Table

    from otel_verl.analysis.report import presenting, step_rows

    rows, left_out = step_rows.table_rows(accounts, STEP_ROWS)
    if not rows:
        return
    table = Table(
        "step",
        "took",
        presenting.USUAL_HEADER,
        "excess",
        "severity",
        "top cause",
        title="steps",
        caption=f"{presenting.usual_words(accounts, summary)}; top cause: the first warning or worse that names the "
        "step, with what it cost it (how much sooner the step would have ended without it, as in the causes below)",
    )
    for column in table.columns[:4]:
        column.justify = "right"
    for a in rows:
        sev = str(a.get("severity", step_rows.OK))
        table.add_row(
            str(a["step"]),
            presenting.seconds_words(a.get("duration_s")),
            presenting.seconds_words(a.get("baseline_s")),
            presenting.signed_seconds(a.get("excess_s")),
            f"[{COLORS.get(sev, 'blue')}]{sev}[/]",
            escape(step_rows.cause_words(a.get("top_cause"))),
        )
    console.print(table)
    if left_out:
        console.print(f"  and {left_out} more steps, all in findings.json (`steps`)")


def _print_traces(console: Any, shown: list[dict[str, Any]], trace_url: str | None, source: str | None) -> None:
    """The full trace ids of the causes shown (at most 3 each), linked when ``trace_url`` is given; else the
    command that writes the first cause's steps for ui.perfetto.dev, and the Jaeger form of ``--trace-url``."""
    from otel_verl.analysis.report import presenting

    causes: dict[str, list[int]] = {}  # a trace id two causes share is listed once, with both numbers
    for i, f in enumerate(shown, 1):
        for trace_id in (f.get("trace_ids") or [])[:3]:
            causes.setdefault(trace_id, []).append(i)
    lines = []
    for trace_id, nums in causes.items():
        steps = presenting.steps_words(s for i in nums for s in shown[i - 1]["steps"])
        span = presenting.evidence_span(shown[nums[0] - 1], trace_id)  # the first cause's span there
        link = presenting.trace_link(trace_url, trace_id, span)
        lines.append(f"  {' '.join(f'#{i}' for i in nums)} {steps}: {link or trace_id}".replace(" :", ":"))
    if not lines:
        return
    console.print("traces:")
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    first = next((f for f in shown if f["steps"]), None)
    if not trace_url and first is not None:
        cmd = presenting.open_step_command(source, first["steps"])
        console.print(
            f"open #1's steps in Perfetto: {cmd}, then Open trace file at {presenting.PERFETTO_UI}; or, once the "
            "traces are in a Jaeger (docs/backends.md, 'See the demo in Jaeger'), link every trace id to it: "
            f"{presenting.trace_url_command(source)}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


def run_analysis(source: str, out: Path) -> None:
    """Analyze with default thresholds and print the summary (used by ``otel-verl demo``)."""
    from otel_verl.analysis.read import LoadStats

    stats = LoadStats()
    started = time.monotonic()
    result = analyze_source(SourceOptions(str(source)), out, stats, thresholds=Thresholds())
    print_summary(result, stats, out, source=str(source), analysis_s=time.monotonic() - started)
