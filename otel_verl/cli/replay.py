"""``otel-verl replay``: send a spool to any OTLP endpoint, skipping what the delivery journal says arrived."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from otel_verl.cli.common import console


def replay(
    spool: Annotated[Path, typer.Argument(help="Spool directory (or one .jsonl file) to send.", metavar="SPOOL")],
    endpoint: Annotated[str | None, typer.Option(help="OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT).")] = None,
    protocol: Annotated[
        str | None, typer.Option(help="grpc | http/protobuf (default: OTEL_EXPORTER_OTLP_PROTOCOL or grpc).")
    ] = None,
    skip_bad_lines: Annotated[
        bool, typer.Option("--skip-bad-lines", help="Count and skip unparsable lines instead of stopping.")
    ] = False,
    ignore_journal: Annotated[
        bool,
        typer.Option(
            "--ignore-journal",
            help="Send every span, also those the delivery journal lists (e.g. into another backend).",
        ),
    ] = False,
    run: Annotated[
        str | None,
        typer.Option(
            help="Send only this run of a spool folder holding several (default: every run).", show_default=False
        ),
    ] = None,
) -> None:
    """Send a spool to any OTLP endpoint (a collector, Jaeger, Tempo), each span once.

    Spans the live exporter (or an earlier replay) delivered are listed in the run's delivery journal
    (`<run>/.delivery/`) and skipped, so replaying twice sends nothing the second time. A spool folder's runs
    are all sent (each span carries its run's `verl.run.id`), or one with `--run`.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.read.spool.runs import choose_run
    from otel_verl.export.replay import ReplayError
    from otel_verl.export.replay import replay as do_replay

    if run is not None:
        try:
            spool = Path(choose_run(str(spool), run, "spool" if spool.is_dir() else "file").source)
        except AnalysisInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(code=2) from None
    try:
        with Progress(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("spans"),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # off a terminal a transient bar leaves only a blank line
        ) as bar:
            task = bar.add_task("replay", total=None)
            stats = do_replay(
                spool,
                endpoint,
                protocol,
                skip_bad_lines,
                progress=lambda k: bar.advance(task, k),
                ignore_journal=ignore_journal,
            )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    notes = []
    if stats.already_delivered:
        notes.append(f"{stats.already_delivered} already delivered (delivery journal)")
    if stats.duplicates:
        notes.append(f"{stats.duplicates} duplicates sent once")
    if stats.skipped_lines:
        notes.append(f"{stats.skipped_lines} bad lines skipped")
    extra = f"; {', '.join(notes)}" if notes else ""
    console.print(f"sent {stats.sent} of {stats.spans} spans ({stats.lines} lines from {stats.files} files){extra}")
    if stats.sent == 0 and stats.spans:
        console.print(
            "nothing to send: every span was already delivered (into a backend that lost them, e.g. a Jaeger "
            "started again, --ignore-journal sends them again)"
        )
    if stats.journal_failed:
        print(
            f"warning: {stats.journal_failed} sent spans could not be journaled (read-only spool?); "
            "a later replay would send them again",
            file=sys.stderr,
        )
