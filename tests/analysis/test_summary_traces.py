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
