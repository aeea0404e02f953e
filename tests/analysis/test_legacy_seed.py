"""The seed logger's contract: what export-legacy writes per worker-step and per request, and a field-by-field
round trip of logs in the seed logger's own format (benchmarks/gen_seed_logs.py writes its events and fields).

The contract (PrinsYin/verl ``multiturn_profile_log``, ``SGLangLogManager`` in sglang_rollout.py): per
worker-step ONE line each of ``preprocessing_duration``, ``async_generate_duration``, ``barrier_wait_duration``,
``total_step_duration``; per request ``async_rollout_request_complete`` with ``turns``, ``turn_timings`` and
the summary fields; per turn ``turn_end``.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.gen_seed_logs import write_seed_logs
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.write.seed_logs import export_legacy
from otel_verl.analysis.write.seed_to_spool import import_legacy

REQUEST_SUMMARY = (
    "request_id",
    "batch_data_id",
    "finish_reason",
    "turns",
    "user_turns",
    "turns_with_tools",
    "response_length",
    "actual_response_tokens",
    "total_sequence_length",
    "avg_turn_duration",
    "avg_engine_call_duration",
    "avg_post_process_duration",
    "total_engine_time",
    "total_post_process_time",
    "engine_time_pct",
    "post_process_time_pct",
    "turn_timings",
)
NO_DURATION = ("request_start", "turn_start", "step_response_length_stats")
TURN_TIMING = (
    "turn",
    "total_duration",
    "pre_process_duration",
    "engine_call_duration",
    "post_process_duration",
    "tool_parsing_duration",
    "has_tool_calls",
    "finish_reason",
)


def _line_count(root: Path) -> int:
    return sum(len(v) for v in _lines(root).values())


def _lines(root: Path) -> dict[str, list[dict]]:
    return {
        p.relative_to(root).as_posix(): [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        for p in sorted(root.rglob("*.jsonl"))
    }


def check_contract(lines: dict[str, list[dict]]) -> None:
    """Every training worker-step file holds the seed's per-worker-step events once, and complete requests."""
    steps = [rel for rel in lines if rel.startswith("step_")]
    assert steps
    for rel in steps:
        names = Counter(e["event"] for e in lines[rel])
        for event in le.WORKER_STEP_EVENTS:
            assert names[event] == 1, f"{rel}: {event} × {names[event]}"
        for e in lines[rel]:
            # the seed logs request_start, turn_start and step_response_length_stats without a duration
            assert isinstance(e.get("duration_sec"), float) or e["event"] in NO_DURATION, e
            assert isinstance(e["workid"], int) and isinstance(e["step"], int)
            if e["event"] == le.REQUEST_COMPLETE:
                extra = e["extra"]
                assert all(k in extra for k in REQUEST_SUMMARY), sorted(set(REQUEST_SUMMARY) - set(extra))
                assert len(extra["turn_timings"]) == extra["turns"]
                for t in extra["turn_timings"]:
                    assert all(k in t for k in TURN_TIMING), sorted(set(TURN_TIMING) - set(t))
                assert extra["finish_reason"].startswith(le.FINISH_REASON_PREFIX)
        requests = [e for e in lines[rel] if e["event"] in (le.REQUEST_COMPLETE, le.REQUEST_ABORTED)]
        assert names[le.TURN_END] == sum(len(e["extra"]["turn_timings"]) for e in requests), rel
        per_step = {e["event"]: e["duration_sec"] for e in lines[rel] if e["event"] in le.WORKER_STEP_EVENTS}
        parts = per_step[le.PREPROCESS] + per_step[le.ASYNC_GENERATE] + per_step[le.BARRIER]
        assert parts <= per_step[le.TOTAL_STEP] + 1e-6, (rel, per_step)


@pytest.fixture(scope="module")
def seed_logs(tmp_path_factory) -> Path:
    return write_seed_logs(tmp_path_factory.mktemp("seed") / "logs", steps=3, workers=3, requests=6, seed=3)


def test_generated_logs_follow_the_contract(seed_logs: Path) -> None:
    """The generator writes what the seed logger writes (so the round trip below tests the real format)."""
    check_contract(_lines(seed_logs))


def test_round_trip_keeps_every_field(seed_logs: Path, tmp_path: Path) -> None:
    """import-legacy → export-legacy gives back every line with every field and value, file by file."""
    import_legacy(seed_logs, tmp_path / "spool")
    n = export_legacy(load_spans(tmp_path / "spool"), tmp_path / "back")
    before, after = _lines(seed_logs), _lines(tmp_path / "back")
    assert sorted(before) == sorted(after)
    assert n == sum(len(v) for v in before.values())
    for rel, entries in before.items():
        key = lambda e: (e["timestamp"], e["event"], json.dumps(e.get("extra"), sort_keys=True))  # noqa: E731
        for a, b in zip(sorted(entries, key=key), sorted(after[rel], key=key), strict=True):
            assert list(a) == list(b), (rel, a["event"])  # same keys in the logger's order
            for field in a:
                assert a[field] == b[field], (rel, a["event"], field)


def test_analyze_reads_the_seed_dir_as_import_does(seed_logs: Path, tmp_path: Path) -> None:
    """``load_spans(LOGDIR)`` on seed logs = load of what import-legacy writes (same spans, same tree)."""
    import_legacy(seed_logs, tmp_path / "spool")
    stats = LoadStats()
    direct = load_spans(seed_logs, stats=stats)
    via_spool = load_spans(tmp_path / "spool")
    cols = ["span_id", "parent_id", "name", "kind", "start_ns", "end_ns", "step", "worker", "request_id"]
    a = direct[cols].sort_values("span_id").reset_index(drop=True)
    b = via_spool[cols].sort_values("span_id").reset_index(drop=True)
    assert a.equals(b)
    assert stats.lines == _line_count(seed_logs)
    # turns are the seed's turn_end windows; the engine call of each turn hangs off its turn
    eng = direct[direct["kind"] == "engine"]
    assert len(eng) == sum(
        e["event"] == le.TURN_ENGINE for v in _lines(seed_logs).values() for e in v
    )  # engine_async_generate_actual inside turn_engine_call is not counted twice
    assert (eng["turn_span"] >= 0).all()
    assert ((direct["kind"] == "turn") & (direct["request_span"] >= 0)).sum() == sum(
        e["event"] == le.TURN_END for v in _lines(seed_logs).values() for e in v
    )


def test_export_of_instrumented_spans_follows_the_contract(planted_spans, tmp_path: Path) -> None:
    """otel_verl spans (not from seed logs) export to the same contract: the per-worker-step events once each
    (not a preprocessing_duration per request), the request summary, a turn_end per turn."""
    export_legacy(planted_spans, tmp_path / "logs")
    lines = _lines(tmp_path / "logs")
    check_contract(lines)
    workers = planted_spans[planted_spans["kind"] == "worker"]
    assert sum(rel.startswith("step_") for rel in lines) == len(workers)
    for rel, entries in lines.items():
        step, worker = int(rel.split("/")[0].split("_")[-1]), int(rel.split("_")[-1].split(".")[0])
        w = workers[(workers["step"] == step) & (workers["worker"] == worker)].iloc[0]
        total = next(e["duration_sec"] for e in entries if e["event"] == le.TOTAL_STEP)
        assert total >= w["duration"] - 1e-6


def _by_span(df):
    return df.sort_values("span_id").reset_index(drop=True)


def test_loading_without_the_seed_lines_changes_only_the_kept_lines(seed_logs: Path, monkeypatch) -> None:
    """``analyze`` leaves each span's original line out (``seed_lines=False``): every other column is the same,
    row for row, loaded in one process or by forked workers (their parts come back in file order)."""
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")
    with_lines = load_spans(seed_logs, seed_lines=True)
    assert with_lines["extra"].str.contains("verl.legacy.line", regex=False).sum() == _line_count(seed_logs)
    for jobs in ("1", "2"):
        monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", jobs)
        without = load_spans(seed_logs, seed_lines=False)
        assert (without["extra"] == "").all()
        pd.testing.assert_frame_equal(with_lines.drop(columns="extra"), without.drop(columns="extra"))


def test_parallel_import_writes_the_spool_a_single_process_writes(seed_logs: Path, tmp_path: Path, monkeypatch) -> None:
    """With forked workers each appends its own spool files: the same spans, and export-legacy still gives
    back every line. A validation log and a second log of one worker-step (files that name the same
    worker-step) get spool files of their own."""
    logs = tmp_path / "logs"
    shutil.copytree(seed_logs, logs)
    (logs / "val_step_1").mkdir()
    shutil.copy(logs / "step_1" / "worker_0.jsonl", logs / "val_step_1" / "worker_0.jsonl")
    shutil.copy(logs / "step_2" / "worker_1.jsonl", logs / "step_2" / "worker_1_retry.jsonl")
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")
    n1 = import_legacy(logs, tmp_path / "one")
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "3")
    n2 = import_legacy(logs, tmp_path / "two")
    assert n1 == n2
    files = lambda root: sorted(p.relative_to(root).as_posix() for p in root.rglob("*.jsonl"))  # noqa: E731
    assert files(tmp_path / "one") == files(tmp_path / "two")
    a, b = _by_span(load_spans(tmp_path / "one")), _by_span(load_spans(tmp_path / "two"))
    cols = [c for c in a.columns if not c.endswith("_span")]
    assert len(a) == len(b) and a[cols].equals(b[cols])  # (the retry log's worker span is the original's)
    assert "legacy/step_1/worker_0.validate.jsonl" in files(tmp_path / "two")
    assert "legacy/step_2/worker_1.from.step_2.worker_1_retry.jsonl" in files(tmp_path / "two")
    assert (a["validate"] == True).sum() == (b["validate"] == True).sum() > 0  # noqa: E712
    export_legacy(b, tmp_path / "back")
    assert sorted(_lines(tmp_path / "back")) == sorted(k for k in _lines(logs) if "retry" not in k)
