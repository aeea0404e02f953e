"""Driving the real Jaeger UI (jaeger-ui v1.74.0, served by our Jaeger) in Debian's headless chromium.

What the UI reads, read the same way (``/api/traces/<id>``, Jaeger's v1 JSON: span links arrive as
``FOLLOWS_FROM`` references), and what a user sees, read from the DOM the UI draws: the rows of the trace
timeline (one ``.span-row`` per visible span, its depth = its indent guides, its name in ``.endpoint-name``),
a span's detail (``SpanID``, ``References``), the in-trace *Find* box and the search form. Class names are
jaeger-ui's own (packages/jaeger-ui/src/components/TracePage/...).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

from .conftest import http_get

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    # the machine's network is closed: nothing of chromium's own should try it
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
]
VIEWPORT = {"width": 1280, "height": 800}

KNOWN_UI_LOGS = {
    # jaeger-ui#2427: the critical path of a trace whose span's first reference is a FOLLOWS_FROM to a span in
    # another trace (a span link, e.g. a request's own trace linked to its worker) fails inside the UI, which
    # catches it and logs this with console.log; the trace draws, without its critical-path line.
    "critical path, link to another trace (jaeger-ui#2427)": re.compile(
        r"^error while computing critical path for a trace TypeError: Cannot read properties of undefined "
        r"\(reading 'childSpanIds'\)"
    ),
    # jaeger-ui#3131: v1.74.0's in-trace Find box throws on every keystroke (no router history since the
    # react-router migration) and never highlights anything; fixed in v1.75.0 (jaeger-ui#3132). The uiFind
    # URL parameter, which the UI's own links carry, works; find_in_trace falls back on it.
    "in-trace Find box (jaeger-ui#3131)": re.compile(
        r"^TypeError: Cannot read properties of undefined \(reading 'replace'\)\s+at updateUiFind\b"
    ),
}
"""What the UI itself logs on our traces. Nothing is filtered for the closed network: the UI asks nothing of
it (no analytics without a ``tracking`` config, fonts and icons are bundled) and logs nothing about it."""


@dataclass
class UISpan:
    name: str
    service: str
    parent: str  # span id of the CHILD_OF reference in the same trace, "" for a root
    links: list[tuple[str, str]]  # (trace id, span id) of each reference to another span that is not the parent
    tags: dict[str, object]


def ui_trace(jaeger_url: str, trace_id: str) -> dict[str, UISpan]:
    """span id → span of one trace as the UI gets it (``GET /api/traces/<id>``); {} while it is absent."""
    status, body = http_get(f"{jaeger_url}/api/traces/{trace_id}", timeout=10)
    if status != 200:
        return {}
    (trace,) = json.loads(body)["data"]
    out: dict[str, UISpan] = {}
    for sp in trace["spans"]:
        parent, links = "", []
        for ref in sp.get("references") or []:
            if ref["refType"] == "CHILD_OF" and ref["traceID"] == trace["traceID"] and not parent:
                parent = ref["spanID"]
            else:
                links.append((ref["traceID"], ref["spanID"]))
        out[sp["spanID"]] = UISpan(
            sp["operationName"],
            trace["processes"][sp["processID"]]["serviceName"],
            parent,
            links,
            {t["key"]: t["value"] for t in sp.get("tags") or []},
        )
    return out


def ancestry(spans: dict[str, UISpan], span_id: str) -> list[str]:
    """Names from the root down to ``span_id`` along CHILD_OF parents."""
    names = []
    while span_id:
        names.append(spans[span_id].name)
        span_id = spans[span_id].parent
    return names[::-1]


@dataclass
class ConsoleLog:
    """Every console message, uncaught error and requested URL of every page of one browser context."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (page url, type, text)
    requests: list[str] = field(default_factory=list)

    def attach(self, context) -> None:
        context.on("page", self._watch)
        context.on("request", lambda r: self.requests.append(r.url))

    def _watch(self, page) -> None:
        page.on("console", lambda m: self.messages.append((page.url, m.type, m.text)))
        page.on("pageerror", lambda e: self.messages.append((page.url, "pageerror", e.stack or str(e))))

    def offsite(self, base: str) -> list[str]:
        """Requests anywhere but ``base`` (Jaeger): the UI must not reach for the network."""
        return [url for url in self.requests if not url.startswith((base + "/", "data:", "blob:"))]

    def known(self) -> list[str]:
        return [name for _, _, text in self.messages for name, rx in KNOWN_UI_LOGS.items() if rx.search(text)]

    def unexpected(self) -> list[tuple[str, str, str]]:
        """Errors, warnings and anything that reads like an error, less what KNOWN_UI_LOGS names."""
        return [
            (url, kind, text)
            for url, kind, text in self.messages
            if (kind in ("error", "pageerror", "warning") or re.search(r"error|exception|failed", text, re.I))
            and not any(rx.search(text) for rx in KNOWN_UI_LOGS.values())
        ]

    def write(self, path: Path) -> None:
        lines = [f"{kind}\t{url}\t{text}\n" for url, kind, text in self.messages]
        path.write_text("".join(lines + [f"request\t{url}\t\n" for url in self.requests]))


# -- the trace page


def open_trace(page, base: str, trace_id: str, query: str = "") -> None:
    page.goto(f"{base}/trace/{trace_id}{query}")
    page.wait_for_selector(".span-row")


def widen_names(page, x: int = 560) -> None:
    """Drag the name column's divider to ``x`` so names fit in screenshots (the UI's default is 25 %)."""
    grip = page.locator(".TimelineHeaderRow .VerticalResizer--dragger").first.bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + 10)
    page.mouse.down()
    page.mouse.move(x, grip["y"] + 10, steps=5)
    page.mouse.up()


def header_number(page, label: str) -> int:
    """A number of the trace header's overview ('Total Spans', 'Depth', 'Services')."""
    text = page.locator(".TracePageHeader--overviewItems").inner_text()
    match = re.search(rf"{label}\s*(\d+)", text)
    assert match, f"no {label!r} in the trace header: {text!r}"
    return int(match.group(1))


@dataclass(frozen=True)
class Row:
    index: int
    depth: int  # 0 for the root
    service: str
    name: str  # what the row reads; a collapsed client span over another service's server span reads as that one
    parent: bool  # has children
    expanded: bool  # its children are shown
    matching: bool  # highlighted by the Find box


_READ_ROWS = """() => [...document.querySelectorAll('.span-row')].map(r => [
  r.querySelectorAll('.SpanTreeOffset--indentGuide').length - 1,
  r.querySelector('.span-svc-name').innerText.split(/\\s+/).filter(Boolean).join(' '),
  r.querySelector('.endpoint-name').innerText.trim(),
  r.querySelector('.SpanTreeOffset').classList.contains('is-parent'),
  !r.querySelector('.span-svc-name.is-children-collapsed'),
  r.classList.contains('is-matching-filter'),
])"""


def rows(page) -> list[Row]:
    """The timeline rows the UI draws now (it renders those near the viewport), read in one go."""
    return [
        Row(i, depth, service, name, parent, parent and expanded, matching)
        for i, (depth, service, name, parent, expanded, matching) in enumerate(page.evaluate(_READ_ROWS))
    ]


def toggle_children(page, row: Row) -> None:
    page.locator(".span-row").nth(row.index).locator(".SpanTreeOffset--iconWrapper").click()


def collapse_all(page) -> None:
    """The timeline header's 'Collapse All' (the fourth of its collapser icons)."""
    page.locator(".TimelineCollapser svg").nth(3).click()


def open_detail(page, row: Row) -> str:
    """Click a row's name to open its detail; returns the span id the detail shows."""
    page.locator(".span-row").nth(row.index).locator(".span-name").click()
    return detail_span_id(page)


def detail_span_id(page, nth: int = 0) -> str:
    text = page.locator(".detail-row .SpanDetail--debugInfo").nth(nth).inner_text()
    match = re.search(r"\b[0-9a-f]{16}\b", text)
    assert match, f"no span id in the span detail: {text!r}"
    return match.group(0)


def walk_down(page, path: list) -> list[Row]:
    """From the root, at each level expand the first row of the next depth that ``path[level](row)`` accepts.

    ``path[0]`` is checked against the root. A collapsed row may read as its only child (jaeger-ui shows a
    client span over another service's server span as one RPC row), so a collapsed candidate is expanded
    before it is judged, and collapsed again when it is not the one. Returns the rows of the path, as read
    once they were expanded.
    """
    (root,) = [r for r in rows(page) if r.depth == 0]
    assert path[0](root), f"the root reads {root}"
    chosen = [root]
    for depth, accepts in enumerate(path[1:], start=1):
        if not chosen[-1].expanded:
            toggle_children(page, chosen[-1])
        found = None
        for row in rows(page)[chosen[-1].index + 1 :]:
            if row.depth < depth:
                break
            if row.depth != depth:
                continue
            if row.parent and not row.expanded:
                toggle_children(page, row)
                row = next(r for r in rows(page) if r.index == row.index)
            if accepts(row):
                found = row
                break
            if row.parent:
                toggle_children(page, row)
        assert found is not None, f"no row at depth {depth} under {chosen[-1]} fits the path; rows: {rows(page)}"
        chosen.append(found)
    return chosen


def find_in_trace(page, text: str) -> bool:
    """Type into the trace page's *Find* box and press its locate button (focus the matches, open their details).

    When the box does not take it (jaeger-ui#3131 in v1.74.0: the locate button stays disabled), open the URL
    the box would have made, ``?uiFind=<text>``, as the UI's own links do. Returns whether the box worked.
    """
    from playwright.sync_api import expect

    page.locator("input[name=search]").fill(text)
    locate = page.locator(".TracePageSearchBar--locateBtn")
    try:
        expect(locate).to_be_enabled(timeout=3000)
        box_worked = True
    except AssertionError:
        url = urlparse(page.url)
        page.goto(url._replace(query=urlencode({**parse_qs(url.query), "uiFind": [text]}, doseq=True)).geturl())
        page.wait_for_selector(".span-row")
        box_worked = False
    locate.click()
    page.wait_for_selector(".span-row.is-matching-filter")
    return box_worked


def matching_rows(page) -> list[Row]:
    return [r for r in rows(page) if r.matching]


def detail_span_ids(page) -> list[str]:
    """The span ids of every open detail, top to bottom."""
    return [detail_span_id(page, i) for i in range(page.locator(".detail-row .SpanDetail--debugInfo").count())]


# -- the search page


def search(page, base: str, service: str, tags: str) -> None:
    """Fill the search form as a user does (service, tags) and press *Find Traces*."""
    page.goto(f"{base}/search")
    field_ = page.locator(".ant-form-item").filter(has=page.locator("label", has_text=re.compile(r"^Service")))
    field_.locator(".ant-select-selector").click()
    page.keyboard.type(service)  # the option list is virtual: filter it so the service is drawn
    page.locator(f".ant-select-item-option[title='{service}']").click()
    page.locator("input[name=tags]").fill(tags)
    page.locator("button[data-test=submit-btn]").click()
    page.locator(".ResultItem").or_(page.get_by_text("No trace results")).first.wait_for()
