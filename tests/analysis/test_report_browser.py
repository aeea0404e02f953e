"""report.html in a real headless browser (Debian's chromium, driven by Playwright): it renders, logs no
console error, and the verdict (the first headline) is on the first screen at 1280×800."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

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


def test_report_opens_with_the_verdict_in_chromium(seed_report: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (scripts/install_backends.sh installs it)")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(seed_report.as_uri(), wait_until="load")
        headline = page.locator(".headline").first
        box = headline.bounding_box()
        text = headline.inner_text()
        timelines = page.locator("svg.timeline").count()
        bars = page.locator("svg.timeline rect").count()
        links = page.locator("#causes a[href^='http://localhost:16686/trace/']").count()
        plots = page.locator(".plotly-graph-div .main-svg").count()
        browser.close()
    assert errors == []
    assert box is not None and box["y"] + box["height"] < 800, box  # on the first screen
    assert text.startswith("step 3 took") and "because worker 1" in text and "engine call of turn index 0" in text
    assert timelines == 2 and bars > 100  # the slowest step and --timeline-step 1
    assert links >= 1
    assert plots >= 5  # plotly drew the figures
