"""One of the asynchronous benchmark's runs, written as verl traces and read by the real analyzer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.write_async import write_async
from otel_verl.analysis import analyze


def analyzed_async_run(cls: str, seed: int, fmt: Any, tmp: Path) -> tuple[Any, dict[str, Any]]:
    """``(expect, findings.json)`` of class ``cls``'s run drawn from ``seed`` in format ``fmt`` (no report, no
    figures; the caller sets ``OTEL_VERL_ANALYZE_JOBS`` if it wants the analysis in process)."""
    run, expect = BUILDERS[cls](seed, fmt)
    analyze(write_async(run, tmp / "data"), tmp / "out", html_report=False, figures=False)
    return expect, json.loads((tmp / "out" / "findings.json").read_text())
