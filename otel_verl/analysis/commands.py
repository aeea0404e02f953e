"""CLI commands of the analyzer (analyze, import-legacy, export-legacy, export-perfetto).

Thin: parse options, call the library, turn :class:`AnalysisInputError` (and any OS error on a path)
into one line + exit code 2. Help texts are markdown (typer's mode): placeholders such as `<n>` go in
backticks, or markdown drops them as HTML tags.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.thresholds import Thresholds

EXIT_CODES = (
    "**Exit codes**: 0 = done (whatever was found); 2 = bad input or option (unreadable source, malformed "
    "line, unwritable output), one line on stderr naming the file or path; 1 = a bug in otel-verl "
    "(please report the traceback)."
)


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input → ``error: <file:line: why>`` on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AnalysisInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None
        except OSError as exc:  # a path the checks did not foresee: still one line, naming it
            print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None

    return wrapper


def _parse_time(value: str | None, name: str) -> int | None:
    """ISO-8601 or epoch seconds → ns."""
    if value is None:
        return None
    try:
        return int(float(value) * 1e9)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        raise AnalysisInputError(f"--{name} {value!r}: not ISO-8601 or epoch seconds") from None


def _parse_duration(value: str) -> int:
    """``90s``, ``15m``, ``2h``, ``1d`` → ns."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if value[-1] in units:
            return int(float(value[:-1]) * units[value[-1]] * 1e9)
        return int(float(value) * 1e9)
    except (ValueError, IndexError):
        raise AnalysisInputError(f"--lookback {value!r}: use e.g. 30m, 2h, 1d") from None


def _load(
    source: str,
    source_type: str,
    service: str | None,
    since: str | None,
    until: str | None,
    lookback: str | None,
    skip_bad_lines: bool,
    stats: Any = None,
    max_traces: int = 10000,
) -> Any:
    from otel_verl.analysis.load import LoadStats, load_spans
    from otel_verl.analysis.progress import interactive

    since_ns, until_ns = _parse_time(since, "since"), _parse_time(until, "until")
    if lookback:
        until_ns = until_ns or time.time_ns()
        since_ns = until_ns - _parse_duration(lookback)
    stats = stats if stats is not None else LoadStats()
    spans = load_spans(
        source,
        source_type=source_type,
        service=service,
        since_ns=since_ns,
        until_ns=until_ns,
        skip_bad_lines=skip_bad_lines,
        progress=interactive(),
        stats=stats,
        max_traces=max_traces,
    )
    for w in stats.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return spans


# ------------------------------------------------------------------ shared options
SOURCE_HELP = (
    "a spool dir, a collector file-exporter file (or its dir), a Jaeger v2 query URL (`http://host:16686`) "
    "or a Tempo URL (`http://host:3200`)"
)
Source = Annotated[str, typer.Argument(help=SOURCE_HELP, metavar="SOURCE", show_default=False)]
SourceType = Annotated[
    str,
    typer.Option(
        "--source-type",
        help="`auto` (default): a URL is asked which API it serves (Jaeger's `/api/v3/services`, Tempo's "
        "`/api/echo`), a directory is a spool, a file a collector export; or force `spool`, `file`, `jaeger`, `tempo`",
    ),
]
Service = Annotated[
    str | None,
    typer.Option("--service", help="only spans of this `service.name` (Jaeger: which service to query)"),
]
Since = Annotated[
    str | None,
    typer.Option("--since", help="window start, ISO-8601 or epoch seconds; whole steps overlapping it are kept"),
]
Until = Annotated[str | None, typer.Option("--until", help="window end, ISO-8601 or epoch seconds")]
Lookback = Annotated[
    str | None,
    typer.Option("--lookback", help="window = the last `30m`, `2h`, `1d` (until `--until` or now)"),
]
MaxTraces = Annotated[
    int,
    typer.Option("--max-traces", min=1, help="Jaeger/Tempo: traces fetched at most (reaching it is a warning)"),
]
SkipBadLines = Annotated[
    bool,
    typer.Option(
        "--skip-bad-lines",
        help="count and skip malformed or truncated lines instead of stopping at the first one (`file:line`)",
    ),
]


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


def register(app: typer.Typer) -> None:
    """Add the analyzer's commands to the main ``otel-verl`` app."""

    @app.command("analyze", help=ANALYZE_HELP)
    @one_line_errors
    def analyze_cmd(
        source: Source,
        out: Annotated[Path, typer.Option("--out", help="output dir: `findings.json`, `report.html`, PNGs")],
        source_type: SourceType = "auto",
        service: Service = None,
        since: Since = None,
        until: Until = None,
        lookback: Lookback = None,
        max_traces: MaxTraces = 10000,
        skip_bad_lines: SkipBadLines = False,
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
    ) -> None:
        from otel_verl.analysis.load import LoadStats
        from otel_verl.analysis.outputs import prepare_dir
        from otel_verl.analysis.report import analyze

        th = Thresholds().with_overrides(set_ or [], thresholds_file)
        prepare_dir(out)  # before a load that may take minutes
        stats = LoadStats()
        spans = _load(source, source_type, service, since, until, lookback, skip_bad_lines, stats, max_traces)
        result = analyze(spans, out, th, stats, html_report=not no_html, top_requests=top_requests)
        _print_summary(result, stats, out)

    @app.command(
        "import-legacy",
        help="Convert the seed's SGLangLogManager logs (seeds 000/001/002, `step_<n>/worker_<rank>.jsonl`) "
        "into otel_verl spans: a spool (`--spool`) and/or OTLP (`--endpoint`). A validation rollout's "
        f"`val_step_<n>/` logs are marked validation.\n\n{EXIT_CODES}",
    )
    @one_line_errors
    def import_legacy_cmd(
        logdir: Annotated[
            Path, typer.Argument(help="seed log dir: `step_<n>/worker_<rank>.jsonl`", show_default=False)
        ],
        spool: Annotated[
            Path | None,
            typer.Option("--spool", help="spool dir to write (`<spool>/<run>/step_<n>/*.jsonl`)"),
        ] = None,
        endpoint: Annotated[
            str | None,
            typer.Option("--endpoint", help="OTLP endpoint to send the spans to (a collector, Jaeger, Tempo)"),
        ] = None,
        protocol: Annotated[
            str | None,
            typer.Option("--protocol", help="`grpc` | `http/protobuf` (default: OTEL_EXPORTER_OTLP_PROTOCOL or grpc)"),
        ] = None,
        run: Annotated[str, typer.Option("--run", help="run name: the `<run>` dir under `--spool`")] = "legacy",
        skip_bad_lines: SkipBadLines = False,
    ) -> None:
        from otel_verl.analysis.legacy_import import import_legacy
        from otel_verl.analysis.load import LoadStats

        stats = LoadStats()
        n = import_legacy(
            logdir, spool, run=run, skip_bad_lines=skip_bad_lines, endpoint=endpoint, protocol=protocol, stats=stats
        )
        done = [f"wrote {n} spans to {spool / run}"] if spool is not None else []
        done += [f"sent {n} spans to {endpoint}"] if endpoint is not None else []
        if stats.bad_lines:
            done.append(f"{stats.bad_lines} bad lines skipped (first: {stats.first_bad[0]})")
        print("; ".join(done))

    @app.command(
        "export-legacy",
        help="Write the seed's `step_<n>/worker_<rank>.jsonl` logs so its plotting scripts run on otel_verl "
        f"data (a validation rollout goes to `val_step_<n>/`).\n\n{EXIT_CODES}",
    )
    @one_line_errors
    def export_legacy_cmd(
        source: Source,
        out: Annotated[Path, typer.Option("--out", help="log dir in the seed's layout (created)")],
        source_type: SourceType = "auto",
        service: Service = None,
        since: Since = None,
        until: Until = None,
        lookback: Lookback = None,
        max_traces: MaxTraces = 10000,
        skip_bad_lines: SkipBadLines = False,
    ) -> None:
        from otel_verl.analysis.legacy_export import export_legacy
        from otel_verl.analysis.outputs import prepare_dir

        prepare_dir(out)
        spans = _load(source, source_type, service, since, until, lookback, skip_bad_lines, max_traces=max_traces)
        n = export_legacy(spans, out)
        print(f"wrote {n} log lines to {out}")

    @app.command(
        "export-perfetto",
        help="Chrome/Perfetto trace JSON (open in ui.perfetto.dev): one process per worker, one lane per "
        f"concurrent request.\n\n{EXIT_CODES}",
    )
    @one_line_errors
    def export_perfetto_cmd(
        source: Source,
        out: Annotated[Path, typer.Option("--out", help="trace JSON file to write (e.g. `trace.json`)")],
        source_type: SourceType = "auto",
        service: Service = None,
        since: Since = None,
        until: Until = None,
        lookback: Lookback = None,
        max_traces: MaxTraces = 10000,
        skip_bad_lines: SkipBadLines = False,
    ) -> None:
        from otel_verl.analysis.outputs import prepare_file
        from otel_verl.analysis.perfetto import write_perfetto

        prepare_file(out)
        spans = _load(source, source_type, service, since, until, lookback, skip_bad_lines, max_traces=max_traces)
        n = write_perfetto(spans, out)
        print(f"wrote {n} trace events to {out}")


def _print_summary(result: Any, stats: Any, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    s = result.summary
    console.print(
        f"[bold]{s['spans']}[/] spans ({stats.seconds:.1f} s to load), {len(s['steps'])} steps, "
        f"{len(s['workers'])} workers, {s['requests']} requests"
        + (f", [yellow]{stats.bad_lines} bad lines skipped[/]" if stats.bad_lines else "")
    )
    shown = [f for f in result.findings if f.severity != "info"][:10] or result.findings[:5]
    if shown:
        table = Table("severity", "kind", "message", show_lines=False)
        colors = {"critical": "red", "warning": "yellow", "info": "blue"}
        for f in shown:
            table.add_row(f"[{colors[f.severity]}]{f.severity}[/]", f.kind, f.message)
        console.print(table)
    console.print(f"findings: {s['findings_by_severity'] or 'none'} → {out / 'findings.json'}, {out / 'report.html'}")


def run_analysis(source: str, out: Path) -> None:
    """Analyze with default thresholds and print the summary (used by ``otel-verl demo``)."""
    from otel_verl.analysis.load import LoadStats
    from otel_verl.analysis.report import analyze

    stats = LoadStats()
    spans = _load(str(source), "auto", None, None, None, None, False, stats)
    result = analyze(spans, out, Thresholds(), stats, html_report=True)
    _print_summary(result, stats, out)
