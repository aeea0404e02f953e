"""The terminal summary of ``analyze`` (and of ``demo``) tells a cause's sentence once (issue 51, item e): the headline
of its step points at it (``because of cause #1 below: stall (…), worker 1``, as report.html does), the causes table
tells it; and the steps table's usual column says what it is beside the median step (item b: "usual 2.4 s" sat
above both normal steps, 2.2 s and 2.3 s, read as the usual step; it is the sum of the parts' usual seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from builder import Plan, build_run
from typer.testing import CliRunner

from otel_verl.analysis.findings.common.record import fmt_s
from otel_verl.cli import app


def test_a_cause_is_told_once_and_the_usual_column_says_what_it_is(tmp_path: Path) -> None:
    build_run(Plan(steps=4, workers=2, requests=6, straggler=(3, 1, 0.5, 12.0), seed=5)).write(tmp_path / "spool")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["analyze", str(tmp_path / "spool"), "--out", str(out), "--no-html"], env={"COLUMNS": "1000"}
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "findings.json").read_text())
    top = doc["findings"][0]
    assert top["severity"] in ("critical", "warning") and len(top["message"]) > 40, top
    printed = " ".join(res.stdout.split())
    assert printed.count(top["message"]) == 1, printed  # the causes table's row; not the headline too
    (headline,) = [h for h in doc["summary"]["headlines"] if top["message"] in h]
    pointer = headline.split(" because ", 1)[0] + " because of cause #1 below: "
    assert pointer in printed, printed
    assert "┃ parts' usual ┃" in res.stdout, res.stdout
    median = fmt_s(float(np.median([s["duration_s"] for s in doc["steps"]])))
    assert f"need not be the median step; the median step took {median})" in printed, printed


def test_the_reports_steps_table_and_account_figure_name_the_usual_alike() -> None:
    """report.html: the steps table's column and caption, and the account figure's dash, say "parts' usual"."""
    from otel_verl.analysis.figures.catalog import TITLES
    from otel_verl.analysis.report import page as report

    accounts = [
        {"step": s, "duration_s": took, "baseline_s": 2.4, "excess_s": took - 2.4, "severity": "ok", "top_cause": None}
        for s, took in ((1, 2.2), (2, 21.6), (3, 2.3))
    ]
    html = "".join(report._steps_table(accounts, []))
    assert "<th>parts&#x27; usual</th>" in html or "<th>parts' usual</th>" in html, html
    assert "the median step took 2.3 s" in html, html
    assert "parts' usual" in TITLES["step_account"][1]
