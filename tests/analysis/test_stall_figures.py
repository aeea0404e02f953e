"""Issue 51.3, numbers that agree: the README demo's stall was told with "19.2 s" (how long the worker stood still),
"19.5 s" (what it cost the step) and "+19.3 s" (the step's excess) with nothing saying which was which. Now the cost
is one figure, called a cost wherever it stands (the verdict's "costing", the headline's and steps table's "stall
(cost …)", the causes' "cost" column, the message's "it cost the step"); the stall's length is said as such in the
same sentence; the excess's caption says it holds the causes' costs and the other parts' ups and downs.

A run whose worker stands still 20 s while the other worker runs on (the step loses ~15 s, not 20), read where a
user reads it: the CLI summary piped (the real script) and report.html in headless chromium. Checked by relation
(the figures findings.json holds), not by values: the findings' texts may change."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from builder import Plan, build_run
from test_piped_output import PIPED, SCRIPT
from test_report_browser import report_page

from otel_verl.analysis.findings.common.record import fmt_s

STEP = 3


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """4 steps; in step 3 worker 1 stands still 20 s with its requests in flight; analysed by the real script."""
    root = tmp_path_factory.mktemp("stood-still")
    build_run(Plan(steps=4, pause=(STEP, 1, 1.0, 20.0))).write(root / "spool")
    out = root / "out"
    done = subprocess.run(
        [str(SCRIPT), "analyze", str(root / "spool"), "--out", str(out)], capture_output=True, text=True, env=PIPED
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done, out


def _figures(out: Path) -> tuple[dict[str, Any], str, str]:
    doc = json.loads((out / "findings.json").read_text())
    top = doc["findings"][0]
    still = top["details"].get("stalled_s") or top["details"]["value"]
    return doc, fmt_s(top["seconds"]), fmt_s(still)


def test_the_summary_names_each_figure(analysed) -> None:
    done, out = analysed
    doc, cost, still = _figures(out)
    top = doc["findings"][0]
    (row,) = [a for a in doc["steps"] if a["step"] == STEP]
    assert still != cost  # the case that read as two figures for one loss
    assert top["message"].count(cost) == 1 and top["message"].count(still) >= 1, top["message"]
    assert f"it cost the step {cost} (the step would have ended that much sooner without it; {still} is how long it " \
        "stood still)" in top["message"]  # fmt: skip
    assert f"costing {cost} of step time" in doc["summary"]["verdict"]
    lines = done.stdout.splitlines()
    assert any(f"because of cause #1 below: stall (cost {cost})" in line for line in lines), done.stdout[:3000]
    step_row = next(line for line in lines if re.match(rf"^\W+{STEP} \W", line))
    assert f"stall (cost {cost})" in step_row and presenting_excess(row) in step_row, step_row
    head = next(line for line in lines if re.search(r"severity\W+cost\W+steps\W+cause", line))
    cause_row = next(line for line in lines[lines.index(head) :] if top["message"] in line)
    assert re.match(rf"^\W+1\W+\w+\W+{re.escape(cost)}\W", cause_row), cause_row
    assert any("excess: took − parts' usual, which holds what the step's causes cost" in line for line in lines)


def presenting_excess(row: dict[str, Any]) -> str:
    from otel_verl.analysis.report import presenting

    return presenting.signed_seconds(row["excess_s"])


def test_report_html_names_each_figure_in_chromium(analysed) -> None:
    _, out = analysed
    doc, cost, still = _figures(out)
    with report_page(out / "report.html") as (page, errors):
        headline = page.locator(".headline").first.inner_text()
        step_row = page.locator("#step-table tr").nth(STEP).inner_text()
        cause_row = page.locator("#cause-1").inner_text()
        causes_head = page.locator("#causes tr").first.inner_text()
        caption = page.locator("#steps .caption").inner_text()
    assert errors == []
    assert f"because of cause #1 below: stall (cost {cost})" in headline, headline
    assert f"stall (cost {cost})" in step_row and step_row.split()[0] == str(STEP), step_row
    assert "cost" in causes_head.split() and "lost" not in causes_head, causes_head
    assert f"it cost the step {cost}" in cause_row and f"{still} is how long it stood still" in cause_row, cause_row
    assert f"costing {cost}" in doc["summary"]["verdict"]
    assert "excess: took − parts' usual, which holds what the step's causes cost" in caption, caption
