"""import-legacy / export-legacy on hand-made seed logs and round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from otel_verl.analysis.detectors import diagnose
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.legacy_export import export_legacy
from otel_verl.analysis.legacy_import import import_legacy
from otel_verl.analysis.load import load_spans
from otel_verl.cli import app


def seed_line(ts: str, event: str, dur: float, worker: int, step: int, extra: dict | None = None) -> str:
    d = {"timestamp": ts, "event": event, "duration_sec": dur}
    if extra is not None:
        d["extra"] = extra
    d.update({"workid": worker, "step": step})
    return json.dumps(d) + "\n"


@pytest.fixture
def seed_logs(tmp_path: Path) -> Path:
    """Two workers of step 4 in the seed's own event names (seed 002 lines included verbatim in shape)."""
    root = tmp_path / "logs"
    (root / "step_4").mkdir(parents=True)
    w2 = [
        seed_line("2025-08-11T23:18:21.000000", "preprocessing_duration", 0.5, 2, 4, {"request_id": "a"}),
        seed_line("2025-08-11T23:18:25.000000", "engine_async_generate", 3.5, 2, 4, {"request_id": "a", "turn": 0}),
        seed_line("2025-08-11T23:18:26.000000", "reward_calculation_duration", 0.25, 2, 4, {"request_id": "a"}),
        seed_line(
            "2025-08-11T23:18:26.000000",
            "async_rollout_request_complete",
            5.5,
            2,
            4,
            {"request_id": "a", "turns": 1, "turn_timings": [4.0]},
        ),
        seed_line(
            "2025-08-11T23:19:45.001830",
            "aborted_request_with_cancelled_error_padding",
            0.002585887908935547,
            2,
            4,
            {"request_id": "661a96a0"},
        ),
        seed_line(
            "2025-08-11T23:19:45.001989",
            "aborted_request_with_cancelled_error",
            84.5104877948761,
            2,
            4,
            {"request_id": "45bb6a77"},
        ),
        seed_line(
            "2025-08-11T23:19:45.005685",
            "async_rollout_with_monitoring_duration",
            84.51417350769043,
            2,
            4,
            {"total_requests": 1024, "target_completion": 921, "completed_count": 921},
        ),
        seed_line("2025-08-11T23:19:45.100000", "broadcast_duration", 0.09, 2, 4),
    ]
    w3 = [
        seed_line("2025-08-11T23:19:40.000000", "async_rollout_with_monitoring_duration", 79.0, 3, 4),
        seed_line("2025-08-11T23:19:45.000000", "barrier_wait_duration", 5.0, 3, 4),
    ]
    (root / "step_4" / "worker_2.jsonl").write_text("".join(w2))
    (root / "step_4" / "worker_3.jsonl").write_text("".join(w3))
    return root


def test_import_seed_logs(seed_logs: Path, tmp_path: Path) -> None:
    n = import_legacy(seed_logs, tmp_path / "spool")
    df = load_spans(tmp_path / "spool")
    assert n == len(df)
    req = df[df["kind"] == "request"].set_index("request_id")
    assert req.loc["a", "request_status"] == "completed" and req.loc["a", "duration"] == pytest.approx(5.5)
    assert req.loc["45bb6a77", "request_status"] == "aborted"
    assert req.loc["45bb6a77", "duration"] == pytest.approx(84.5104877948761, abs=1e-6)
    eng = df[df["kind"] == "engine"].iloc[0]
    assert eng["request_id"] == "a" and int(eng["turn_index"]) == 0 and eng["duration"] == pytest.approx(3.5)
    assert df[df["kind"] == "reward"]["request_id"].tolist() == ["a"]
    bar = df[df["kind"] == "barrier"].iloc[0]
    assert int(bar["worker"]) == 3 and bar["duration"] == pytest.approx(5.0)
    # unknown events are kept, not dropped
    other = df[df["kind"] == "other"]
    assert set(other["event_origin"]) == {"aborted_request_with_cancelled_error_padding", "broadcast_duration"}
    w = df[(df["kind"] == "worker") & (df["worker"] == 2)].iloc[0]
    assert int(w["num_requests"]) == 1024 and w["duration"] == pytest.approx(84.51417350769043, abs=1e-6)
    ab = [f for f in diagnose(df) if f.kind == "aborted_waste"]
    assert ab and ab[0].details["aborted"] == 1


def test_bad_seed_line(tmp_path: Path) -> None:
    (tmp_path / "step_1").mkdir()
    (tmp_path / "step_1" / "worker_0.jsonl").write_text('{"event": "x"}\n')
    with pytest.raises(AnalysisInputError, match=r"worker_0\.jsonl:1: not a seed log line"):
        import_legacy(tmp_path, tmp_path / "out")
    res = CliRunner().invoke(app, ["import-legacy", str(tmp_path), "--spool", str(tmp_path / "out")])
    assert res.exit_code == 2 and "worker_0.jsonl:1" in res.output


def test_round_trip_preserves_counts_and_durations(planted_spans, tmp_path: Path) -> None:
    export_legacy(planted_spans, tmp_path / "logs")
    lines = [json.loads(x) for p in (tmp_path / "logs").rglob("*.jsonl") for x in p.read_text().splitlines()]
    done = [x for x in lines if x["event"] == "async_rollout_request_complete"]
    assert done and all(len(x["extra"]["turn_timings"]) == x["extra"]["turns"] for x in done)
    import_legacy(tmp_path / "logs", tmp_path / "spool")
    back = load_spans(tmp_path / "spool")
    for kind in ("request", "turn", "engine", "tool", "tool_parse", "preprocess", "reward", "barrier", "worker"):
        a = planted_spans[planted_spans["kind"] == kind]["duration"].sort_values().to_numpy()
        b = back[back["kind"] == kind]["duration"].sort_values().to_numpy()
        assert len(a) == len(b), kind
        assert abs(a - b).max() < 2e-6, kind
    a_st = planted_spans[planted_spans["kind"] == "request"].groupby("request_status").size()
    b_st = back[back["kind"] == "request"].groupby("request_status").size()
    assert a_st.to_dict() == b_st.to_dict()
    kinds = {(f.kind, f.step, f.worker) for f in diagnose(back) if f.severity != "info"}
    assert {("idle_gap", 3, 1), ("slow_event", 5, 2), ("turn_anomaly", 6, 0)} <= kinds
