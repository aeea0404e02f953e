"""What every live-account test reads and compares, in one place: verl's file logger's rows, a step's usual and
excess adding up, and the offline account the live one must equal (docs/live.md, "Live and offline")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS
from otel_verl.live.metrics import step_metrics, top_cause


def logged_rows(tmp: Path) -> dict[int, dict[str, Any]]:
    """verl's file logger (``tmp/verl.jsonl``): the live account's row of each step (the one with
    ``otel_verl/step``), written once, at its own step."""
    rows = {}
    for line in (tmp / "verl.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if n.STEP in doc["data"]:
            assert doc["step"] not in rows, f"step {doc['step']} written twice"
            assert doc["step"] == doc["data"][n.STEP]
            rows[doc["step"]] = doc["data"]
    return rows


def assert_adds_up(step: int, row: dict[str, Any]) -> None:
    """Step 1 has no step before it: no usual, no excess, and its line says so; every later step's time is its
    usual plus its excess."""
    if step == 1:
        assert n.USUAL_S not in row and n.EXCESS_S not in row and "no baseline yet" in row[n.VERDICT]
    else:
        assert row[n.STEP_S] == pytest.approx(row[n.USUAL_S] + row[n.EXCESS_S], abs=1e-5)


def offline_numbers(spool: Path, step: int, out: Path) -> tuple[dict[str, float], dict[str, Any] | None]:
    """Step ``step``'s numbers and top cause as ``analyze --steps N-7:N --baseline selected`` of ``spool`` gives
    them (made into numbers by the function the live account uses)."""
    from otel_verl import analysis
    from otel_verl.analysis.findings.common import kinds

    first = max(1, step - WINDOW_STEPS + 1)
    offline = analysis.analyze(
        spool, out, steps=range(first, step + 1), baseline="selected", figures=False, html_report=False
    )
    (account,) = [s for s in offline.steps if s["step"] == step]
    cause = top_cause([f.to_json() for f in offline.findings], step, tuple(kinds.CAUSES))
    return step_metrics(account, cause), cause
