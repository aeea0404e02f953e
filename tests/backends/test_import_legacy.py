"""`otel-verl import-legacy LOGDIR --endpoint URL`: seed logs go over OTLP through the real collector into
Jaeger, span for span what the same import writes as a spool."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from otel_verl.cli import app

from .conftest import Backends, wait_until

pytestmark = pytest.mark.backends


def _line(ts: str, event: str, dur: float, worker: int, step: int, extra: dict | None = None) -> str:
    d: dict = {"timestamp": ts, "event": event, "duration_sec": dur, "workid": worker, "step": step}
    if extra is not None:
        d["extra"] = extra
    return json.dumps(d) + "\n"


def _seed_logs(root: Path) -> Path:
    """Two steps × two workers in the seed profiler's names, an unknown event included."""
    for step in (4, 5):
        for worker in (0, 1):
            ts = f"2025-08-11T23:{10 + step}"
            ev = {"request_id": f"s{step}w{worker}", "turn": 0}
            done = {"request_id": ev["request_id"], "turns": 1, "turn_timings": [{"turn": 0, "total_duration": 4.0}]}
            lines = [
                _line(f"{ts}:21.000000", "engine_call", 3.0, worker, step, ev),
                _line(f"{ts}:22.000000", "tool_execution", 0.5, worker, step, ev),
                _line(f"{ts}:23.000000", "reward_calculation", 0.2, worker, step, {"request_id": ev["request_id"]}),
                _line(f"{ts}:23.500000", "async_rollout_request_complete", 5.5, worker, step, done),
                _line(f"{ts}:24.000000", "broadcast_duration", 0.1, worker, step),
                _line(f"{ts}:25.000000", "barrier_wait_duration", 1.0 + worker, worker, step),
            ]
            path = root / f"step_{step}" / f"worker_{worker}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(lines))
    return root


def test_import_legacy_to_an_endpoint(backends: Backends, tmp_path: Path):
    from otel_verl.analysis.read import load_spans

    logs = _seed_logs(tmp_path / "logs")
    run = f"legacy-{uuid.uuid4().hex[:8]}"  # trace ids derive from the run name: unique in this Jaeger
    args = ["import-legacy", str(logs), "--spool", str(tmp_path / "spool"), "--run", run]
    res = CliRunner().invoke(app, [*args, "--endpoint", backends.collector_otlp_grpc])
    assert res.exit_code == 0, res.output
    spool = load_spans(tmp_path / "spool")
    assert f"sent {len(spool)} spans to {backends.collector_otlp_grpc}" in res.output
    assert set(spool["service"]) == {"otel-verl-legacy"}
    traces = set(spool["trace_id"])
    assert len(traces) == 2  # one per step

    def arrived():
        got = load_spans(
            backends.jaeger_url,
            source_type="jaeger",
            service="otel-verl-legacy",
            since_ns=int(time.mktime((2025, 8, 11, 0, 0, 0, 0, 0, 0)) * 1e9),
            until_ns=int(time.mktime((2025, 8, 13, 0, 0, 0, 0, 0, 0)) * 1e9),
        )
        got = got[got["trace_id"].isin(traces)]
        return [got] if len(got) >= len(spool) else None

    (jaeger,) = wait_until(arrived, 60, "imported spans in Jaeger", interval=1.0)
    assert len(jaeger) == len(spool)
    assert set(jaeger["span_id"]) == set(spool["span_id"])
    merged = jaeger.set_index("span_id").loc[spool["span_id"]]
    assert (merged["name"].to_numpy() == spool["name"].to_numpy()).all()
    assert (merged["parent_id"].to_numpy() == spool["parent_id"].to_numpy()).all()
    kinds = jaeger["kind"].value_counts().to_dict()
    assert kinds["request"] == 4 and kinds["engine"] == 4 and kinds["tool"] == 4 and kinds["barrier"] == 4
    assert "broadcast_duration" in set(jaeger["name"])  # unknown events kept


def test_import_legacy_endpoint_down_is_one_line(tmp_path: Path):
    from .conftest import free_ports

    logs = _seed_logs(tmp_path / "logs")
    (port,) = free_ports(1)
    res = CliRunner().invoke(app, ["import-legacy", str(logs), "--endpoint", f"http://127.0.0.1:{port}"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert f"127.0.0.1:{port}" in res.output
    res = CliRunner().invoke(app, ["import-legacy", str(logs)])
    assert res.exit_code == 2 and "--spool" in res.output and "--endpoint" in res.output
