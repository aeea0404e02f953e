"""The summary's trace list (``cli/analyze.py _print_traces``): a trace id two causes share is listed once."""

from __future__ import annotations

from rich.console import Console

from otel_verl.cli.analyze import _print_traces


def test_a_trace_two_causes_share_is_listed_once() -> None:
    """Issue 51: a clean demo listed one trace id as #1 and again as #2 (two notes of the same request)."""
    shared, other = "ab" * 16, "cd" * 16
    shown = [
        {"steps": [1], "trace_ids": [shared]},
        {"steps": [2], "trace_ids": [shared, other]},
    ]
    console = Console(record=True, width=200)
    _print_traces(console, shown, "http://jaeger/trace/{trace_id}", None)
    lines = console.export_text().splitlines()
    assert lines[:3] == [
        "traces:",
        f"  #1 #2 steps 1-2: http://jaeger/trace/{shared}",
        f"  #2 step 2: http://jaeger/trace/{other}",
    ]


def test_a_jaeger_link_highlights_the_span_the_finding_names() -> None:
    """Issue 51: the link opened the trace with nothing marked. Jaeger's trace page takes ``?uiFind=<span id>`` (its
    own links to another trace's span carry it; tests/backends/test_jaeger_ui.py opens ours in its UI); the summary
    and report.html link each trace to the first span the finding's evidence names there."""
    from otel_verl.analysis.report.page import _traces

    trace, span, other = "ab" * 16, "12" * 8, "cd" * 16
    shown = [{"steps": [2], "trace_ids": [trace, other], "evidence": [{"trace_id": trace, "span_id": span}]}]
    console = Console(record=True, width=200)
    _print_traces(console, shown, "http://127.0.0.1:16686/trace/{trace_id}", None)
    lines = console.export_text().splitlines()
    assert lines[1:3] == [
        f"  #1 step 2: http://127.0.0.1:16686/trace/{trace}?uiFind={span}",
        f"  #1 step 2: http://127.0.0.1:16686/trace/{other}",  # no span of the finding there: the trace alone
    ]
    assert f"href='http://127.0.0.1:16686/trace/{trace}?uiFind={span}'" in _traces(
        shown[0], "http://127.0.0.1:16686/trace/{trace_id}"
    )
    grafana = "http://grafana:3000/explore?traceId={trace_id}&span={span_id}"  # a template that asks for the span
    _print_traces(console := Console(record=True, width=200), shown, grafana, None)
    assert f"  #1 step 2: http://grafana:3000/explore?traceId={trace}&span={span}" in console.export_text()
