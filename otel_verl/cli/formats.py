"""Other formats in and out: the seed's SGLangLogManager logs (``import-legacy``, ``export-legacy``) and
Chrome/Perfetto trace JSON (``export-perfetto``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from otel_verl.cli.common import (
    EXIT_CODES,
    SkipBadLines,
    SourceOptions,
    exit_fast_after,
    load_source,
    one_line_errors,
    parse_step_range,
    source_options,
)
from otel_verl.invocation import otel_verl_command

IMPORT_LEGACY_HELP = (
    "Convert the logs of verl's earlier profiler (SGLangLogManager: `step_<n>/worker_<rank>.jsonl`) "
    "into otel_verl spans: a spool (`--spool`) and/or OTLP (`--endpoint`). A validation rollout's "
    f"`val_step_<n>/` logs are marked validation.\n\n{EXIT_CODES}"
)
EXPORT_LEGACY_HELP = (
    "Write SGLangLogManager's `step_<n>/worker_<rank>.jsonl` logs, so plotting scripts written for that "
    "profiler run on otel_verl "
    f"data (a validation rollout goes to `val_step_<n>/`).\n\n{EXIT_CODES}"
)
EXPORT_PERFETTO_HELP = (
    "A trace for ui.perfetto.dev (Open trace file): a trainer track (steps, phases) and a group per worker.\n\n"
    "Each worker's group holds its chunks and barrier wait, then a track per request named by prompt, request id "
    "and replica, holding its turns, engine calls and events; every span's attributes are on its slice. "
    "Perfetto's protobuf format (`.pftrace`), or Chrome's JSON for an `--out` ending in `.json` (its request "
    "lanes cannot be named). One step (the README demo's spool and its slow step):\n\n"
    # a code block of its own: rich wraps a paragraph at 80 columns mid-command (the second cold trial), not a
    # code line that fits; spelled as the user's shell runs it (otel_verl.invocation)
    f"    {otel_verl_command()} export-perfetto ./traces --steps 2 --out step2.pftrace"
    f"\n\n{EXIT_CODES}"
)
FORMATS = ("auto", "proto", "json")


@one_line_errors
def import_legacy(
    logdir: Annotated[
        Path,
        typer.Argument(
            help="SGLangLogManager log dir: `step_<n>/worker_<rank>.jsonl`", metavar="LOGDIR", show_default=False
        ),
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
    from otel_verl.analysis.read import LoadStats
    from otel_verl.analysis.write.seed_to_spool import import_legacy as convert

    stats = LoadStats()
    n = convert(
        logdir, spool, run=run, skip_bad_lines=skip_bad_lines, endpoint=endpoint, protocol=protocol, stats=stats
    )
    done = [f"wrote {n} spans to {spool / run}"] if spool is not None else []
    done += [f"sent {n} spans to {endpoint}"] if endpoint is not None else []
    if stats.bad_lines:
        done.append(f"{stats.bad_lines} bad lines skipped (first: {stats.first_bad[0]})")
    print("; ".join(done))
    if endpoint is None:  # an OTLP sender's channel closes in its own exit handler
        exit_fast_after()


@source_options
@one_line_errors
def export_legacy(
    out: Annotated[Path, typer.Option("--out", help="log dir in SGLangLogManager's layout (created)")],
    src: SourceOptions,
) -> None:
    from otel_verl.analysis.output_paths import prepare_dir
    from otel_verl.analysis.write.seed_logs import export_legacy as write

    prepare_dir(out)
    n = write(load_source(src), out)
    print(f"wrote {n} log lines to {out}")
    exit_fast_after()


@source_options
@one_line_errors
def export_perfetto(
    out: Annotated[Path, typer.Option("--out", help="trace file to write (e.g. `trace.pftrace`)")],
    src: SourceOptions,
    steps: Annotated[
        str | None,
        typer.Option("--steps", help="only these training steps: `N`, `A:B` (both included), `A:` or `:B`"),
    ] = None,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="`proto` (Perfetto's, named lanes), `json` (Chrome's); `auto`: `json` for a `.json` file",
        ),
    ] = "auto",
) -> None:
    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.output_paths import prepare_file
    from otel_verl.analysis.write.perfetto import write_perfetto
    from otel_verl.analysis.write.perfetto_proto import write_perfetto_proto

    if format_ not in FORMATS:
        raise AnalysisInputError(f"--format {format_!r}: use {', '.join(FORMATS)}")
    fmt = ("json" if out.suffix.lower() == ".json" else "proto") if format_ == "auto" else format_
    step_range = parse_step_range(steps) if steps is not None else None
    prepare_file(out)
    spans = load_source(src, steps=step_range)  # the read keeps only those steps' spans
    n = write_perfetto(spans, out) if fmt == "json" else write_perfetto_proto(spans, out)
    kind = "Chrome trace JSON" if fmt == "json" else "Perfetto trace"
    print(f"wrote {n} spans as a {kind} to {out}; open it at https://ui.perfetto.dev (Open trace file)")
    exit_fast_after()
