"""import-legacy / export-legacy on hand-made seed logs and round trips."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from builder import Plan, all_findings, build_run
from typer.testing import CliRunner

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.write.seed_logs import export_legacy
from otel_verl.analysis.write.seed_to_spool import import_legacy
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
    ab = [f for f in all_findings(df) if f.kind == "aborted_waste"]
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
        # the seed's once-per-worker-step preprocessing_duration comes back as a worker-level preprocess span
        a = planted_spans[planted_spans["kind"] == kind]["duration"].sort_values().to_numpy()
        b = back[(back["kind"] == kind) & ((back["request_span"] >= 0) | (kind != "preprocess"))]
        b = b["duration"].sort_values().to_numpy()
        assert len(a) == len(b), kind
        assert abs(a - b).max() < 2e-6, kind
    worker_level = back[(back["kind"] == "preprocess") & (back["request_span"] < 0)]
    assert len(worker_level) == int((planted_spans["kind"] == "worker").sum())
    a_st = planted_spans[planted_spans["kind"] == "request"].groupby("request_status").size()
    b_st = back[back["kind"] == "request"].groupby("request_status").size()
    assert a_st.to_dict() == b_st.to_dict()
    kinds = {(f.kind, f.step, f.worker) for f in all_findings(back) if f.severity != "info"}
    assert kinds == {("stall", 3, 1), ("slow_reward", 5, 2), ("long_response", 6, 0)}


# ------------------------------------------------------------------ seed 000: worker-level events only
# Seed 000's profiler logged per worker and step (SGLangLogManager in sglang_rollout.py): the rollout's
# preprocessing_duration and async_generate_duration, small *_duration events, barrier_wait_duration,
# then broadcast_duration after the barrier. No per-request lines. Steps 1-3 below have the write-up's
# shares exactly (74.05% generate, 18.57% preprocess, 6.39% barrier, 0.52% broadcast, ...); in step 4
# worker 0 generates for 170 s while the others wait 150 s at the barrier (the seed's step 67).
SEED000_GEN = (80.44, 71.26, 72.25, 72.25)  # mean 74.05; barrier = 80.44 - gen (mean 6.39)


def _seed000_lines(step: int, worker: int, t0: datetime, gen: float, pre: float, barrier: float, broadcast: bool):
    events = [("preprocessing_duration", pre), ("async_generate_duration", gen)]
    if step <= 3:
        events += [("data_extraction_duration", 0.35), ("cache_flush_duration", 0.08), ("padding_duration", 0.04)]
    events.append(("barrier_wait_duration", barrier))
    if broadcast:
        events.append(("broadcast_duration", 0.52 if step <= 3 else 0.15))
    t, out = t0, []
    for event, dur in events:
        t += timedelta(seconds=dur)
        out.append(seed_line(t.isoformat(), event, dur, worker, step))
    return "".join(out)


def write_seed000(root: Path, broadcast: bool = True) -> Path:
    for step in range(1, 5):
        (root / f"step_{step}").mkdir(parents=True)
        t0 = datetime(2025, 8, 11, 12, 0) + timedelta(minutes=5 * step)
        for w in range(4):
            if step <= 3:
                gen, pre, barrier = SEED000_GEN[w], 18.57, SEED000_GEN[0] - SEED000_GEN[w]
            else:
                gen, pre, barrier = (170.0, 6.0, 0.0) if w == 0 else (20.0, 6.0, 150.0)
            text = _seed000_lines(step, w, t0, gen, pre, barrier, broadcast)
            (root / f"step_{step}" / f"worker_{w}.jsonl").write_text(text)
    return root


@pytest.fixture(params=[True, False], ids=["with-broadcast", "no-broadcast"])
def seed000(request, tmp_path: Path):
    logs = write_seed000(tmp_path / "logs", broadcast=request.param)
    import_legacy(logs, tmp_path / "spool")
    return request.param, load_spans(tmp_path / "spool")


def test_seed000_event_share_table(seed000) -> None:
    """The seed's 'Avg % of Total Time' table, from worker-level events (no request spans at all)."""
    from otel_verl.analysis.figures.event_share import compute_event_share, event_share_table

    broadcast, spans = seed000
    assert not (spans["kind"] == "request").any()
    table = event_share_table(compute_event_share(spans)).set_index("event")["avg_percent"]
    # steps 1-3: every worker-step is 100 s, in the write-up's proportions
    exact = {"engine": 74.05, "preprocess": 18.57, "barrier": 6.39, "data_extraction_duration": 0.35}
    exact |= {"cache_flush_duration": 0.08, "padding_duration": 0.04}
    if broadcast:
        exact["broadcast_duration"] = 0.52
    total = sum(exact.values())
    # step 4: 4 x 6 s preprocess, 170 + 3 x 20 s generate, 3 x 150 s barrier, 4 x 0.15 s broadcast
    step4 = {"engine": 230.0, "preprocess": 24.0, "barrier": 450.0, "broadcast_duration": 0.6 if broadcast else 0.0}
    total4 = sum(step4.values())
    for event in set(exact) | set(step4):
        want = (3 * 100 * exact.get(event, 0.0) / total + 100 * step4.get(event, 0.0) / total4) / 4
        assert table.get(event, 0.0) == pytest.approx(want, abs=1e-6), event
    assert table.sum() == pytest.approx(100.0)
    assert "idle" not in table.index or table["idle"] == pytest.approx(0.0, abs=1e-6)


def test_seed000_straggler_and_phase_bars(seed000) -> None:
    """Events after the barrier (broadcast) stay out of the worker's rollout: worker 0 is the straggler of
    step 4, and each worker's bar (its events + barrier + what came after) is the step, counted once."""
    from otel_verl.analysis.figures.worker_phases import PHASES, compute_worker_phases

    broadcast, spans = seed000
    found = all_findings(spans)
    # no request spans at all: each worker is its own chain of parts, and worker 0's engine time is the cause
    (slow,) = [f for f in found if f.severity != "info"]
    assert (slow.kind, slow.steps, slow.worker, slow.details["scope"]) == ("slow_engine", [4], 0, "worker")
    # 90 s more engine time than usual, but 12.6 s less preprocessing: the step lost 76 s, and so did its cause
    assert slow.value == pytest.approx(170.0, abs=1e-3) and slow.seconds == pytest.approx(76.3, abs=0.5)
    assert slow.message.startswith("engine calls took 170 s on worker 0")
    wp = compute_worker_phases(spans).set_index(["step", "worker"])
    after = 0.15 if broadcast else 0.0
    assert wp.loc[(4, 0), "rollout_s"] == pytest.approx(176.0, abs=1e-6)
    assert wp.loc[(4, 1), "rollout_s"] == pytest.approx(26.0, abs=1e-6)
    assert (wp.loc[(4, 0), "engine"], wp.loc[(4, 1), "engine"]) == pytest.approx((170.0, 20.0))
    assert (wp.loc[(4, 0), "barrier"], wp.loc[(4, 1), "barrier"]) == pytest.approx((0.0, 150.0))
    total = wp[list(PHASES)].sum(axis=1)
    np.testing.assert_allclose(total.xs(4, level="step"), 176.0 + after, atol=1e-6)
    np.testing.assert_allclose(total.xs(1, level="step"), 100.0 if broadcast else 99.48, atol=1e-6)


def test_validation_round_trip(tmp_path: Path) -> None:
    """A validation rollout (verl.validate, step 0, as verl's val_before_train) exports to val_step_0/ with
    "validate": true and imports back as validation: not a training step, not in the step baselines."""
    b = build_run(Plan(steps=4, workers=2, requests=12))
    for w in range(2):
        ws = b.span(
            "verl.rollout.worker", -9.0, -5.0, step=0, file=f"worker_{w}.jsonl",
            **{"verl.worker.rank": w, "verl.step": 0, "verl.validate": True},
        )  # fmt: skip
        for r in range(3):
            req = b.span(
                "verl.rollout.request", -9.0 + r, -6.0, ws, step=0, file=f"worker_{w}.jsonl",
                **{"verl.request.id": f"val{w}{r}", "verl.request.num_turns": 1},
            )  # fmt: skip
            b.span("text_completion m", -9.0 + r, -6.5, req, step=0, file=f"worker_{w}.jsonl")
    b.write(tmp_path / "spool")
    spans = load_spans(tmp_path / "spool")
    n = export_legacy(spans, tmp_path / "logs")
    assert n > 0 and not (tmp_path / "logs" / "step_0").exists()
    val = [
        json.loads(x)
        for p in (tmp_path / "logs" / "val_step_0").glob("*.jsonl")
        for x in p.read_text().split("\n")[:-1]
    ]
    assert len([e for e in val if e["event"] == "async_rollout_request_complete"]) == 6
    assert all(e["validate"] is True and e["step"] == 0 for e in val)
    import_legacy(tmp_path / "logs", tmp_path / "back")
    back = load_spans(tmp_path / "back")
    req = back[back["kind"] == "request"]
    assert sorted(req.loc[req["validate"].fillna(False).astype(bool), "request_id"]) == sorted(
        f"val{w}{r}" for w in range(2) for r in range(3)
    )
    out = tmp_path / "report"
    from otel_verl.analysis import analyze

    res = analyze(back, out, html_report=False)
    assert res.summary["steps"] == [1, 2, 3, 4]
    assert res.summary["requests"] == 4 * 2 * 12
