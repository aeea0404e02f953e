"""Tempo as an analyzer source: a real Tempo (scripts/build_tempo.sh, tempo/tempo-local.yaml, local disk)
gets a CPU-demo spool through ``otel-verl replay``; ``otel-verl analyze <Tempo URL>`` must read back
exactly the spool's spans and diagnose the same run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO, Proc, binary, free_ports, http_get, start, wait_until

pytestmark = [pytest.mark.backends, pytest.mark.ray]


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("otel-verl")
    return [str(exe)] if exe.exists() else ["uv", "run", "--frozen", "otel-verl"]


def _env() -> dict[str, str]:
    """This process's environment without any OTLP endpoint: the demo writes its spool only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["OTEL_SDK_DISABLED"] = "false"
    return env


@pytest.fixture(scope="module")
def tempo(tmp_path_factory) -> Iterator[tuple[str, str, Proc]]:
    """Tempo single binary on free ports: (query base URL, OTLP gRPC endpoint, process)."""
    exe = binary("tempo")
    work = tmp_path_factory.mktemp("tempo")
    http, grpc, otlp_grpc, otlp_http, gossip = free_ports(5)
    env = {
        "TEMPO_DATA": str(work / "data"),
        "TEMPO_HTTP_PORT": str(http),
        "TEMPO_GRPC_PORT": str(grpc),
        "TEMPO_OTLP_GRPC_PORT": str(otlp_grpc),
        "TEMPO_OTLP_HTTP_PORT": str(otlp_http),
        "TEMPO_MEMBERLIST_PORT": str(gossip),
    }
    config = REPO / "tempo" / "tempo-local.yaml"
    proc = start("tempo", [exe, f"-config.file={config}", "-config.expand-env=true"], env, work)
    base = f"http://127.0.0.1:{http}"
    try:
        wait_until(lambda: http_get(f"{base}/ready")[0] == 200, 60, "tempo ready", procs=[proc])
        yield base, f"http://127.0.0.1:{otlp_grpc}", proc
    finally:
        proc.stop(timeout=5)


@pytest.fixture(scope="module")
def demo_spool(tmp_path_factory) -> Path:
    spool = tmp_path_factory.mktemp("tempo-spool")
    size = ["--steps", "2", "--workers", "2", "--prompts", "4", "--n", "2"]
    cmd = [*_cli(), "demo", *size, "--spool", str(spool), "--no-report"]  # the test analyzes it itself
    r = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return spool


def test_analyze_reads_tempo_like_the_spool(tempo, demo_spool: Path, tmp_path: Path):
    from otel_verl.analysis.read import load_spans, remote

    base, otlp, proc = tempo
    spool = load_spans(demo_spool)
    services = set(spool["service"])
    assert services == {"verl"}, services
    since_s = math.floor(spool["start_ns"].min() / 1e9)
    until_s = math.ceil(spool["start_ns"].max() / 1e9)

    r = subprocess.run(
        [*_cli(), "replay", str(demo_spool), "--endpoint", otlp], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr

    # Ingestion is asynchronous: wait until every step trace is searchable and complete.
    n_traces = spool["trace_id"].nunique()
    wait_until(
        lambda: len(remote.tempo_trace_ids(base, "verl", since_s * 10**9, until_s * 10**9)) == n_traces,
        60,
        f"{n_traces} traces searchable in tempo",
        interval=1.0,
        procs=[proc],
    )

    def complete():
        got = load_spans(base, source_type="tempo", service="verl", since_ns=since_s * 10**9, until_ns=until_s * 10**9)
        return [got] if len(got) >= len(spool) else None  # a list: a DataFrame has no truth value

    (from_tempo,) = wait_until(complete, 60, "all spans in tempo", interval=1.0, procs=[proc])
    assert set(from_tempo["span_id"]) == set(spool["span_id"])
    assert set(from_tempo["trace_id"]) == set(spool["trace_id"])
    merged = from_tempo.set_index("span_id").loc[spool["span_id"]]
    assert (merged["parent_id"].to_numpy() == spool["parent_id"].to_numpy()).all()
    assert (merged["name"].to_numpy() == spool["name"].to_numpy()).all()
    assert (merged["start_ns"].to_numpy() == spool["start_ns"].to_numpy()).all()

    # The CLI, as a user runs it: --service and a time range, findings.json + report.html.
    out_t, out_s = tmp_path / "from-tempo", tmp_path / "from-spool"
    window = ["--service", "verl", "--since", str(since_s), "--until", str(until_s)]
    cmd = [*_cli(), "analyze", base, "--source-type", "tempo", *window, "--out", str(out_t)]
    r = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([*_cli(), "analyze", str(demo_spool), "--out", str(out_s)], cwd=REPO, env=_env(), text=True)
    assert r.returncode == 0
    assert (out_t / "report.html").stat().st_size > 10_000
    tempo_findings = json.loads((out_t / "findings.json").read_text())
    spool_findings = json.loads((out_s / "findings.json").read_text())
    for key in ("spans", "steps", "workers", "requests"):
        assert tempo_findings["summary"][key] == spool_findings["summary"][key], key
    assert tempo_findings["summary"]["spans"] == len(spool)
    assert len(tempo_findings["summary"]["steps"]) == 2
    assert tempo_findings["summary"]["requests"] == 2 * 4 * 2
    assert [(f["kind"], f["step"], f["worker"]) for f in tempo_findings["findings"]] == [
        (f["kind"], f["step"], f["worker"]) for f in spool_findings["findings"]
    ]


def test_tempo_errors_are_one_line(tempo, tmp_path: Path):
    """A window with nothing in it, and a URL that is not Tempo: one line on stderr, exit 2."""
    base, _, _ = tempo
    empty = [*_cli(), "analyze", base, "--source-type", "tempo", "--since", "1000", "--until", "2000"]
    r = subprocess.run([*empty, "--out", str(tmp_path / "a")], cwd=REPO, env=_env(), capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    wrong = [*_cli(), "analyze", f"{base}/nothing-here", "--source-type", "tempo", "--lookback", "1h"]
    r = subprocess.run([*wrong, "--out", str(tmp_path / "b")], cwd=REPO, env=_env(), capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "HTTP 404" in r.stderr, r.stderr
