"""``otel-verl`` command line: one typer app, one module per command group, thin over the library.

=================  ======================  ============================================================
command            module                  what it does
=================  ======================  ============================================================
demo               :mod:`.demo`            traced CPU rollout with real verl code, then the analysis
replay             :mod:`.replay`          send a spool to an OTLP endpoint, each span once
analyze            :mod:`.analyze`         findings.json, report.html and figures of a trace source
import-legacy      :mod:`.formats`         the seed's SGLangLogManager logs → spool / OTLP
export-legacy      :mod:`.formats`         a trace source → the seed's log layout
export-perfetto    :mod:`.formats`         a trace source → Chrome/Perfetto trace JSON
check-seams        :mod:`.seams`           which seams fit the installed verl, or a verl source tree
=================  ======================  ============================================================

The source options every reading command shares are declared once, in :mod:`.common`.
"""

from __future__ import annotations

import os
import sys

import typer

from otel_verl.cli import analyze, common, demo, formats, replay, seams
from otel_verl.cli.help_format import Command, Group
from otel_verl.invocation import otel_verl_command

app = typer.Typer(
    name="otel-verl",
    help=(
        "OpenTelemetry tracing for multi-turn RL training with verl.\n\n"
        "Trace a real run: add the override printed at the end of this help to the verl command line and set "
        "OTEL_EXPORTER_OTLP_ENDPOINT (or nothing: spans then go to ./otel-verl-spool). Try it without a GPU: "
        f"`{otel_verl_command()} demo`."  # as the user's shell runs it (otel_verl.invocation)
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    cls=Group,
)


def _version(value: bool) -> None:
    if value:
        from otel_verl.version import __version__

        typer.echo(f"otel-verl {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print otel_verl's version and exit."
    ),
) -> None:
    """OpenTelemetry tracing for multi-turn RL training with verl."""


app.command("demo", cls=Command)(demo.demo)
app.command("replay", cls=Command)(replay.replay)
app.command("analyze", cls=Command, help=analyze.ANALYZE_HELP)(analyze.analyze)
app.command("import-legacy", cls=Command, help=formats.IMPORT_LEGACY_HELP)(formats.import_legacy)
app.command("export-legacy", cls=Command, help=formats.EXPORT_LEGACY_HELP)(formats.export_legacy)
app.command("export-perfetto", cls=Command, help=formats.EXPORT_PERFETTO_HELP)(formats.export_perfetto)
app.command("check-seams", cls=Command, help=seams.CHECK_SEAMS_HELP)(seams.check_seams)


def main() -> None:
    """The ``otel-verl`` console script: the app, then a fast exit after a command that asked for one
    (:func:`otel_verl.cli.common.exit_fast_after`)."""
    try:
        # click's "Usage: …" and "Try '… --help'" lines spell the program as the CLI's own hints do
        # (.venv/bin/otel-verl where the shell has no otel-verl on its PATH: issue 51)
        app(prog_name=otel_verl_command())
    except SystemExit as exc:
        if exc.code in (0, None) and common.fast_exit_requested():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        raise
