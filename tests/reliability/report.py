"""Span counts of the reliability scenarios, kept where CI and people can read them.

Each scenario test calls :func:`record` with what it measured (spans created, spooled, delivered
live, replayed, found in Jaeger, ...). The counts go to ``reliability_counts.json`` in
``$OTEL_VERL_TEST_REPORT_DIR`` (default ``<repo>/test-reports/``, git-ignored), merged with what
earlier runs wrote, and are printed at the end of the pytest run by ``tests/conftest.py``'s
terminal summary (``pytest -q`` hides ``print``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FILE_NAME = "reliability_counts.json"

recorded: dict[str, dict[str, Any]] = {}
"""What this pytest process recorded, for the terminal summary."""


def report_path() -> Path:
    directory = Path(os.environ.get("OTEL_VERL_TEST_REPORT_DIR") or REPO / "test-reports")
    return directory / FILE_NAME


def record(scenario: str, **counts: Any) -> None:
    """Store one scenario's counts (replacing that scenario's previous entry in the file)."""
    entry = {**counts, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    recorded[scenario] = entry
    path = report_path()
    try:
        existing = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(existing, dict):
            existing = {}
    except (OSError, ValueError):
        existing = {}
    existing[scenario] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(existing, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def summary_lines() -> list[str]:
    """One line per scenario recorded in this run."""
    lines = []
    for scenario, counts in recorded.items():
        shown = ", ".join(f"{key}={value}" for key, value in counts.items() if key != "recorded_at")
        lines.append(f"{scenario}: {shown}")
    return lines
