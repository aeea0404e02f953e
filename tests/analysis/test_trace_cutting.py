"""Trace cutting never changes the analysis: one real run, as its traces were cut and joined back into one
trace per step, resolves to the same span tree and gives the same findings and step accounts.

The CPU demo (verl's real agent loop, planted slowness as in ``conftest.DEMO_PLANTED``) runs with a step
trace of 400 spans, so most requests go to traces of their sample group (``OTEL_VERL_TRACE_MAX_SPANS``);
a second run puts every request in a trace of its own (``OTEL_VERL_TRACE_PER_REQUEST``). Each spool is
then rewritten as if nothing had been cut (:func:`uncut`: every span of a cut trace moves into the trace of
the span its request links to first, its worker's or its V1 sample group's, and that request's parent
becomes that span), and
both versions are analyzed. Compared: every span's resolved kind, step, worker, request, turn and
ancestors, and ``findings.json`` (its trace ids mapped through the same rewrite). The diagnosis is
being rewritten; whatever :func:`otel_verl.analysis.analyze` gives at the time is compared, so the test
keeps its meaning.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pandas as pd
import pytest
from conftest import DEMO_PLANTED, DEMO_SIZE

from otel_verl import semconv as sc
from otel_verl.analysis.read import load_spans
from tests.process_state import reset_tracing

pytestmark = [pytest.mark.verl, pytest.mark.ray]

RESOLVED = ["kind", "step", "worker", "request_id", "turn_index", "validate", "service", "name"]
ANCESTORS = ["request_span", "worker_span", "turn_span", "step_span"]


def _spans(doc: dict):
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            yield from ss["spans"]


def _link_kind(link: dict) -> str | None:
    kinds = [a["value"].get("stringValue") for a in link.get("attributes", ()) if a["key"] == sc.VERL_LINK_KIND]
    return kinds[0] if kinds else None


def _parent_link(span: dict) -> dict | None:
    """A cut request's first link: the parent it would have had (its V1 sample group's span, else its worker's)."""
    links = span.get("links") or ()
    parents = (sc.LinkKind.GROUP.value, sc.LinkKind.WORKER.value)
    return links[0] if links and _link_kind(links[0]) in parents else None


def uncut(spool: Path, out: Path) -> dict[str, str]:
    """Write ``spool`` to ``out`` with every cut trace joined into its worker's trace; returns the trace id map."""
    files = sorted(spool.rglob("*.jsonl"))
    moved: dict[str, str] = {}
    for path in files:
        for line in path.read_bytes().splitlines():
            for span in _spans(orjson.loads(line)):
                link = _parent_link(span)
                if "parentSpanId" not in span and span["name"] == sc.SPAN_REQUEST and link is not None:
                    assert moved.setdefault(span["traceId"], link["traceId"]) == link["traceId"]  # one worker a trace
    for path in files:
        lines = []
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            for span in _spans(doc):
                link = _parent_link(span)
                if "parentSpanId" not in span and span["name"] == sc.SPAN_REQUEST and link is not None:
                    span["parentSpanId"] = link["spanId"]
                span.pop("links", None)
                span["traceId"] = moved.get(span["traceId"], span["traceId"])
            lines.append(orjson.dumps(doc))
        target = out / path.relative_to(spool)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\n".join(lines) + b"\n")
    return moved


def _demo(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, name: str, env: dict) -> Path:
    pytest.importorskip("verl")
    from otel_verl.demo.runner import DemoOptions, run_demo

    for key, value in env.items():
        monkeypatch.setenv(key, value)  # the demo hands OTEL_* to its Ray actors
    reset_tracing()
    spool = tmp_path_factory.mktemp(f"cut-{name}")
    try:
        result = run_demo(DemoOptions(spool=str(spool), **{**DEMO_SIZE, **DEMO_PLANTED}))
    finally:
        reset_tracing()
    return Path(result.spool_dir)


@pytest.fixture(scope="module", params=["sample-groups", "per-request"])
def cut_run(request, tmp_path_factory):
    """(cut spool, the same spans uncut, trace id map) of one demo run."""
    env = {
        "sample-groups": {"OTEL_VERL_TRACE_MAX_SPANS": "400"},
        "per-request": {"OTEL_VERL_TRACE_PER_REQUEST": "true"},
    }[request.param]
    with pytest.MonkeyPatch.context() as monkeypatch:
        spool = _demo(tmp_path_factory, monkeypatch, request.param, env)
    joined = tmp_path_factory.mktemp(f"uncut-{request.param}")
    moved = uncut(spool, joined)
    return request.param, spool, joined, moved


def _tree(spans: pd.DataFrame) -> pd.DataFrame:
    """Each span's resolved place in the tree, by span id (ancestors as span ids, not row numbers)."""
    ids = spans["span_id"].to_numpy(dtype=object)
    out = spans[["span_id", *RESOLVED]].copy()
    for col in ANCESTORS:
        rows = spans[col].to_numpy()
        out[col] = [ids[r] if r >= 0 else None for r in rows]
    return out.sort_values("span_id").reset_index(drop=True)


def test_the_run_was_really_cut(cut_run) -> None:
    shape, spool, _joined, moved = cut_run
    spans = load_spans(spool)
    requests = spans[spans["kind"] == "request"]
    steps = spans[spans["kind"] == "step"]
    assert moved, "no request left its step's trace"
    in_own = requests["trace_id"].isin(moved)
    assert in_own.any() and (shape == "per-request") == in_own.all()
    if shape == "sample-groups":  # the step's trace kept some requests, the rest share a trace per group
        assert (~in_own).any()
        per_trace = requests[in_own].groupby("trace_id").size()
        assert per_trace.max() == DEMO_SIZE["n"]
    assert len(steps) == DEMO_SIZE["steps"]
    # a cut request links to its worker span (first) and its step span; each worker links to its slowest
    sample = spool.rglob("*.jsonl")
    links = [
        (span["name"], [_link_kind(lk) for lk in span.get("links", ())])
        for path in sample
        for line in path.read_bytes().splitlines()
        for span in _spans(orjson.loads(line))
    ]
    cut_links = [kinds for name, kinds in links if name == sc.SPAN_REQUEST and kinds]
    parents = (["worker", "step"], ["group", "worker", "step"])  # a validation before training: no step
    assert cut_links and all(kinds in parents for kinds in cut_links if kinds[-1] == "step")
    worker_links = [kinds for name, kinds in links if name == sc.SPAN_WORKER and kinds]
    assert worker_links and all(set(kinds) <= {"cut_off", "slow_request"} for kinds in worker_links)


def test_the_step_trace_links_to_every_cut_off_trace(cut_run) -> None:
    """Jaeger shows a link on the span holding it only: the worker spans (in the step's trace) link to each
    trace their requests went to, so each cut-off request opens from the step's trace."""
    _shape, spool, _joined, moved = cut_run
    spans = [
        span
        for path in spool.rglob("*.jsonl")
        for line in path.read_bytes().splitlines()
        for span in _spans(orjson.loads(line))
    ]
    by_id = {span["spanId"]: span for span in spans}
    reached = {
        link["traceId"]
        for span in spans
        if span["name"] == sc.SPAN_WORKER
        for link in span.get("links", ())
        if _link_kind(link) == sc.LinkKind.CUT_OFF.value
        and by_id[link["spanId"]]["traceId"] == link["traceId"]  # a span that is there
        and by_id[link["spanId"]]["name"] == sc.SPAN_REQUEST
    }
    assert reached == set(moved)


def test_same_tree_however_cut(cut_run) -> None:
    _shape, spool, joined, moved = cut_run
    cut, whole = load_spans(spool), load_spans(joined)
    assert len(cut) == len(whole)
    a, b = _tree(cut), _tree(whole)
    pd.testing.assert_frame_equal(a, b)
    assert (a.loc[a["kind"] == "request", "worker"].notna()).all()  # every request found its worker ...
    assert (a.loc[a["kind"] == "request", "step"].notna()).all()  # ... and its step
    engine = a[a["kind"] == "engine"]
    assert len(engine) and engine["request_id"].notna().all() and engine["turn_index"].notna().all()
    mapped = cut["trace_id"].map(lambda t: moved.get(t, t))
    assert sorted(mapped) == sorted(whole["trace_id"])


def test_same_findings_however_cut(cut_run, tmp_path) -> None:
    from otel_verl.analysis import analyze

    _shape, spool, joined, moved = cut_run
    cut_result = analyze(load_spans(spool), tmp_path / "cut")
    whole_result = analyze(load_spans(joined), tmp_path / "whole")
    # the step's account: every step, part by part, the same (findings.json's ``steps``, compared below too)
    assert len(whole_result.steps) == DEMO_SIZE["steps"] and any(s["parts"] for s in whole_result.steps)
    mapped = json.loads(_mapped(json.dumps(cut_result.steps), moved))
    assert mapped == whole_result.steps
    cut_text = _mapped((tmp_path / "cut" / "findings.json").read_text(), moved)
    cut_doc, whole_doc = json.loads(cut_text), json.loads((tmp_path / "whole" / "findings.json").read_text())
    assert whole_doc["findings"], "the planted run found nothing: the comparison would mean little"
    assert _distinct_trace_ids(cut_doc) == whole_doc, _diff(_distinct_trace_ids(cut_doc), whole_doc)


def _mapped(text: str, moved: dict[str, str]) -> str:
    """``text`` with each cut trace's id replaced by the id of the trace it was joined into."""
    for old, new in moved.items():
        text = text.replace(old, new)
    return text


def _distinct_trace_ids(value):
    """A finding's ``trace_ids`` lists the distinct traces of its evidence: two requests of one step were two
    traces when cut and are one when joined, so the mapped list is made distinct again (order kept)."""
    if isinstance(value, dict):
        return {k: list(dict.fromkeys(v)) if k == "trace_ids" else _distinct_trace_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_distinct_trace_ids(v) for v in value]
    return value


def _diff(a: dict, b: dict) -> str:
    import difflib

    lines = [json.dumps(d, indent=1, sort_keys=True).splitlines() for d in (a, b)]
    return "\n".join(list(difflib.unified_diff(*lines, "cut", "whole", lineterm="", n=2))[:80])
