"""The tail-sampling overlay (collector/tail_sampling.yaml) runs and keeps the traces it must keep."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import REPO, binary, free_ports, http_get, start, wait_until
from .emitters import read_otlp_jsonl

pytestmark = pytest.mark.backends


def _sampled(telemetry_port: int) -> dict[str, float]:
    _, body = http_get(f"http://127.0.0.1:{telemetry_port}/metrics")
    out: dict[str, float] = {}
    for m in re.finditer(
        r"^otelcol_processor_tail_sampling_global_count_traces_sampled\{([^}]*)\} (\S+)$", body.decode(), re.M
    ):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def test_tail_sampling_overlay_keeps_bad_steps(tmp_path):
    grpc, http_, health, metrics, tele, jaeger_closed, tempo_closed = free_ports(7)
    env = {
        "OTEL_VERL_OTLP_GRPC_PORT": str(grpc),
        "OTEL_VERL_OTLP_HTTP_PORT": str(http_),
        "OTEL_VERL_HEALTH_PORT": str(health),
        "OTEL_VERL_METRICS_PORT": str(metrics),
        "OTEL_VERL_TELEMETRY_PORT": str(tele),
        "OTEL_VERL_JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{jaeger_closed}",
        "OTEL_VERL_TEMPO_OTLP_ENDPOINT": f"127.0.0.1:{tempo_closed}",
        "OTEL_VERL_ARCHIVE_DIR": str(tmp_path / "archive"),
        "OTEL_VERL_TAIL_DECISION_WAIT": "2s",
        "OTEL_VERL_TAIL_BASELINE_PERCENT": "0",
    }
    cmd = [
        binary("otelcol-verl"),
        "--config",
        REPO / "collector" / "config.yaml",
        "--config",
        REPO / "collector" / "tail_sampling.yaml",
    ]
    p = start("collector-tail", cmd, env, tmp_path)
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{health}/")[0] == 200, 60, "collector health", procs=[p])
        spool = tmp_path / "spool"
        r = subprocess.run(
            [
                sys.executable,
                str(REPO / "tests" / "backends" / "standin_demo.py"),
                "--steps",
                "2",
                "--spool",
                str(spool),
            ],
            env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{grpc}"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        spans = read_otlp_jsonl(spool.rglob("*.jsonl"))
        traces = {s["trace"] for s in spans.values()}
        # every stand-in step has an aborted request and a failed tool call: all must be kept
        kept = wait_until(
            lambda: (
                (v := _sampled(tele)) and sum(n for k, n in v.items() if 'sampled="true"' in k) >= len(traces) and v
            ),
            60,
            "tail-sampling decisions",
            interval=0.5,
            procs=[p],
        )
        assert sum(n for k, n in kept.items() if 'sampled="false"' in k) == 0, kept
        # span metrics and the archive are not sampled
        archived = wait_until(
            lambda: (a := read_otlp_jsonl((tmp_path / "archive").glob("traces*.jsonl"))) and set(spans) <= set(a),
            30,
            "archive",
            procs=[p],
        )
        assert archived
    finally:
        p.stop()
