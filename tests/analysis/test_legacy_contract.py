"""export-legacy keeps what the seed's own plotting scripts read, on a real (planted) CPU-demo run.

The scripts are public (PrinsYin/verl, profile-multiturn-scripts/: request_cdf_per_worker_step.py,
req_analysis_and_cdf.py, top_req_analysis_per_worker_step.py, turn_distribution.py); their code is not
copied here. Each entry below names the script(s) that read the event or field, so a change of
write/seed_logs.py that would break one of them fails here.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from otel_verl.analysis.write.seed_logs import export_legacy

pytestmark = pytest.mark.ray

PER_WORKER = ("request_cdf_per_worker_step.py", "req_analysis_and_cdf.py", "top_req_analysis_per_worker_step.py")
PHASE_SCRIPTS = ("req_analysis_and_cdf.py", "top_req_analysis_per_worker_step.py")
ALL = (*PER_WORKER, "turn_distribution.py")

# (event, field, type) → scripts reading it. "*" = every line. Per-worker scripts keep only lines with
# extra.request_id, group them by it, sort each request's events by timestamp, and use
# async_rollout_request_complete's duration as the request's duration.
LINE_FIELDS: dict[tuple[str, str, type | tuple[type, ...]], tuple[str, ...]] = {
    ("*", "event", str): ALL,
    ("*", "duration_sec", (int, float)): ALL,
    ("*", "timestamp", str): PER_WORKER,  # datetime.fromisoformat(ts.replace('Z', '+00:00'))
    ("*", "workid", int): PER_WORKER,
    ("*", "step", int): PER_WORKER,
    ("async_rollout_request_complete", "extra.request_id", str): PER_WORKER,
    ("async_rollout_request_complete", "extra.turns", int): ALL,  # turn_distribution: isinstance(turns, int)
    ("async_rollout_request_complete", "extra.response_length", int): PHASE_SCRIPTS,
    ("async_rollout_request_complete", "extra.finish_reason", str): PHASE_SCRIPTS,  # .split('.')[-1]
    ("async_rollout_request_complete", "extra.batch_data_id", int): PHASE_SCRIPTS,
    ("async_rollout_request_complete", "extra.actual_response_tokens", int): PHASE_SCRIPTS,
    ("async_rollout_request_complete", "extra.total_sequence_length", int): PHASE_SCRIPTS,
}

# Phase events the two phase scripts draw as a request's bars (keys of their PHASE_COLORS that
# otel_verl measures), each with extra.request_id.
PHASE_EVENTS = {
    "engine_call": PHASE_SCRIPTS,
    "tool_execution": PHASE_SCRIPTS,
    "tool_parsing": PHASE_SCRIPTS,
    "tool_response_processing": PHASE_SCRIPTS,
    "reward_calculation": PHASE_SCRIPTS,
}

# Not read by those four scripts but by the seed's write-ups (seed 000's event table, seed 001's
# over-sample analysis): the worker, barrier and aborted-request events.
SEED_EVENTS = {
    "async_rollout_with_monitoring_duration": ("total_requests", "completed_count"),
    "barrier_wait_duration": (),
    "aborted_request_with_cancelled_error": ("request_id",),
}


def _field(entry: dict, path: str):
    cur = entry
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return KeyError
        cur = cur[part]
    return cur


def _no_nan(token: str):
    raise ValueError(f"{token} is not JSON")


@pytest.fixture(scope="module")
def exported(demo_planted, tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    _opts, spans, _analysis, _out = demo_planted
    out = tmp_path_factory.mktemp("legacy")
    n = export_legacy(spans, out)
    lines: dict[str, list[dict]] = {}
    for path in sorted(out.rglob("*.jsonl")):
        rel = path.relative_to(out).as_posix()
        lines[rel] = [json.loads(x, parse_constant=_no_nan) for x in path.read_text().splitlines()]
    assert sum(len(v) for v in lines.values()) == n > 0
    return out, lines


def test_layout_the_scripts_open(exported, demo_planted):
    out, lines = exported
    opts = demo_planted[0]
    # step_<n>/worker_<rank>.jsonl; the per-worker scripts open step_N/worker_0.jsonl and
    # turn_distribution.py sorts the step_* dirs by int(name.split('_')[-1])
    # the validation rollout before step 1 goes to val_step_0/, which the scripts' step_* never match
    assert all(re.fullmatch(r"(val_)?step_\d+/worker_\d+\.jsonl", rel) for rel in lines)
    steps = sorted(int(p.name.split("_")[-1]) for p in out.iterdir() if p.is_dir() and p.name.startswith("step_"))
    assert steps == list(range(1, opts.steps + 1))
    assert all((out / f"step_{s}" / "worker_0.jsonl").exists() for s in range(1, opts.steps + 1))


def test_validation_is_marked_and_kept_apart(exported, demo_planted):
    """verl's val_before_train rollout: its own val_step_0/ dir, every line "validate": true, never in step_<n>/;
    imported back it is validation again, not a training step."""
    from otel_verl.analysis import Tables
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.write.seed_to_spool import import_legacy

    out, lines = exported
    _opts, spans, _analysis, _ = demo_planted
    val = {rel: f for rel, f in lines.items() if rel.startswith("val_")}
    assert val and all(rel.startswith("val_step_0/") for rel in val)
    assert all(e.get("validate") is True for f in val.values() for e in f)
    assert not any(e.get("validate") for rel, f in lines.items() if rel not in val for e in f)
    n_val = int(((spans["kind"] == "request") & spans["validate"].fillna(False).astype(bool)).sum())
    assert sum(e["event"] == "async_rollout_request_complete" for f in val.values() for e in f) == n_val > 0
    back_dir = out.parent / (out.name + "-back")
    import_legacy(out, back_dir)
    back = load_spans(back_dir)
    req = back[back["kind"] == "request"]
    assert int(req["validate"].fillna(False).astype(bool).sum()) == n_val
    assert list(Tables.build(back).steps["step"]) == sorted(int(s) for s in spans.loc[spans["kind"] == "step", "step"])


def test_every_field_the_scripts_read(exported):
    _out, lines = exported
    entries = [e for file in lines.values() for e in file]
    for (event, path, typ), scripts in LINE_FIELDS.items():
        subject = [e for e in entries if event == "*" or e["event"] == event]
        assert subject, f"no {event} lines (read by {', '.join(scripts)})"
        for e in subject:
            value = _field(e, path)
            assert value is not KeyError, f"{event}.{path} missing (read by {', '.join(scripts)}): {e}"
            assert isinstance(value, typ) and not isinstance(value, bool), f"{event}.{path}={value!r} ({scripts})"
    for e in entries:
        datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))


def test_phase_events_belong_to_requests(exported):
    _out, lines = exported
    for rel, file in lines.items():
        requests = {e["extra"]["request_id"] for e in file if e["event"] == "async_rollout_request_complete"}
        for e in file:
            if e["event"] in PHASE_EVENTS:
                assert e.get("extra", {}).get("request_id") in requests | {
                    x["extra"]["request_id"] for x in file if x["event"] == "aborted_request_with_cancelled_error"
                }, f"{rel}: {e}"
    names = Counter(e["event"] for file in lines.values() for e in file)
    for event, scripts in PHASE_EVENTS.items():
        assert names[event] > 0, f"no {event} events (read by {', '.join(scripts)})"


def test_requests_and_turns_match_the_spans(exported, demo_planted):
    _out, lines = exported
    _opts, spans, _analysis, _ = demo_planted
    req = spans[(spans["kind"] == "request") & ~spans["validate"].fillna(False).astype(bool)]
    by_step: dict[int, Counter] = defaultdict(Counter)
    for rel, file in lines.items():
        if rel.startswith("val_"):
            continue  # validation, checked above
        step = int(rel.split("/")[0].split("_")[1])
        for e in file:
            by_step[step][e["event"]] += 1
            if e["event"] == "async_rollout_request_complete":
                timings = e["extra"]["turn_timings"]
                assert len(timings) == e["extra"]["turns"]
                assert [t["turn"] for t in timings] == list(range(len(timings)))
                assert all(t["engine_call_duration"] <= t["total_duration"] + 1e-6 for t in timings)
    for step, group in req.groupby("step"):
        exported_n = by_step[int(step)]["async_rollout_request_complete"]
        exported_n += by_step[int(step)]["aborted_request_with_cancelled_error"]
        assert exported_n == len(group), step
        aborted = int((group["request_status"] == "aborted").sum())
        assert by_step[int(step)]["aborted_request_with_cancelled_error"] == aborted, step


def test_seed_writeup_events(exported):
    _out, lines = exported
    entries = [e for file in lines.values() for e in file]
    for event, fields in SEED_EVENTS.items():
        found = [e for e in entries if e["event"] == event]
        assert found, f"no {event} lines"
        assert all(f in e.get("extra", {}) for e in found for f in fields), event
