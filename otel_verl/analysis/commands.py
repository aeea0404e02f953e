"""CLI commands of the analyzer (analyze, import-legacy, export-legacy, export-perfetto)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the analyzer's commands to the main ``otel-verl`` app."""
