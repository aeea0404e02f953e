"""``otel-verl`` command line: thin layer over the library."""

from __future__ import annotations

import typer

from otel_verl.analysis import commands as analysis_commands

app = typer.Typer(
    name="otel-verl",
    help="OpenTelemetry tracing for multi-turn RL training with verl.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

analysis_commands.register(app)


def main() -> None:  # pragma: no cover - console entry
    app()
