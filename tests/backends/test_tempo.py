"""Tempo as an analyzer source, against Tempo's documented query API (tests/backends/tempo_standin.py) serving
a real CPU-demo spool: ``otel-verl analyze <Tempo URL>`` must read back exactly the spool's spans and
diagnose the same run, on Tempo 3 (v2 trace by id), 2.0-2.4 (v1 only) and 1.x (tag search); Tempo's errors
are one line, a trace gone since the search is skipped, a PARTIAL trace is a visible warning.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPO
from .tempo_standin import TempoStandIn

pytestmark = [pytest.mark.ray, pytest.mark.backends]


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("otel-verl")
    return [str(exe)] if exe.exists() else ["uv", "run", "--frozen", "otel-verl"]


def _env() -> dict[str, str]:
    """This process's environment without any OTLP endpoint: the demo writes its spool only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["OTEL_SDK_DISABLED"] = "false"
    return env


def _analyze(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [*_cli(), "analyze", url, "--source-type", "tempo", *extra, "--out", str(out)]
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def demo_spool(emitter_runs) -> Path:
    """The spool of the ``otel-verl demo`` run the pipeline and Jaeger UI tests look at (one run for the session:
    each costs CI ~1.5 min of Ray and verl start-up)."""
    return emitter_runs("demo").spool


@pytest.fixture(scope="module")
def spool_spans(demo_spool: Path) -> pd.DataFrame:
    from otel_verl.analysis.read import load_spans

    spans = load_spans(demo_spool)
    # ours + the simulated engine's
    assert set(spans["service"]) == {"verl", "verl.sim-engine"} and spans["trace_id"].nunique() >= 2
    return spans


def _window(spans: pd.DataFrame) -> tuple[int, int]:
    """Whole seconds around the run, as a user types --since/--until."""
    return math.floor(spans["start_ns"].min() / 1e9), math.ceil(spans["end_ns"].max() / 1e9)


def _assert_same_spans(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert len(got) == len(want)
    merged = got.set_index("span_id").loc[want["span_id"]]
    for col in ("trace_id", "parent_id", "name", "start_ns", "end_ns", "status"):
        assert (merged[col].to_numpy() == want[col].to_numpy()).all(), col


def test_analyze_reads_tempo3_like_the_spool(demo_spool: Path, spool_spans: pd.DataFrame, tmp_path: Path):
    from otel_verl.analysis.read import load_spans

    since, until = _window(spool_spans)
    with TempoStandIn(demo_spool, version="3") as tempo:
        got = load_spans(tempo.url, service="verl", since_ns=since * 10**9, until_ns=until * 10**9)
        _assert_same_spans(got, spool_spans)
        asked = list(tempo.requests)
        searches = [p for p in asked if p.startswith("/api/search")]
        assert len(searches) == 1 and "q=%7B+resource.service.name+%3D+%22verl%22+%7D" in searches[0]
        assert sum(p.startswith("/api/v2/traces/") for p in asked) == spool_spans["trace_id"].nunique()
        assert not [p for p in asked if p.startswith("/api/traces/")]

        # The CLI, as a user runs it: probe (no --source-type), --service and a time range.
        out_t, out_s = tmp_path / "from-tempo", tmp_path / "from-spool"
        cmd = [*_cli(), "analyze", tempo.url, "--service", "verl", "--since", str(since), "--until", str(until)]
        r = subprocess.run([*cmd, "--out", str(out_t)], cwd=REPO, env=_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "/api/echo" in tempo.requests
    r = subprocess.run([*_cli(), "analyze", str(demo_spool), "--out", str(out_s)], cwd=REPO, env=_env(), text=True)
    assert r.returncode == 0
    assert (out_t / "report.html").stat().st_size > 10_000
    tempo_findings = json.loads((out_t / "findings.json").read_text())
    spool_findings = json.loads((out_s / "findings.json").read_text())
    for key in ("spans", "steps", "workers", "requests"):
        assert tempo_findings["summary"][key] == spool_findings["summary"][key], key
    assert tempo_findings["summary"]["spans"] == len(spool_spans)
    assert len(tempo_findings["summary"]["steps"]) == spool_spans.loc[spool_spans["kind"] == "step", "step"].nunique()
    training = ~spool_spans["validate"].fillna(False).astype(bool)  # the summary counts training's requests
    assert tempo_findings["summary"]["requests"] == int(((spool_spans["kind"] == "request") & training).sum())
    assert [(f["kind"], f["step"], f["worker"]) for f in tempo_findings["findings"]] == [
        (f["kind"], f["step"], f["worker"]) for f in spool_findings["findings"]
    ]


@pytest.mark.parametrize("version", ["2.4", "1.5"])
def test_older_tempo_apis(version: str, demo_spool: Path, spool_spans: pd.DataFrame):
    """No v2 route (Tempo < 2.5): v1 trace by id after one 404; Tempo 1.x: tag search instead of TraceQL."""
    from otel_verl.analysis.read import load_spans

    since, until = _window(spool_spans)
    with TempoStandIn(demo_spool, version=version) as tempo:
        got = load_spans(tempo.url, service="verl", since_ns=since * 10**9, until_ns=until * 10**9)
    _assert_same_spans(got, spool_spans)
    assert sum(p.startswith("/api/v2/traces/") for p in tempo.requests) == 1
    searches = [p for p in tempo.requests if p.startswith("/api/search")]
    assert len(searches) == (2 if version == "1.5" else 1)
    if version == "1.5":
        assert "tags=service.name%3Dverl" in searches[1]


def test_trace_gone_since_the_search_is_skipped(demo_spool: Path, spool_spans: pd.DataFrame):
    """Tempo's 404 for a missing trace has no body: the reader must not take it for a missing v2 route."""
    from otel_verl.analysis.read import load_spans

    first, *rest = sorted(
        spool_spans["trace_id"].unique(), key=lambda t: -spool_spans.loc[spool_spans["trace_id"] == t, "start_ns"].min()
    )
    with TempoStandIn(demo_spool, vanished={first}) as tempo:
        got = load_spans(tempo.url, source_type="tempo", since_ns=0)
    assert set(got["trace_id"]) == set(rest)
    v1 = [p for p in tempo.requests if p.startswith("/api/traces/")]
    assert v1 == [f"/api/traces/{first.lstrip('0')}"], "v2 stays in use after a missing trace"


def test_partial_trace_is_a_warning(demo_spool: Path, spool_spans: pd.DataFrame, tmp_path: Path):
    from otel_verl.analysis.read import LoadStats, load_spans

    big = spool_spans["trace_id"].value_counts().index[0]
    with TempoStandIn(demo_spool, partial={big}) as tempo:
        stats = LoadStats()
        got = load_spans(tempo.url, source_type="tempo", since_ns=0, stats=stats)
        r = _analyze(tempo.url, tmp_path / "out", "--since", "0", "--no-html")
    n_big = int((spool_spans["trace_id"] == big).sum())
    assert len(got) == len(spool_spans) - n_big + n_big // 2
    assert len(stats.warnings) == 1 and f"trace {big.lstrip('0')} partially" in stats.warnings[0]
    assert "Trace exceeds maximum size of 5000000 bytes" in stats.warnings[0]
    assert r.returncode == 0, r.stderr
    assert "warning: Tempo returned trace" in r.stderr
    summary = json.loads((tmp_path / "out" / "findings.json").read_text())["summary"]
    assert summary["load"]["warnings"] == stats.warnings


@pytest.mark.parametrize(
    ("faults", "expected"),
    [
        ({"/api/search": (500, b"internal error")}, "HTTP 500: internal error"),
        ({"/api/v2/traces/": (503, b"too many outstanding requests")}, "HTTP 503: too many outstanding requests"),
        ({"/api/search": (429, b"job queue full")}, "HTTP 429: job queue full"),
    ],
)
def test_tempo_errors_are_one_line(faults, expected: str, demo_spool: Path, tmp_path: Path):
    with TempoStandIn(demo_spool, faults=faults) as tempo:
        r = _analyze(tempo.url, tmp_path / "out", "--since", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr


def test_empty_window_and_wrong_url_are_one_line(demo_spool: Path, tmp_path: Path):
    """A window with nothing in it, and a URL that is not Tempo: one line on stderr, exit 2."""
    with TempoStandIn(demo_spool) as tempo:
        empty = _analyze(tempo.url, tmp_path / "a", "--since", "1000", "--until", "2000")
        wrong = _analyze(f"{tempo.url}/nothing-here", tmp_path / "b", "--lookback", "1h")
    for r in (empty, wrong):
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no spans found" in empty.stderr
    assert "HTTP 404" in wrong.stderr
