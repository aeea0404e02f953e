"""``export-legacy``: otel_verl spans → the seed's ``step_<n>/worker_<rank>.jsonl`` logs.

So the seed's plotting scripts run on otel_verl data: same layout, same event names
(``async_rollout_request_complete`` with ``turns``/``turn_timings``, ``*_duration`` events),
timestamp = event end time.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis import legacy_events as le
from otel_verl.analysis import model


def iso(ns: int) -> str:
    """Naive ISO timestamp (UTC) with microseconds, like the seed's ``datetime.now().isoformat()``."""
    return (
        datetime.fromtimestamp(ns // 10**9, tz=timezone.utc)
        .replace(microsecond=(ns % 10**9) // 1000, tzinfo=None)
        .isoformat()
    )


def _clean(v: Any) -> Any:
    if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def export_legacy(spans: pd.DataFrame, out: str | Path) -> int:
    """Write one log file per (step, worker); returns lines written."""
    out = Path(out)
    sp = spans[spans["step"].notna() & spans["worker"].notna()]
    turns = sp[sp["kind"] == "turn"].sort_values("turn_index")
    turn_timings = turns.groupby("request_span")["duration"].agg(list)
    lines: dict[tuple[int, int], list[tuple[int, dict[str, Any]]]] = {}
    for row in sp.itertuples(index=True):
        kind = row.kind
        step, worker = int(row.step), int(row.worker)
        base: dict[str, Any] = {"timestamp": iso(int(row.end_ns)), "duration_sec": float(row.duration)}
        extra: dict[str, Any] = {}
        if kind == "request":
            rid = _clean(row.request_id)
            event = le.REQUEST_ABORTED if row.request_status == "aborted" else le.REQUEST_COMPLETE
            tt = turn_timings.get(row.Index, [])
            extra = {
                "request_id": rid,
                "turns": _clean(row.num_turns) if pd.notna(row.num_turns) else len(tt),
                "turn_timings": [float(x) for x in tt],
                "status": _clean(row.request_status),
                "reward_score": _clean(row.reward_score),
                "response_tokens": _clean(row.response_tokens),
            }
        elif kind == "worker":
            event = le.WORKER_ROLLOUT
            extra = {"total_requests": _clean(row.num_requests), "completed_count": _clean(row.num_completed)}
        elif kind == "barrier":
            event = le.BARRIER
        elif kind in le.EXPORT_NAME and row.request_span >= 0:
            event = le.EXPORT_NAME[kind]
            extra = {"request_id": _clean(row.request_id)}
            if pd.notna(row.turn_index):
                extra["turn"] = int(row.turn_index)
            if kind == "tool":
                extra["tool_name"] = _clean(row.tool_name) or str(row.name).replace("execute_tool ", "")
            if kind == "engine":
                extra["output_tokens"] = _clean(row.output_tokens)
                extra["input_tokens"] = _clean(row.input_tokens)
            if kind == "preprocess":
                extra["kind"] = _clean(row.preprocess_kind)
        elif kind in ("other",) or (kind in le.EXPORT_NAME and row.request_span < 0):
            event = _clean(row.event_origin) or str(row.name)
            if row.request_span >= 0:
                extra = {"request_id": _clean(row.request_id)}
        else:
            continue  # turn spans live in turn_timings; step/phase spans are not per worker
        entry = {"timestamp": base["timestamp"], "event": event, "duration_sec": base["duration_sec"]}
        if extra:
            entry["extra"] = {k: v for k, v in extra.items() if v is not None}
        entry["workid"] = worker
        entry["step"] = step
        lines.setdefault((step, worker), []).append((int(row.end_ns), entry))
    n = 0
    for (step, worker), entries in lines.items():
        path = out / f"step_{step}" / f"worker_{worker}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        entries.sort(key=lambda x: x[0])
        path.write_text("".join(json.dumps(e) + "\n" for _, e in entries))
        n += len(entries)
    return n


__all__ = ["export_legacy", "iso", "model"]
