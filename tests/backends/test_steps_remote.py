"""A run fetched a step at a time from the real Jaeger built here (by ``verl.step``) and from the Tempo stand-in
(TraceQL ``{ span.verl.step = N }``, tag values, and the older Tempo APIs): for every step, the rows the
whole-run fetch gives that step, resolved alike."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.remote.steps import PROBE_MISSES
from otel_verl.analysis.read.step_stream import iter_steps

from .conftest import REPO, replayed_jaeger
from .tempo_standin import TempoStandIn

sys.path.insert(0, str(REPO / "tests" / "analysis"))
from builder import PLANTED, build_run
from steps_compare import assert_same_steps

JAEGER_EXTRA = ("extra",)
"""Jaeger adds a warning to a stored span's attributes each time it serves it (clock-skew notes), so the
``extra`` column of two fetches differs; every other column must match."""


@pytest.fixture(scope="module")
def planted_spool(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    build_run(PLANTED).write(root)
    return root


@pytest.fixture(scope="module")
def jaeger(planted_spool: Path, tmp_path_factory) -> Iterator[str]:
    """The Jaeger v2 of scripts/install_backends.sh (memory store) on free ports, with the planted run sent in."""
    with replayed_jaeger(REPO / "jaeger" / "config.yaml", planted_spool, tmp_path_factory.mktemp("jaeger")) as url:
        yield url


def test_jaeger_step_by_step_equals_whole_fetch(jaeger: str) -> None:
    whole = load_spans(jaeger, since_ns=0)
    stats = LoadStats()
    streamed = list(iter_steps(jaeger, since_ns=0, stats=stats))
    assert [s.steps for s in streamed] == [(s,) for s in range(1, 9)]
    assert_same_steps(streamed, whole, drop=JAEGER_EXTRA)
    assert stats.spans == len(whole) and not stats.warnings


def test_jaeger_steps_range(jaeger: str) -> None:
    streamed = list(iter_steps(jaeger, since_ns=0, steps=range(6, 100)))
    assert [s.steps for s in streamed] == [(6,), (7,), (8,)]  # probing stops after the last step


def test_analyze_of_a_jaeger_links_its_trace_pages(jaeger: str, tmp_path: Path) -> None:
    """Issue 51: analysing a Jaeger ended with the hint to put the traces in a Jaeger and pass
    ``--trace-url 'http://JAEGER-HOST:16686/…'``; the source's own trace pages are the links."""
    from typer.testing import CliRunner

    from otel_verl.cli import app

    res = CliRunner().invoke(app, ["analyze", jaeger, "--since", "0", "--steps", "3", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert f"{jaeger.rstrip('/')}/trace/" in res.output and "JAEGER-HOST" not in res.output, res.output[-800:]
    assert f"{jaeger.rstrip('/')}/trace/" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("version", ["3", "2.4", "1.5"])
def test_tempo_step_by_step_equals_whole_fetch(planted_spool: Path, version: str) -> None:
    with TempoStandIn(planted_spool, version=version) as tempo:
        whole = load_spans(tempo.url, since_ns=0)
        tempo.requests.clear()
        streamed = list(iter_steps(tempo.url, since_ns=0))
        assert_same_steps(streamed, whole)
        searches = [r for r in tempo.requests if r.startswith("/api/search")]
        if version == "1.5":  # no TraceQL: the tag search; no tag values API: steps 0-10 probed (3 empty at the end)
            assert sum("tags=verl.step" in r for r in searches) == 1 + 8 + PROBE_MISSES
        else:
            assert any(r.startswith("/api/v2/search/tag/span.verl.step/values") for r in tempo.requests)
            assert sum("span.verl.step" in r for r in searches) == 8
        # then one sweep of the window for traces of no step, fetching none that a step's search brought
        # (Tempo 1.x refuses its TraceQL, then answers the tag search)
        assert sum("verl.step" not in r for r in searches) == (2 if version == "1.5" else 1)
        by_id = [r for r in tempo.requests if r.startswith("/api/v2/traces/" if version == "3" else "/api/traces/")]
        assert sorted(by_id) == sorted(set(by_id)) and len(by_id) == whole["trace_id"].nunique()
