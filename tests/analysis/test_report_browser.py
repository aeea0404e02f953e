"""report.html in a real headless browser (Debian's chromium, driven by Playwright): it renders from disk with
plotly.js loaded from the file beside it (not inlined, no network), logs no console error, the verdict is on the
first screen at 1280×800, and the account figure and the causes of the new findings schema render."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gen_seed_logs import Plant, write_seed_logs

    from otel_verl import analysis

    logs = write_seed_logs(
        tmp_path_factory.mktemp("seed"), steps=5, workers=4, requests=8, seed=5, plants={(3, 1): Plant(stall=60.0)}
    )
    out = tmp_path_factory.mktemp("report")
    analysis.analyze(logs, out, trace_url="http://localhost:16686/trace/{trace_id}", timeline_steps=(1,))
    return out / "report.html"


def _browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (scripts/install_backends.sh installs it)")
    return sync_api


@contextmanager
def report_page(path: Path) -> Iterator[tuple[Any, list[str]]]:
    """``path`` opened in headless chromium at 1280×800: (the page, the console and page errors seen so far)."""
    sync_api = _browser()
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri(), wait_until="load")
        try:
            yield page, errors
        finally:
            browser.close()


def test_report_opens_with_the_verdict_in_chromium(seed_report: Path) -> None:
    from otel_verl.analysis.report import plotly_file_name

    html = seed_report.read_text()
    assert len(html) < 1_000_000 and (seed_report.parent / plotly_file_name()).stat().st_size > 1_000_000
    assert f"<script src='{plotly_file_name()}'>" in html and "cdn" not in html.lower()
    with report_page(seed_report) as (page, errors):
        headline = page.locator(".headline").first
        box = headline.bounding_box()
        text = headline.inner_text()
        timelines = page.locator("svg.timeline").count()
        bars = page.locator("svg.timeline rect").count()
        links = page.locator("#causes a[href^='http://localhost:16686/trace/']").all_inner_texts()
        plots = page.locator(".plotly-graph-div .main-svg").count()
        titles = page.locator("h2").all_inner_texts()
        legend = page.locator("svg.timeline text").all_text_contents()
    assert errors == []
    assert box is not None and box["y"] + box["height"] < 800, box  # on the first screen
    assert text.startswith("step 3: rollout took") and "(worker 1)" in text and "engine call of turn index 0" in text
    assert timelines == 2 and bars > 100  # the slowest step and --timeline-step 1
    assert links and all(len(t) == 32 for t in links)  # full trace ids, linked
    assert plots >= 5  # plotly drew the figures
    assert "The trainer's phases per step" in titles and not any("_" in t for t in titles)  # words, not file stems
    assert "barrier wait" in legend and "engine call" in legend


def test_account_and_new_findings_in_chromium(tmp_path: Path) -> None:
    """The new diagnosis's output (findings.json dicts and step accounts, hand-built per schema.md): the account
    figure near the top with a bar per step and the usual duration, what the input lacked, the causes with
    their full trace ids and the command that opens their steps; plotly.js shared from the parent folder."""
    from accounts import REWARD_TRACE, new_findings, new_summary, step_accounts

    from otel_verl.analysis.report import plotly_file_name, write_html

    (tmp_path / "run1").mkdir()
    path = write_html(tmp_path / "run1" / "report.html", new_findings(), new_summary(), {}, [],
                      accounts=step_accounts(), source="./spool", plotly_dir=tmp_path)  # fmt: skip
    assert (tmp_path / plotly_file_name()).exists() and not (tmp_path / "run1" / plotly_file_name()).exists()
    with report_page(path) as (page, errors):
        verdict = page.locator(".verdict").bounding_box()
        account = page.locator("#account .plotly-graph-div").bounding_box()
        bars = page.locator("#account .plotly-graph-div .bars .point").count()
        legend = page.locator("#account .legendtext").all_text_contents()
        missing = page.locator("#missing").inner_text()
        causes = page.locator("#causes").inner_text()
        page.screenshot(path=str(tmp_path / "account.png"))
    assert errors == []
    assert verdict is not None and verdict["y"] < 400
    assert account is not None and account["y"] < 1000  # right after the verdict
    assert bars >= 12 * 10  # a stacked bar per step
    assert {"usual step (baseline)", "reward", "phase: update_actor", "decode"} <= set(legend)
    assert "3 bad lines were skipped" in missing and "steps 11-12" in missing
    assert REWARD_TRACE in causes and "otel-verl export-perfetto ./spool --steps 7:7 --out step7.json" in causes
    assert "the trainer (phase update_actor)" in causes
