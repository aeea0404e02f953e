"""What every live-account test reads and compares, in one place: verl's file logger's rows, a step's usual and
excess adding up, and the accounts the live ones must equal (docs/live.md, "Live and offline")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_verl.live import names as n
from otel_verl.live.account import WINDOW_STEPS, LiveAccount
from otel_verl.live.metrics import own_numbers, step_metrics, top_cause

ROUNDED = 2e-6
"""findings.json's 6 decimals: the same sums taken over spans in another order may round one unit apart."""


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


def assert_live_is_the_spools(rows: dict[int, dict[str, Any]], spool: Path, steps: int, out: Path) -> None:
    """Every step's live row (``rows``, as verl's file logger wrote them) is, number for number, what
    :class:`LiveAccount` makes of the finished spool fed one step at a time (so the collector lost nothing and
    added nothing); and the step's own numbers (:func:`own_numbers`) are ``analyze``'s, over the same window."""
    replay = LiveAccount()
    for step in range(1, steps + 1):
        expected = replay.add(spool, step)
        assert expected is not None, step
        row = rows[step]
        numbers = {k: v for k, v in row.items() if isinstance(v, float | int) and k.startswith(n.PREFIX)}
        differ = {
            k: (numbers.get(k), v)
            for k, v in expected.metrics.items()
            if numbers.get(k) is None or not abs(numbers[k] - v) <= ROUNDED  # NaN differs
        }
        assert not differ, f"step {step}, (live, the spool's): {differ}; live verdict {row.get(n.VERDICT)!r}"
        assert (row.get(n.CAUSE), row.get(n.VERDICT)) == (expected.texts.get(n.CAUSE), expected.verdict), step
        offline, _ = offline_numbers(spool, step, out / f"s{step}")
        assert own_numbers(numbers) == pytest.approx(own_numbers(offline), abs=ROUNDED), step
