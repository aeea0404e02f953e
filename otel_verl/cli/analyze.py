"""``otel-verl analyze``: diagnose a run from any trace source; the summary ``otel-verl demo`` prints too."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import typer

from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.cli.common import (
    EXIT_CODES,
    SourceOptions,
    exit_fast_after,
    load_source,
    one_line_errors,
    parse_step_range,
    source_options,
)


def _threshold_list() -> str:
    return ", ".join(f"`{f.name}={f.default}`" for f in fields(Thresholds))


ANALYZE_HELP = f"""Diagnose a run: `findings.json`, `report.html` and the seed's figures as PNGs in `--out`.

SOURCE is read by its kind (auto-detected; force it with `--source-type`):

* spool dir: `otel-verl analyze ./otel-verl-spool --out report`
* collector file exporter: `otel-verl analyze /var/otel/traces.jsonl --out report`
* Jaeger v2: `otel-verl analyze http://jaeger:16686 --service verl --lookback 2h --out report`
* Tempo: `otel-verl analyze http://tempo:3200 --since 2026-08-01T10:00 --until 2026-08-01T12:00 --out report`

Seed `step_<n>/worker_<rank>.jsonl` logs are read directly (or once: `otel-verl import-legacy LOGDIR --spool DIR`).

**Thresholds** (`--set name=value`, repeatable, or `--thresholds file.json` as `{{"thresholds": {{...}}}}`;
meanings in docs/analyzer.md): {_threshold_list()}.

{EXIT_CODES}"""


@source_options
@one_line_errors
def analyze(
    out: Annotated[Path, typer.Option("--out", help="output dir: `findings.json`, `report.html`, PNGs")],
    src: SourceOptions,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="threshold override `name=value` (repeatable; names above)"),
    ] = None,
    thresholds_file: Annotated[
        Path | None,
        typer.Option("--thresholds", help='JSON file of thresholds: `{"thresholds": {"event_k": 20}}`'),
    ] = None,
    top_requests: Annotated[
        int, typer.Option("--top-requests", min=1, help="slowest requests the outlier figure breaks down")
    ] = 8,
    no_html: Annotated[bool, typer.Option("--no-html", help="skip `report.html`")] = False,
    trace_url: Annotated[
        str | None,
        typer.Option(
            "--trace-url",
            help="link each cause's traces in report.html: a template with `{trace_id}`, e.g. "
            "`http://localhost:16686/trace/{trace_id}` (Jaeger)",
        ),
    ] = None,
    timeline_step: Annotated[
        list[int] | None,
        typer.Option("--timeline-step", help="also draw this step's timeline in report.html (repeatable)"),
    ] = None,
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="analyse only these steps, read a step at a time: `A:B` (both included), `A:`, `:B` or `N`; "
            "Jaeger/Tempo are asked for each step by its `verl.step` attribute",
        ),
    ] = None,
) -> None:
    from otel_verl import analysis
    from otel_verl.analysis.output_paths import prepare_dir
    from otel_verl.analysis.read import LoadStats

    th = Thresholds().with_overrides(set_ or [], thresholds_file)
    step_range = parse_step_range(steps) if steps is not None else None
    prepare_dir(out)  # before a load that may take minutes
    stats = LoadStats()
    spans = load_source(src, stats, seed_lines=False, steps=step_range)  # only export-legacy reads the lines
    result = analysis.analyze(
        spans,
        out,
        thresholds=th,
        stats=stats,
        html_report=not no_html,
        top_requests=top_requests,
        trace_url=trace_url,
        timeline_steps=tuple(timeline_step or ()),
    )
    print_summary(result, stats, out)
    exit_fast_after()


def print_summary(result: Any, stats: Any, out: Path) -> None:
    """Counts, the verdict and a headline per slow step, the causes worth reading first (warnings and worse,
    else the first infos) with the seconds each cost its step, where the files are."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    s = result.summary
    console.print(
        f"[bold]{s['spans']}[/] spans ({stats.seconds:.1f} s to load), {len(s['steps'])} steps, "
        f"{len(s['workers'])} workers, {s['requests']} requests"
        + (f", [yellow]{stats.bad_lines} bad lines skipped[/]" if stats.bad_lines else "")
    )
    console.print(f"[bold]{escape(s['verdict'])}[/]")
    for line in s["headlines"]:
        console.print(f"  [bold red]{escape(line)}[/]")
    serious = [f for f in result.findings if f.severity != "info"]
    shown = serious[:10] or result.findings[:5]
    if shown:
        table = Table("#", "severity", "lost", "kind", "cause", show_lines=False)
        colors = {"critical": "red", "warning": "yellow", "info": "blue"}
        for i, f in enumerate(shown, 1):
            lost = f"{f.seconds:.1f} s" if f.seconds else ""
            table.add_row(str(i), f"[{colors[f.severity]}]{f.severity}[/]", lost, f.kind, escape(f.message))
        console.print(table)
    console.print(
        f"causes: {s['findings_by_severity'] or 'none'} → {out / 'findings.json'}"
        + (f", {out / 'report.html'}" if (out / "report.html").exists() else "")
    )


def run_analysis(source: str, out: Path) -> None:
    """Analyze with default thresholds and print the summary (used by ``otel-verl demo``)."""
    from otel_verl import analysis
    from otel_verl.analysis.read import LoadStats

    stats = LoadStats()
    spans = load_source(SourceOptions(str(source)), stats, seed_lines=False)
    result = analysis.analyze(spans, out, thresholds=Thresholds(), stats=stats, html_report=True)
    print_summary(result, stats, out)
