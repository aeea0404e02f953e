"""Jaeger v2 on real OpenSearch 2.19 and Elasticsearch 7.17 nodes (scripts/build_search_nodes.sh), the stores
docs/large-traces.md recommends for runs too large for one machine: the planted run replayed into Jaeger
(jaeger/config-opensearch.yaml, unchanged but for ports; for Elasticsearch its store's key renamed, as the file
says) and fetched a step at a time equals the whole-run fetch; ``--steps`` stops after the last step; and
``otel-verl analyze`` over it finds what it finds in the spool, word for word.

The planted run is moved to the last hours: Jaeger's OpenSearch reader names one index per day of the asked
window, and a user asks for the days of a run (``--since``/``--lookback``), not for everything since 1970."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.step_stream import iter_steps

from .conftest import BIN, REPO, free_ports, http_get, replayed_jaeger, start, wait_until

sys.path.insert(0, str(REPO / "tests" / "analysis"))
import builder
from steps_compare import assert_same_steps

pytestmark = pytest.mark.backends
JAEGER_EXTRA = ("extra",)
"""Jaeger adds its own warnings to a span's attributes as it serves it (tests/backends/test_steps_remote.py)."""
HOUR_NS = 3600 * 10**9


@pytest.fixture(scope="module")
def recent_run(tmp_path_factory) -> tuple[Path, int]:
    """The planted run, started two hours ago: (its spool, the window's start in ns)."""
    root = tmp_path_factory.mktemp("planted-recent")
    saved = builder.T0_NS
    builder.T0_NS = time.time_ns() - 2 * HOUR_NS
    try:
        builder.build_run(builder.PLANTED).write(root)
        return root, builder.T0_NS - HOUR_NS
    finally:
        builder.T0_NS = saved


@pytest.fixture(scope="module", params=["opensearch", "elasticsearch"])
def search_node(request, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(the engine, its URL): one node of it on free ports."""
    launcher = BIN / f"{request.param}-node"
    if not launcher.exists():
        pytest.fail(f"{launcher} is missing: run scripts/install_backends.sh (scripts/build_search_nodes.sh)")
    work = tmp_path_factory.mktemp(request.param)
    http, transport = free_ports(2)
    proc = start(request.param, [launcher, work / "home", http, transport], {}, work)
    url = f"http://127.0.0.1:{http}"
    try:
        wait_until(lambda: http_get(f"{url}/_cluster/health")[0] == 200, 180, request.param, 1.0, [proc])
        yield request.param, url
    finally:
        proc.stop(30)


@pytest.fixture(scope="module")
def jaeger(search_node: tuple[str, str], recent_run: tuple[Path, int], tmp_path_factory) -> Iterator[str]:
    """Jaeger v2 with jaeger/config-opensearch.yaml on the node, the recent planted run sent in, every span found."""
    engine, node_url = search_node
    spool, since = recent_run
    work = tmp_path_factory.mktemp(f"jaeger-{engine}")
    config = work / "config.yaml"
    text = (REPO / "jaeger" / "config-opensearch.yaml").read_text()
    assert text.count("        opensearch:\n") == 1
    config.write_text(text.replace("        opensearch:\n", f"        {engine}:\n"))
    with replayed_jaeger(config, spool, work, since, {"JAEGER_STORE_URL": node_url}, timeout=90) as url:
        yield url


def test_step_by_step_equals_whole_fetch(jaeger: str, recent_run: tuple[Path, int]) -> None:
    _spool, since = recent_run
    whole = load_spans(jaeger, since_ns=since)
    stats = LoadStats()
    streamed = list(iter_steps(jaeger, since_ns=since, stats=stats))
    assert [s.steps for s in streamed] == [(s,) for s in range(1, 9)]
    assert_same_steps(streamed, whole, drop=JAEGER_EXTRA)
    assert stats.spans == len(whole) and not stats.warnings


def test_steps_range_stops_after_the_last_step(jaeger: str, recent_run: tuple[Path, int]) -> None:
    _spool, since = recent_run
    streamed = list(iter_steps(jaeger, since_ns=since, steps=range(6, 100)))
    assert [s.steps for s in streamed] == [(6,), (7,), (8,)]


def test_analyze_over_the_store_finds_what_the_spool_gives(
    jaeger: str, recent_run: tuple[Path, int], tmp_path: Path
) -> None:
    spool, since = recent_run
    cli = [sys.executable, "-c", "from otel_verl.cli import main; main()", "analyze"]
    found = {}
    for name, source in (("spool", [str(spool)]), ("jaeger", [jaeger, "--since", str(since // 10**9)])):
        r = subprocess.run([*cli, *source, "--out", str(tmp_path / name)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        found[name] = json.loads((tmp_path / name / "findings.json").read_text())
    assert found["jaeger"]["summary"]["spans"] == found["spool"]["summary"]["spans"]
    assert found["jaeger"]["summary"]["steps"] == found["spool"]["summary"]["steps"]
    assert [(f["kind"], f["step"], f["worker"], f["message"]) for f in found["jaeger"]["findings"]] == [
        (f["kind"], f["step"], f["worker"], f["message"]) for f in found["spool"]["findings"]
    ]
