"""report.html read in real headless chromium, for what a reader notices: the tab names the run, each cause's
sentence and the workers' share of step time are read once (the share: its figure, then its table), decode rates
read in ms/token, and the "where" column of the causes stays a line or two."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_verl.analysis.figures.catalog import TITLES
from otel_verl.analysis.findings.common.record import fmt_per_token


@pytest.fixture(scope="module")
def report(planted_spool: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from otel_verl import analysis

    out = tmp_path_factory.mktemp("reading")
    analysis.analyze(str(planted_spool / "run1"), out)
    return out / "report.html"


def test_rates_in_milliseconds() -> None:
    assert fmt_per_token(0.000917) == "0.917 ms/token" and fmt_per_token(0.0101) == "10.1 ms/token"
    assert fmt_per_token(float("nan")) == fmt_per_token(None) == "? ms/token"


def test_the_report_reads_once_and_names_its_run(report: Path) -> None:
    """Each cause's sentence is read once, in the causes table: a headline that repeated it points to its row."""
    import json

    from test_report_browser import report_page

    found = json.loads((report.parent / "findings.json").read_text())["findings"]
    messages = [f["message"] for f in found if len(f["message"]) >= 40]

    title, caption = TITLES["event_share"]
    with report_page(report, width=1024) as (page, errors):
        tab = page.title()
        headings = page.locator("h2").all_inner_texts()
        text = page.locator("body").inner_text()
        headline_links = page.locator(".headline a[href^='#cause-']").count()
        # the event-share table comes right after its figure, under the one heading
        after = page.evaluate(
            "() => { let e = document.getElementById('event-share'); while (e && e.tagName !== 'H2') "
            "e = e.previousElementSibling; return e ? e.innerText : null; }"
        )
        where = page.evaluate(  # each cell's text in line boxes: the distinct tops of its text's rectangles
            "() => [...document.querySelectorAll('#causes td.where')].map(td => { const r = document.createRange(); "
            "r.selectNodeContents(td); return [td.innerText, new Set([...r.getClientRects()].map(x => "
            "Math.round(x.top))).size]; })"
        )
    assert errors == []
    assert tab == "run1 · otel_verl analysis"
    assert [h for h in headings if h.startswith(title)] == [title] and after == title
    assert text.count(caption) == 1
    assert messages and all(text.count(m) == 1 for m in messages), [m for m in messages if text.count(m) != 1]
    assert headline_links >= 1
    assert "s/token" not in text.replace("ms/token", "") and "ms/token" in text
    assert re.search(r"decoded at \d[\d.]* ms/token", text)
    assert where and all(lines <= (1 if len(text) <= 20 else 2) for text, lines in where), where  # "worker 1" took 2
