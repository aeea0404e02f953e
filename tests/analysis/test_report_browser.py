"""report.html in a real headless browser (Debian's chromium, driven by Playwright): it renders from disk with
plotly.js inside the page (no network, no file beside it: it works copied anywhere or mailed alone), logs no console
error, the verdict and the steps table are on the first screen, the page never scrolls sideways at 1024 or 1400 px,
commands wrap only between words, and the account figure and the causes of the new findings schema render."""

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
def report_page(path: Path, width: int = 1280) -> Iterator[tuple[Any, list[str]]]:
    """``path`` opened in headless chromium at ``width``×800, its figures drawn: (the page, the console and page
    errors seen so far)."""
    sync_api = _browser()
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri(), wait_until="load")
        if page.locator("script.plotly-figure").count():  # plotly.js unpacks, then draws every figure
            page.wait_for_function(
                "document.querySelectorAll('.plotly-graph-div .main-svg').length > 0 || "
                "getComputedStyle(document.getElementById('noplotly')).display !== 'none'",
                timeout=30_000,
            )
        try:
            yield page, errors
        finally:
            browser.close()


def test_report_opens_with_the_verdict_in_chromium(seed_report: Path) -> None:
    html = seed_report.read_text()
    assert "<script src" not in html and "://cdn" not in html and not list(seed_report.parent.glob("*.js"))
    with report_page(seed_report) as (page, errors):
        headline = page.locator(".headline").first
        box = headline.bounding_box()
        text = headline.inner_text()
        linked = page.locator("#cause-1").inner_text()  # the headline names its cause; the row tells it in full
        timelines = page.locator("svg.timeline").count()
        bars = page.locator("svg.timeline rect").count()
        links = page.locator("#causes a[href^='http://localhost:16686/trace/']").all_inner_texts()
        plots = page.locator(".plotly-graph-div .main-svg").count()
        titles = page.locator("h2").all_inner_texts()
        legend = page.locator("svg.timeline text").all_text_contents()
        ticks = page.locator("#figure-outliers .ytick text").all_text_contents()
    assert errors == []
    ids = [t.split(" · ")[0] for t in ticks if " · step " in t]
    assert ids and all(len(i) == 36 for i in ids), ticks  # the seed's uuids whole (they were cut to 16)
    assert box is not None and box["y"] + box["height"] < 800, box  # on the first screen
    assert text.startswith("step 3: rollout took") and "because of cause #1 below: " in text and "worker 1" in text
    assert "(worker 1)" in linked and "engine call of turn index 0" in linked
    assert timelines == 2 and bars > 100  # the slowest step and --timeline-step 1
    assert links and all(len(t) == 32 for t in links)  # full trace ids, linked
    assert plots >= 5  # plotly drew the figures
    assert "The trainer's phases per step" in titles and not any("_" in t for t in titles)  # words, not file stems
    assert "barrier wait" in legend and "engine call" in legend


def test_account_and_new_findings_in_chromium(tmp_path: Path) -> None:
    """The new diagnosis's output (findings.json dicts and step accounts, hand-built per schema.md): the account
    figure near the top with a bar per step and the usual duration, what the input lacked, the causes with
    their full trace ids and the command that opens their steps."""
    from accounts import REWARD_TRACE, new_findings, new_summary, step_accounts

    from otel_verl.analysis.report.page import write_html
    from otel_verl.analysis.report.step_rows import add_step_rows

    (tmp_path / "run1").mkdir()
    accounts = add_step_rows(step_accounts(), new_findings())
    path = write_html(tmp_path / "run1" / "report.html", new_findings(), new_summary(), {}, [],
                      accounts=accounts, source="./spool")  # fmt: skip
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
    assert REWARD_TRACE in causes and "otel-verl export-perfetto ./spool --steps 7:7 --out step7.pftrace" in causes
    assert "the trainer (phase update_actor)" in causes


@pytest.fixture(scope="module")
def planted_report(planted_spool: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted run analysed as ``otel-verl analyze`` does (no --trace-url: each cause shows its command)."""
    from otel_verl import analysis

    out = tmp_path_factory.mktemp("planted-report")
    analysis.analyze(str(planted_spool / "run1"), out)
    return out / "report.html"


@pytest.mark.parametrize("width", [1024, 1400])
@pytest.mark.parametrize("where", ["as written", "copied alone"])
def test_layout_as_written_and_copied_alone(
    planted_report: Path, planted_spans, tmp_path: Path, width: int, where: str
) -> None:
    """No console error, no sideways scroll, every figure drawn (plotly inside the page: a copy of report.html
    alone, without the PNGs or anything beside it, draws the same), the steps table first with findings.json's
    numbers, commands wrapped only between words, the outliers figure naming full request ids."""
    import json
    import shutil

    from otel_verl.analysis.report import presenting

    path = planted_report
    if where == "copied alone":
        path = tmp_path / "mailed" / "report.html"
        path.parent.mkdir()
        shutil.copy(planted_report, path)
    with report_page(path, width) as (page, errors):
        scroll = page.evaluate("document.documentElement.scrollWidth")
        plots = page.locator(".plotly-graph-div .main-svg").count()
        figures = page.locator("script.plotly-figure").count()
        note = page.locator("#noplotly").is_visible()
        table = page.locator("#step-table").bounding_box()
        cells = [row.locator("td").all_inner_texts() for row in page.locator("#step-table tr").all()[1:]]
        # a command's word broken over two lines has two client rects
        broken = page.evaluate(
            "[...document.querySelectorAll('code.cmd .w')].filter(w => w.getClientRects().length > 1)"
            ".map(w => w.textContent)"
        )
        commands = page.locator("code.cmd").count()
        ticks = page.locator("#figure-outliers .ytick text").all_text_contents()
        page.screenshot(path=str(tmp_path / f"report-{width}.png"), full_page=True)
    assert errors == [], errors
    assert scroll <= width, f"the page scrolls sideways: {scroll} px at {width} px"
    assert figures >= 8 and plots >= figures and not note
    assert table is not None and table["y"] < 800  # on the first screen
    steps = json.loads((planted_report.parent / "findings.json").read_text())["steps"]
    assert [c[0] for c in cells] == [str(a["step"]) for a in steps]
    for row, a in zip(cells, steps, strict=True):
        assert row[1:5] == [
            presenting.seconds_words(a["duration_s"]),
            presenting.seconds_words(a["baseline_s"]),
            presenting.signed_seconds(a["excess_s"]),
            a["severity"],
        ]
    assert commands > 0 and broken == []
    ids = [t.split(" · ")[0] for t in ticks if " · step " in t]
    assert ids and set(ids) <= set(planted_spans["request_id"].dropna()), ticks  # whole ids, as recorded
