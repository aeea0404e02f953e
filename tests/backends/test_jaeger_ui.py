"""The Jaeger UI users browse, opened on our traces in a real browser: jaeger-ui v1.74.0 served by our Jaeger
(``jaeger_query.ui.assets_path``), driven in Debian's headless chromium the way a user drives it, over traces
that went ``otel-verl demo`` → collector → Jaeger.

1. a step's trace draws the tree step → phase → worker → request → turn → engine call → the engine's own span;
2. a cut-off trace (a request in a trace of its own) opens from the step's trace, through its worker span's link;
3. the search page finds a request by its ``verl.request.id`` and opens it.

Screenshots and every console message go to ``$OTEL_VERL_JAEGER_UI_SHOTS`` or a tmp dir (printed with ``-s``).
Skips when the built UI is absent (conftest.JAEGER_UI says where it is looked for).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from otel_verl import semconv as sc

from .conftest import JAEGER_UI, Backends, http_get, jaeger_ui_assets, wait_until
from .emitters import EmitterRun
from .jaeger_ui import (
    CHROMIUM,
    CHROMIUM_ARGS,
    VIEWPORT,
    ConsoleLog,
    UISpan,
    ancestry,
    collapse_all,
    detail_span_id,
    detail_span_ids,
    find_in_trace,
    header_number,
    matching_rows,
    open_detail,
    open_trace,
    rows,
    search,
    ui_trace,
    walk_down,
    widen_names,
)

pytestmark = pytest.mark.backends

CUT_ARGS = ("--steps", "1", "--workers", "1", "--prompts", "4", "--n", "2", "--no-val-before-train", "--no-report")
CUT_ENV = {"OTEL_VERL_TRACE_PER_REQUEST": "1", "OTEL_SERVICE_NAME": "verl-per-request"}
"""The cut-off run: each request the root of its own trace, linked to its worker span. Its own service name
keeps its spans out of the pipeline tests' span-metric counts for service ``verl``."""

Traces = dict[str, dict[str, UISpan]]


@pytest.fixture(scope="session")
def ui(request) -> str:
    """The UI's base URL (our Jaeger's query port), once it serves the real UI. Session-scoped and first in
    every test's arguments, so that a missing UI skips before the backends start."""
    if jaeger_ui_assets() is None:
        pytest.skip(
            f"no built Jaeger UI at {JAEGER_UI}: build jaegertracing/jaeger-ui v1.74.0 "
            "(docs/without-docker.md, 'The Jaeger UI without Docker') or set OTEL_VERL_JAEGER_UI"
        )
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (scripts/install_backends.sh installs it)")
    pytest.importorskip("playwright.sync_api")
    backends: Backends = request.getfixturevalue("backends")
    status, body = http_get(f"{backends.jaeger_url}/search")
    assert status == 200 and b'id="jaeger-ui-root"' in body, "Jaeger serves its placeholder, not the UI"
    return backends.jaeger_url


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots and console logs go: ``$OTEL_VERL_JAEGER_UI_SHOTS`` (kept, e.g. as CI artifacts), else
    a tmp dir (pytest keeps only its last few)."""
    kept = os.environ.get("OTEL_VERL_JAEGER_UI_SHOTS")
    out = Path(kept) if kept else tmp_path_factory.mktemp("jaeger-ui")
    out.mkdir(parents=True, exist_ok=True)
    print(f"\njaeger UI screenshots and console logs: {out}")
    return out


@pytest.fixture(scope="module")
def browser(ui):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class Browsing:
    context: object
    page: object
    log: ConsoleLog


@pytest.fixture
def browsing(browser, shots: Path, request):
    """A fresh browser context (its own tabs) whose console is recorded to ``<test>.console.tsv``; when the
    test fails, every open tab is saved as ``<test>.failed-<n>.png``."""
    context = browser.new_context(viewport=VIEWPORT)
    log = ConsoleLog()
    log.attach(context)
    page = context.new_page()
    failed_before = request.session.testsfailed
    yield Browsing(context, page, log)
    log.write(shots / f"{request.node.name}.console.tsv")
    if request.session.testsfailed > failed_before:
        for n, tab in enumerate(context.pages):
            tab.screenshot(path=shots / f"{request.node.name}.failed-{n}.png")
    context.close()


def _in_jaeger(backends: Backends, run: EmitterRun) -> Traces:
    """The run's traces as the UI reads them, once every spool span is in Jaeger."""
    want = run.traces()

    def complete():
        got = {t: ui_trace(backends.jaeger_url, t) for t in want}
        return got if all(set(spans) <= set(got[t]) for t, spans in want.items()) else None

    try:
        return wait_until(complete, 90, f"the {run.kind} run's spans in Jaeger", interval=1.0)
    except AssertionError:
        raise AssertionError(f"spans missing from Jaeger\n{backends.logs()}") from None


@pytest.fixture(scope="module")
def plain(ui, backends: Backends, emitter_runs) -> Traces:
    """``otel-verl demo`` as the pipeline tests run it (the same run when both modules run)."""
    return _in_jaeger(backends, emitter_runs("demo"))


@pytest.fixture(scope="module")
def cut(ui, backends: Backends, emitter_runs) -> Traces:
    return _in_jaeger(backends, emitter_runs("demo", CUT_ARGS, CUT_ENV))


def _root(spans: dict[str, UISpan]) -> UISpan:
    (root,) = [s for s in spans.values() if not s.parent]
    return root


def test_a_step_trace_draws_the_tree_down_to_the_engine_span(ui, plain: Traces, browsing: Browsing, shots: Path):
    step_trace = next(
        t
        for t, spans in sorted(plain.items())
        if _root(spans).name == sc.SPAN_STEP and any(s.name == sc.ENGINE_SPAN_REQUEST for s in spans.values())
    )
    spans, page = plain[step_trace], browsing.page
    open_trace(page, ui, step_trace)
    assert header_number(page, "Total Spans") == len(spans)
    widen_names(page)
    collapse_all(page)
    assert [(r.depth, r.name) for r in rows(page)] == [(0, sc.SPAN_STEP)]

    path = walk_down(
        page,
        [
            lambda r: r.name == sc.SPAN_STEP,
            lambda r: r.name.startswith(sc.SPAN_PHASE_PREFIX + " ") and r.parent,
            lambda r: r.name == sc.SPAN_WORKER and r.parent,
            lambda r: r.name == sc.SPAN_REQUEST and r.parent,
            lambda r: r.name == sc.SPAN_TURN and r.parent,
            lambda r: r.name.startswith(sc.GEN_AI_OP_TEXT_COMPLETION + " ") and r.parent,
            lambda r: r.name == sc.ENGINE_SPAN_REQUEST,
        ],
    )
    engine_span = open_detail(page, path[-1])
    page.screenshot(path=shots / "1-step-tree.png")

    # what the UI drew is the data's own chain: the engine span the last row opens, and its ancestors
    assert [r.depth for r in path] == list(range(7))
    assert [r.name for r in path] == ancestry(spans, engine_span), [r.name for r in path]
    ours, engine = _root(spans).service, spans[engine_span].service
    assert engine == ours + sc.SIM_ENGINE_SERVICE_SUFFIX  # the simulated engine's own service (verl.sim-engine)
    assert [r.service for r in path] == [ours] * 6 + [engine]
    assert browsing.log.unexpected() == []
    assert browsing.log.offsite(ui) == []


def test_a_cut_off_trace_opens_through_its_link(ui, cut: Traces, browsing: Browsing, shots: Path):
    """From the step's trace, open a cut-off request: select its worker span, follow *References*, land on the
    request's own trace. Jaeger draws a link only on the span that holds it, so both sides hold one: the
    request's root links to its worker (and step) span, and each worker span links to every trace its
    requests went to (``verl.link.kind=cut_off``)."""
    links = [
        (t, sid, target_trace, target_span)
        for t, spans in sorted(cut.items())
        for sid, s in sorted(spans.items())
        for target_trace, target_span in s.links
        if target_trace != t
    ]
    assert links, "no span of the cut-off run links to another trace"
    request_traces = {t for t, spans in cut.items() if _root(spans).name == sc.SPAN_REQUEST}
    from_workers = {link[2] for link in links if cut[link[0]][link[1]].name == sc.SPAN_WORKER}
    assert request_traces and request_traces <= from_workers, "a cut-off request no worker span links to"
    from_step = [
        link
        for link in links
        if _root(cut[link[0]]).name == sc.SPAN_STEP and cut[link[0]][link[1]].name == sc.SPAN_WORKER
    ]
    assert from_step, "no worker span of a step's trace links to a cut-off request"
    holder_trace, holder_span, target_trace, target_span = from_step[0]
    holder, target = cut[holder_trace], ui_trace(ui, target_trace)
    assert target_span in target, "the link points at a span Jaeger does not have"
    step, cut_off = (holder, target) if _root(holder).name == sc.SPAN_STEP else (target, holder)
    assert _root(step).name == sc.SPAN_STEP and _root(cut_off).name != sc.SPAN_STEP
    assert any(s.name == sc.SPAN_REQUEST for s in cut_off.values()), "the cut-off trace holds no request"
    print(f"\nlink followed from {_root(holder).name} ({holder_trace}) to {_root(target).name} ({target_trace})")

    page = browsing.page
    open_trace(page, ui, holder_trace)
    assert header_number(page, "Total Spans") == len(holder)
    widen_names(page)
    find_in_trace(page, holder_span)  # the user pastes the span id into Find and locates it
    assert [r.name for r in matching_rows(page)] == [holder[holder_span].name]
    assert detail_span_id(page) == holder_span  # locate opened its detail
    page.locator(".AccordianReferences--header").click()
    # the first of them: a worker may link a request twice (its trace's cut_off link, and as a slow_request)
    reference = page.locator(".ReferencesList--Item").filter(has_text=target_span).first
    assert "< span in another trace >" in reference.inner_text()
    page.screenshot(path=shots / "2a-link.png")

    with browsing.context.expect_page() as opened:  # jaeger-ui opens another trace's span in a new tab
        reference.locator("a").first.click()
    linked = opened.value
    linked.wait_for_selector(".span-row")
    url = urlparse(linked.url)
    assert url.path == f"/trace/{target_trace}" and parse_qs(url.query)["uiFind"] == [target_span], linked.url
    assert header_number(linked, "Total Spans") == len(target)
    root = _root(target)
    assert linked.locator(".TracePageHeader--title").inner_text().startswith(f"{root.service}: {root.name}")
    assert [r.name for r in matching_rows(linked)] == [target[target_span].name]
    assert detail_span_id(linked) == target_span
    widen_names(linked)
    linked.screenshot(path=shots / "2b-linked-trace.png")
    assert browsing.log.unexpected() == []
    assert browsing.log.offsite(ui) == []


@pytest.mark.parametrize("run", ["plain", "cut"])
def test_search_finds_a_request_by_its_id(run: str, ui, request, browsing: Browsing, shots: Path):
    """``plain``: the request lives in its step's trace; ``cut``: in a trace of its own."""
    traces: Traces = request.getfixturevalue(run)
    trace_id, span_id, req = min(
        (t, sid, s)
        for t, spans in traces.items()
        for sid, s in spans.items()
        if s.name == sc.SPAN_REQUEST
        and sc.VERL_REQUEST_ID in s.tags
        and _root(spans).name in (sc.SPAN_STEP, sc.SPAN_REQUEST)  # not a validation rollout's
    )
    request_id = str(req.tags[sc.VERL_REQUEST_ID])

    page = browsing.page
    search(page, ui, req.service, f"{sc.VERL_REQUEST_ID}={request_id}")
    results = page.locator(".ResultItem")
    assert results.count() == 1, page.locator(".SearchResults").inner_text()
    assert trace_id[:7] in results.first.locator(".ResultItemTitle").inner_text()
    page.screenshot(path=shots / f"3a-search-{run}.png")

    results.first.locator(".ResultItemTitle a").first.click()
    page.wait_for_selector(".span-row")
    assert urlparse(page.url).path == f"/trace/{trace_id}"
    assert header_number(page, "Total Spans") == len(traces[trace_id])
    widen_names(page)
    find_in_trace(page, request_id)
    assert sc.SPAN_REQUEST in [r.name for r in matching_rows(page)]
    assert span_id in detail_span_ids(page)
    page.screenshot(path=shots / f"3b-found-{run}.png")
    assert browsing.log.unexpected() == []
    assert browsing.log.offsite(ui) == []


def test_the_analyzers_trace_link_marks_the_span_its_finding_names(
    ui, backends: Backends, emitter_runs, browsing: Browsing, shots: Path, tmp_path: Path
):
    """Issue 51: ``--trace-url``'s link opened the trace with nothing marked. The analyzer's link to a finding's
    trace carries ``?uiFind=<span id>`` (the first span its evidence names there); Jaeger's UI marks that span.
    The README's demo (a planted stall: a cause whose evidence names spans in every run; a plain demo may have none)."""
    from otel_verl.analysis.pipeline import write_analysis
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.report import presenting

    # its own service name keeps its spans out of the pipeline tests' span-metric counts for service ``verl``
    run = emitter_runs("demo", ("--steps", "3", "--plant", "stall"), {"OTEL_SERVICE_NAME": "verl-stall-link"})
    traces = _in_jaeger(backends, run)
    analysis = write_analysis(load_spans(run.spool), tmp_path / "out")
    named = [
        (f, t)
        for f in (x.to_json() for x in analysis.findings)
        for t in f["trace_ids"]
        if presenting.evidence_span(f, t) in traces.get(t, {})
    ]
    assert named, "no finding names a span Jaeger holds"
    finding, trace = named[0]
    span = presenting.evidence_span(finding, trace)
    link = presenting.trace_link(f"{ui}/trace/{{trace_id}}", trace, span)
    assert link == f"{ui}/trace/{trace}?uiFind={span}", link
    page = browsing.page
    page.goto(link)
    page.wait_for_selector(".span-row.is-matching-filter")
    # one row marked (an engine call's row reads as the engine's span below it: ``Row.name``); its detail is that span
    assert len(matching_rows(page)) == 1, (finding["kind"], [r.name for r in matching_rows(page)])
    page.locator(".TracePageSearchBar--locateBtn").click()  # the UI's own button: open the marked span's detail
    assert detail_span_id(page) == span, (finding["kind"], traces[trace][span].name)
    page.screenshot(path=shots / "5-finding-link.png")
    assert browsing.log.unexpected() == []
