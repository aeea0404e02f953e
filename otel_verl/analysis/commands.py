"""CLI commands of the analyzer (analyze, import-legacy, export-legacy, export-perfetto).

Thin: parse options, call the library, turn :class:`AnalysisInputError` into one line + exit code 2.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import typer

from otel_verl.analysis.errors import AnalysisInputError


def _one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input → ``error: <file:line: why>`` on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AnalysisInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
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
) -> Any:
    from otel_verl.analysis.load import load_spans

    since_ns, until_ns = _parse_time(since, "since"), _parse_time(until, "until")
    if lookback:
        until_ns = until_ns or time.time_ns()
        since_ns = until_ns - _parse_duration(lookback)
    return load_spans(
        source,
        source_type=source_type,
        service=service,
        since_ns=since_ns,
        until_ns=until_ns,
        skip_bad_lines=skip_bad_lines,
        progress=sys.stderr.isatty(),
        stats=stats,
    )


SOURCE_HELP = "spool dir | collector file-exporter file/dir | Jaeger URL (http://host:16686) | Tempo URL"


def register(app: typer.Typer) -> None:
    """Add the analyzer's commands to the main ``otel-verl`` app."""

    @app.command("analyze")
    @_one_line_errors
    def analyze_cmd(
        source: str = typer.Argument(..., help=SOURCE_HELP),
        out: Path = typer.Option(..., "--out", help="output dir: findings.json, report.html, PNGs"),  # noqa: B008
        source_type: str = typer.Option("auto", "--source-type", help="auto|spool|file|jaeger|tempo"),
        service: Optional[str] = typer.Option(None, "--service", help="only spans of this service.name"),  # noqa: UP045
        since: Optional[str] = typer.Option(None, "--since", help="ISO-8601 or epoch seconds"),  # noqa: UP045
        until: Optional[str] = typer.Option(None, "--until", help="ISO-8601 or epoch seconds"),  # noqa: UP045
        lookback: Optional[str] = typer.Option(None, "--lookback", help="e.g. 30m, 2h (until now)"),  # noqa: UP045
        skip_bad_lines: bool = typer.Option(False, "--skip-bad-lines", help="count and skip malformed lines"),
        set_: list[str] = typer.Option([], "--set", help="threshold override name=value (repeatable)"),  # noqa: B008
        thresholds_file: Optional[Path] = typer.Option(None, "--thresholds", help="JSON file of thresholds"),  # noqa: UP045, B008
        no_html: bool = typer.Option(False, "--no-html", help="skip report.html"),
    ) -> None:
        """Diagnose a run: findings.json, report.html and the seed's figures as PNGs."""
        from otel_verl.analysis.load import LoadStats
        from otel_verl.analysis.report import analyze
        from otel_verl.analysis.thresholds import Thresholds

        th = Thresholds().with_overrides(set_, thresholds_file)
        stats = LoadStats()
        spans = _load(source, source_type, service, since, until, lookback, skip_bad_lines, stats)
        result = analyze(spans, out, th, stats, html_report=not no_html)
        _print_summary(result, stats, out)

    @app.command("import-legacy")
    @_one_line_errors
    def import_legacy_cmd(
        logdir: Path = typer.Argument(..., help="seed log dir: step_<n>/worker_<rank>.jsonl"),  # noqa: B008
        spool: Optional[Path] = typer.Option(None, "--spool", help="spool dir to write"),  # noqa: UP045, B008
        endpoint: Optional[str] = typer.Option(  # noqa: UP045
            None, "--endpoint", help="OTLP endpoint to send the spans to (a collector, Jaeger, Tempo)"
        ),
        protocol: Optional[str] = typer.Option(  # noqa: UP045
            None, "--protocol", help="grpc | http/protobuf (default: OTEL_EXPORTER_OTLP_PROTOCOL or grpc)"
        ),
        run: str = typer.Option("legacy", "--run", help="run name under the spool dir"),
        skip_bad_lines: bool = typer.Option(False, "--skip-bad-lines"),
    ) -> None:
        """Convert SGLangLogManager logs (seeds 000/001/002) into otel_verl spans: a spool and/or OTLP."""
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

    @app.command("export-legacy")
    @_one_line_errors
    def export_legacy_cmd(
        source: str = typer.Argument(..., help=SOURCE_HELP),
        out: Path = typer.Option(..., "--out", help="log dir in the seed's layout"),  # noqa: B008
        source_type: str = typer.Option("auto", "--source-type"),
        skip_bad_lines: bool = typer.Option(False, "--skip-bad-lines"),
    ) -> None:
        """Write the seed's step_<n>/worker_<rank>.jsonl logs so its plotting scripts run on otel_verl data."""
        from otel_verl.analysis.legacy_export import export_legacy

        spans = _load(source, source_type, None, None, None, None, skip_bad_lines)
        n = export_legacy(spans, out)
        print(f"wrote {n} log lines to {out}")

    @app.command("export-perfetto")
    @_one_line_errors
    def export_perfetto_cmd(
        source: str = typer.Argument(..., help=SOURCE_HELP),
        out: Path = typer.Option(..., "--out", help="trace JSON file (open in ui.perfetto.dev)"),  # noqa: B008
        source_type: str = typer.Option("auto", "--source-type"),
        skip_bad_lines: bool = typer.Option(False, "--skip-bad-lines"),
    ) -> None:
        """Chrome/Perfetto trace JSON: one process per worker, one lane per concurrent request."""
        from otel_verl.analysis.perfetto import write_perfetto

        spans = _load(source, source_type, None, None, None, None, skip_bad_lines)
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
    from otel_verl.analysis.thresholds import Thresholds

    stats = LoadStats()
    spans = _load(str(source), "auto", None, None, None, None, False, stats)
    result = analyze(spans, out, Thresholds(), stats, html_report=True)
    _print_summary(result, stats, out)
